"""The GPU machine `make gpu-check` runs on, as nvidia-smi says it directly, and the
record of what it printed (tests/fixtures/gpu/<model>-<driver>/), sanitised.

nvidia-smi is the reference every Kiln program is compared with, so it is asked here
with its own time limit: a hung driver gives one clear line, never a hung suite.
"""

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SMI_TIMEOUT_S = float(os.environ.get("KILN_GPU_SMI_TIMEOUT", "30"))
# nvidia-smi's documented exit codes that mean this is no working GPU machine.
SMI_EXIT = {
    6: "no GPU was found",
    9: "the NVIDIA driver is not loaded",
    12: "the NVML library was not found",
    15: "a GPU has fallen off the bus",
}
# The per-GPU facts every test compares with (nvidia-smi --query-gpu field names).
FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "compute_cap",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "memory.total",
    "uuid",
    "serial",
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class NotAGpuMachine(Exception):
    """No NVIDIA GPU here: the suite skips, saying why."""


class BrokenGpuMachine(Exception):
    """nvidia-smi is there but does not answer right: the suite stops with this line."""


def smi(*args: str, timeout: float = SMI_TIMEOUT_S) -> str:
    """nvidia-smi's output; BrokenGpuMachine (one line) when it hangs or fails."""
    try:
        done = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout
        )
    except FileNotFoundError as exc:
        raise NotAGpuMachine("nvidia-smi is not installed: no NVIDIA driver here") from exc
    except subprocess.TimeoutExpired as exc:
        raise BrokenGpuMachine(
            f"nvidia-smi {' '.join(args)} did not answer in {timeout:g} s: the driver or a "
            "GPU is hung"
        ) from exc
    if done.returncode:
        said = (done.stdout + done.stderr).strip().splitlines()
        known = SMI_EXIT.get(done.returncode, f"exit {done.returncode}")
        raise BrokenGpuMachine(
            f"nvidia-smi {' '.join(args)}: {known}" + (f" ({said[0].strip()})" if said else "")
        )
    return done.stdout


# NVML's clocks-event reason bits (nvml.h, nvmlClocksEventReason*), as the mask
# `clocks_event_reasons.active` carries them; the names are the XML's
# clocks_event_reason_* suffixes, as Kiln reads them.
EVENT_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


def event_masks() -> list[int]:
    """Each GPU's active clocks-event reasons, as nvidia-smi's mask, in index order."""
    return [
        int(row["clocks_event_reasons.active"], 16)
        for row in query(("clocks_event_reasons.active",))
    ]


def query(fields: tuple[str, ...] = FIELDS) -> list[dict[str, str]]:
    text = smi(f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits")
    rows = []
    for line in text.splitlines():
        if line.strip():
            rows.append(dict(zip(fields, (v.strip() for v in line.split(",")), strict=True)))
    return rows


def pci_address(smi_bus_id: str) -> str:
    """nvidia-smi's 00000000:18:00.0 as sysfs names it: 0000:18:00.0."""
    domain, rest = smi_bus_id.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


@dataclass(frozen=True)
class Machine:
    gpus: list[dict[str, str]]

    @property
    def model(self) -> str:
        return self.gpus[0]["name"]

    @property
    def driver(self) -> str:
        return self.gpus[0]["driver_version"]

    @property
    def slug(self) -> str:
        """<gpu-model>-<driver>: 'NVIDIA H100 80GB HBM3', 580.159.04 ->
        h100-80gb-hbm3-580.159.04."""
        model = re.sub(r"^nvidia\s+", "", self.model.strip(), flags=re.I)
        return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + f"-{self.driver}"

    def secrets(self) -> list[str]:
        """What must not be written in the clear: serials and UUIDs."""
        found = {g["serial"] for g in self.gpus} | {g["uuid"] for g in self.gpus}
        return sorted(s for s in found if s and s not in ("N/A", "[N/A]"))


def probe(pci_gpus: int) -> Machine:
    """The machine, or NotAGpuMachine / BrokenGpuMachine. pci_gpus: the NVIDIA GPUs on
    the PCI bus (kiln-gpu-detect): with one there, a failing nvidia-smi is a broken GPU
    machine, not a machine without GPUs (a sandbox may show no PCI bus at all)."""
    try:
        gpus = query()
    except NotAGpuMachine as exc:
        if pci_gpus:
            raise BrokenGpuMachine(f"{pci_gpus} NVIDIA GPU(s) on the PCI bus, but {exc}") from exc
        raise
    except BrokenGpuMachine as exc:
        if not pci_gpus:
            raise NotAGpuMachine(f"no NVIDIA GPU on the PCI bus ({exc})") from exc
        raise
    if not gpus:
        raise NotAGpuMachine("nvidia-smi lists no GPU")
    return Machine(gpus)


def sanitise(text: str, secrets: list[str], hostname: str = "") -> str:
    """The text with each serial, UUID and the host's name replaced: the same value by
    the same placeholder everywhere, so records still agree with each other."""
    # UUIDs go below, by pattern, with every other UUID the text holds.
    serials = sorted((s for s in secrets if not _UUID.search(s)), key=len, reverse=True)
    for number, serial in enumerate(serials, start=1):
        text = text.replace(serial, f"SERIAL{number:07d}")
    seen: dict[str, str] = {}

    def uuid(match: re.Match[str]) -> str:
        value = match.group().lower()
        if value == "00000000-0000-0000-0000-000000000000":
            return match.group()
        seen.setdefault(value, f"00000000-0000-0000-0000-{len(seen) + 1:012x}")
        return seen[value]

    text = _UUID.sub(uuid, text)
    if hostname:
        text = re.sub(rf"\b{re.escape(hostname)}\b", "gpu-test-host", text)
    return text


class Record:
    """Writes what the machine printed under one directory, sanitised, and an index."""

    def __init__(self, directory: Path, machine: Machine, hostname: str) -> None:
        self.directory = directory
        self.machine = machine
        self.hostname = hostname
        self.index: dict[str, str] = {}

    def write(self, name: str, text: str, command: str) -> str:
        clean = sanitise(text, self.machine.secrets(), self.hostname)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / name).write_text(clean)
        self.index[name] = command
        return clean

    def close(self, summary: list[str]) -> None:
        if not self.index:
            return
        lines = [
            f"# Recorded by `make gpu-check`: {self.machine.model}, driver {self.machine.driver}",
            "",
            f"{len(self.machine.gpus)} GPU(s). Serials, UUIDs and the host name are replaced "
            "by placeholders (tests/gpu/machine.py, sanitise).",
            "",
            "| file | command |",
            "|---|---|",
            *(f"| {name} | `{cmd}` |" for name, cmd in sorted(self.index.items())),
            "",
            *summary,
        ]
        (self.directory / "README.md").write_text("\n".join(lines) + "\n")
