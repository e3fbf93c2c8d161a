"""nvidia-smi's outputs, read once for every reader: `nvidia-smi -q -x` (the XML), the
`--query-*=... --format=csv` tables, `nvidia-smi nvlink -e` (NVLink error counters), and
the kernel's XID lines with NVIDIA's XID catalogue: each XID's class and next step."""

import csv
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

# --- nvidia-smi -q -x ------------------------------------------------------------------


@dataclass(frozen=True)
class SmiGpu:
    """One GPU as `nvidia-smi -q -x` describes it; text fields as printed."""

    bus_id: str
    name: str
    architecture: str
    uuid: str
    vbios: str
    driver: str  # the log's driver_version, on each GPU for the rules that compare them
    persistence: str  # Enabled / Disabled
    uncorrectable_volatile: int  # volatile uncorrectable ECC errors
    remap_pending: bool
    remap_failure: bool
    unrepairable_memory: bool
    clock_events: tuple[str, ...]  # the active clocks_event_reason_* (suffixes)
    width_current: int | None  # PCIe link width
    width_max: int | None
    fabric_state: str  # N/A outside an NVLink domain (NVL72 and the like)
    fabric_status: str
    clique_id: str
    cluster_uuid: str
    # What kiln-metrics reports; None where nvidia-smi says N/A.
    temperature_c: float | None = None
    power_w: float | None = None  # instantaneous draw (older drivers: power_draw)
    power_limit_w: float | None = None  # the enforced limit
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None  # frame buffer
    correctable_volatile: int = 0  # volatile correctable ECC errors
    # Processes holding the GPU (<processes>): what kiln-epilog finds a job left behind.
    processes: tuple["SmiProcess", ...] = ()
    # Every clock event reason nvidia-smi lists, in its order, and whether it is active.
    clock_event_states: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class SmiProcess:
    """One <process_info> of a GPU: a compute (C), graphics (G) or both (C+G) process."""

    pid: int
    name: str
    used_mib: int | None  # None where nvidia-smi says N/A (no memory accounting)


@dataclass(frozen=True)
class SmiLog:
    driver_version: str
    cuda_version: str
    gpus: list[SmiGpu]


def _text(node: ET.Element, path: str) -> str:
    return (node.findtext(path) or "").strip()


def _number(text: str) -> int | None:
    match = re.match(r"\d+", text)
    return int(match.group()) if match else None


def _measure(gpu: ET.Element, *paths: str) -> float | None:
    """The first of `paths` with a number (`71.39 W`, `345 MHz`, `36 C`); None when
    each is missing or N/A."""
    for path in paths:
        match = re.match(r"-?\d+(\.\d+)?", _text(gpu, path))
        if match:
            return float(match.group())
    return None


def _ecc_volatile(gpu: ET.Element, kind: str) -> int:
    """Volatile ECC errors of `kind` (uncorrectable, correctable). Recent drivers split
    them by SRAM/DRAM (`sram_uncorrectable_parity`, `dram_correctable`...); older ones
    give `double_bit/total` and `single_bit/total`."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return 0
    total = volatile.find("double_bit/total" if kind == "uncorrectable" else "single_bit/total")
    if total is not None:
        return _number(total.text or "") or 0
    return sum(
        _number(c.text or "") or 0
        for c in volatile
        if c.tag.split("_")[1:2] == [kind]  # sram_correctable, not sram_uncorrectable
    )


# Drivers from 535 on write <clocks_event_reasons>; older ones <clocks_throttle_reasons>,
# each child named with its prefix (clocks_event_reason_hw_slowdown).
_CLOCK_EVENTS = (
    ("clocks_event_reasons", "clocks_event_reason_"),
    ("clocks_throttle_reasons", "clocks_throttle_reason_"),
)


def _clock_event_states(gpu: ET.Element) -> tuple[tuple[str, bool], ...]:
    """(reason, active) for each reason the GPU lists (`hw_slowdown`, ...); a reason
    that is neither Active nor Not Active (N/A) is left out."""
    for parent, prefix in _CLOCK_EVENTS:
        found = gpu.find(parent)
        if found is not None:
            return tuple(
                (event.tag.removeprefix(prefix), (event.text or "").strip() == "Active")
                for event in found
                if (event.text or "").strip() in ("Active", "Not Active")
            )
    return ()


def parse_xml(text: str) -> SmiLog:
    """`nvidia-smi -q -x`. Raises ValueError on text that is not its XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi -q -x printed no XML ({exc})") from exc
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi -q -x printed <{root.tag}>, not <nvidia_smi_log>")
    driver = _text(root, "driver_version")
    widths = "pci/pci_gpu_link_info/link_widths"
    gpus = [
        SmiGpu(
            bus_id=gpu.get("id", ""),
            name=_text(gpu, "product_name"),
            architecture=_text(gpu, "product_architecture"),
            uuid=_text(gpu, "uuid"),
            vbios=_text(gpu, "vbios_version"),
            driver=driver,
            persistence=_text(gpu, "persistence_mode"),
            uncorrectable_volatile=_ecc_volatile(gpu, "uncorrectable"),
            remap_pending=_text(gpu, "remapped_rows/remapped_row_pending") == "Yes",
            remap_failure=_text(gpu, "remapped_rows/remapped_row_failure") == "Yes",
            unrepairable_memory=_text(gpu, "ecc_errors/unrepairable_memory") == "Yes",
            clock_events=tuple(name for name, on in _clock_event_states(gpu) if on),
            width_current=_number(_text(gpu, f"{widths}/current_link_width")),
            width_max=_number(_text(gpu, f"{widths}/max_link_width")),
            fabric_state=_text(gpu, "fabric/state"),
            fabric_status=_text(gpu, "fabric/status"),
            clique_id=_text(gpu, "fabric/cliqueId"),
            cluster_uuid=_text(gpu, "fabric/clusterUuid"),
            temperature_c=_measure(gpu, "temperature/gpu_temp"),
            power_w=_measure(
                gpu,
                "gpu_power_readings/instant_power_draw",
                "gpu_power_readings/power_draw",
                "power_readings/power_draw",
            ),
            power_limit_w=_measure(
                gpu, "gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit"
            ),
            sm_clock_mhz=_measure(gpu, "clocks/sm_clock"),
            memory_clock_mhz=_measure(gpu, "clocks/mem_clock"),
            utilization_pct=_measure(gpu, "utilization/gpu_util"),
            memory_used_mib=_measure(gpu, "fb_memory_usage/used"),
            correctable_volatile=_ecc_volatile(gpu, "correctable"),
            processes=tuple(
                SmiProcess(
                    pid=_number(_text(p, "pid")) or 0,
                    name=_text(p, "process_name"),
                    used_mib=_number(_text(p, "used_memory")),
                )
                for p in gpu.findall("processes/process_info")
            ),
            clock_event_states=_clock_event_states(gpu),
        )
        for gpu in root.findall("gpu")
    ]
    return SmiLog(driver, _text(root, "cuda_version"), gpus)


# --- --format=csv --------------------------------------------------------------------


def parse_csv(text: str) -> list[dict[str, str]]:
    """`nvidia-smi --query-...=FIELDS --format=csv`: one dict per row, keyed by the
    field names as queried (the unit dropped from the header: `power.draw [W]` is
    `power.draw`). Values stay as printed (`81559 MiB`, `[N/A]`, `Enabled`)."""
    lines = [line for line in csv.reader(io.StringIO(text), skipinitialspace=True) if line]
    if not lines:
        return []
    header = [name.split(" [", 1)[0].strip() for name in lines[0]]
    return [dict(zip(header, (v.strip() for v in line), strict=False)) for line in lines[1:]]


# --- nvidia-smi nvlink -e ------------------------------------------------------------

NVLINK_ERRORS = ("nvlink", "-e")  # nvidia-smi's arguments: every GPU's every link


@dataclass(frozen=True)
class NvlinkCounter:
    """One `Link <n>: <Name> Errors: <value>` line of `nvidia-smi nvlink -e`."""

    gpu: int  # the header's `GPU <i>:`, nvidia-smi's index
    link: int
    counter: str  # the name lower-cased, words joined by _: replay, recovery, crc, crc_flit
    value: int


_NVLINK_GPU = re.compile(r"GPU (\d+):")
_NVLINK_LINK = re.compile(r"\s+Link (\d+): (.+)")
_NVLINK_COUNTER = re.compile(r"([A-Za-z][A-Za-z ]*?) Errors: (\S+)")


def nvlink_links(text: str) -> dict[int, list[tuple[int, str]]]:
    """The shape every `nvidia-smi nvlink` listing shares (`-s`, `-e`): a header per
    GPU, `GPU <i>: <name> (UUID: ...)`, then indented `Link <n>: <text>` lines (a tab and
    a space). By GPU index, each link line's number and text, in order; a GPU without
    link lines has none, link lines before any header and other lines are ignored."""
    found: dict[int, list[tuple[int, str]]] = {}
    gpu = None
    for line in text.splitlines():
        if header := _NVLINK_GPU.match(line):
            gpu = int(header.group(1))
            found[gpu] = []
        elif (link := _NVLINK_LINK.match(line)) and gpu is not None:
            found[gpu].append((int(link.group(1)), link.group(2).strip()))
    return found


def parse_nvlink_errors(text: str) -> list[NvlinkCounter]:
    """`nvidia-smi nvlink -e`: for each link a line per counter
    (`Link 0: Replay Errors: 0`; Replay, Recovery and CRC from driver 535 on, CRC Flit
    and CRC Data on older ones) and an empty line. Any `<Name> Errors` is
    taken; a value that is not a number (N/A) gives none; other lines are ignored. Empty
    on a machine without NVLink (nvidia-smi prints nothing). A counter printed twice
    keeps its last value."""
    found: dict[tuple[int, int, str], int] = {}
    for gpu, links in nvlink_links(text).items():
        for link, rest in links:
            counter = _NVLINK_COUNTER.fullmatch(rest)
            if counter and counter.group(2).isdigit():
                name = "_".join(counter.group(1).lower().split())
                found[(gpu, link, name)] = int(counter.group(2))
    return [NvlinkCounter(gpu, link, name, v) for (gpu, link, name), v in found.items()]


# --- XIDs ----------------------------------------------------------------------------

# NVIDIA's XID catalogue as Kiln acts on it: each XID's class (what failed) and its one
# next step, from NVIDIA's "Resolution Bucket (Immediate Action)" (docs/health.md cites
# it): RESTART_APP and IGNORE are NONE (the application's own fault, nothing on the node),
# RESET_GPU and the ECC/NVLink workflows RESET, RESTART_BM REBOOT. A few NVIDIA files
# under restart-the-application or ignore, Kiln WATCHes (a WARN, no drain): memory and
# link errors that foretell a failing part. Only RESET and REBOOT drain.
NONE = "none"
WATCH = "watch"  # recorded, no drain
RESET_WHEN_IDLE = "reset-when-idle"  # takes effect at the next GPU reset; no drain
RESET = "reset"  # drain, reset the GPU where nothing runs
REBOOT = "reboot"  # drain, reboot the node
XID_STEPS = (NONE, WATCH, RESET_WHEN_IDLE, RESET, REBOOT)  # mildest first
DRAINING_STEPS = frozenset({RESET, REBOOT})

# The classes (kiln_node.repair_classes gives each its repair ladder).
APPLICATION = "application"
GPU_RESET = "gpu-reset"  # the GPU or its micro-controllers stopped: a reset clears it
GPU_HARDWARE = "gpu-hardware"  # the GPU is gone from the bus
DRIVER = "driver"  # GSP firmware and the driver's own RPCs
MEMORY_ECC = "memory-ecc"
MEMORY_REMAP = "memory-remap"
NVLINK = "nvlink"


@dataclass(frozen=True)
class Xid:
    name: str
    cls: str
    step: str


XIDS = {
    8: Xid("GPU stopped processing", APPLICATION, NONE),
    13: Xid("graphics engine exception", APPLICATION, NONE),
    31: Xid("GPU memory page fault", APPLICATION, NONE),
    43: Xid("GPU stopped processing", APPLICATION, NONE),
    45: Xid("preemptive cleanup", APPLICATION, NONE),
    46: Xid("GPU stopped processing (timeout)", GPU_RESET, RESET),
    48: Xid("double-bit ECC error", MEMORY_ECC, RESET),
    61: Xid("internal micro-controller breakpoint", GPU_RESET, RESET),
    62: Xid("internal micro-controller halt", GPU_RESET, RESET),
    63: Xid("row remapping pending", MEMORY_REMAP, RESET_WHEN_IDLE),
    64: Xid("row remapping failure", MEMORY_REMAP, RESET),
    68: Xid("video decoder exception", APPLICATION, NONE),
    69: Xid("graphics engine class error", APPLICATION, NONE),
    74: Xid("NVLink error", NVLINK, RESET),
    79: Xid("GPU fell off the bus", GPU_HARDWARE, REBOOT),
    92: Xid("high single-bit ECC error rate", MEMORY_ECC, WATCH),
    94: Xid("contained ECC error", MEMORY_ECC, WATCH),
    95: Xid("uncontained ECC error", MEMORY_ECC, RESET),
    109: Xid("context switch timeout", GPU_RESET, RESET),
    110: Xid("security fault", GPU_RESET, RESET),
    119: Xid("GSP RPC timeout", DRIVER, RESET),
    120: Xid("GSP error", DRIVER, RESET),
    121: Xid("C2C link error", NVLINK, WATCH),
    123: Xid("SPI PMU RPC failure", DRIVER, RESET_WHEN_IDLE),
    136: Xid("NVLink training failed", NVLINK, RESET),
    140: Xid("unrecovered ECC error", MEMORY_ECC, RESET),
    143: Xid("GPU initialization error", GPU_RESET, RESET),
}
_XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),")


def xid_lines(kernel_log: str) -> list[str]:
    """The kernel log's NVRM Xid lines, as printed (burn-in keeps them to compare the
    lines after a round with those before)."""
    return [line for line in kernel_log.splitlines() if "NVRM: Xid" in line]


def parse_xids(kernel_log: str) -> list[tuple[str, int]]:
    """(PCI address, XID) for each `NVRM: Xid (PCI:…): N, …` line, in order."""
    return [(m.group(1), int(m.group(2))) for m in _XID_LINE.finditer(kernel_log)]


def xid_name(xid: int) -> str:
    """`XID 79 GPU fell off the bus`; one outside the catalogue says so."""
    return f"XID {xid} {XIDS[xid].name}" if xid in XIDS else f"XID {xid} (not in Kiln's table)"


def xid_step(xid: int) -> str:
    """The XID's next step; one outside the catalogue is WATCHed (a WARN, no drain)."""
    return XIDS[xid].step if xid in XIDS else WATCH
