"""kiln-prolog's checks, which Slurm runs on a node before each job (Prolog) and after
it (Epilog): short, and only what a job would trip over or leave behind. Each is
kiln-health's own check (kiln_node.gpu_checks, kiln_node.health_checks), judged the same way;
what is new here is the kernel log read since the last job (a marker under /run) and the
GPU processes a job left.

A check that cannot run (nvidia-smi hung or missing, the kernel log unreadable) is
UNKNOWN: it never drains, the job starts, and the program says so in its output and
metrics; kiln-health's next run judges the node fully.
"""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kiln_node import nvidia_smi, slurm_state
from kiln_node.gpu_checks import judge_gpus, judge_xids
from kiln_node.health_checks import Result

UNKNOWN = "UNKNOWN"  # a Result status: the check could not give an answer
# Kept under /run: a reboot empties it, as it empties the kernel log.
MARKER = "/run/kiln/kernel-log-marker.json"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# kiln-health's GPU checks that a job trips over at once; the others (clocks, PCIe
# width, NVLinks, fabric) are left to kiln-health's next run.
GPU_CHECKS = ("gpu_count", "gpu_ecc", "gpu_remap")
REASON_LIMIT = 100  # as kiln-health: Slurm shows reasons cut short
_STAMP = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")


@dataclass(frozen=True)
class Marker:
    """How far the kernel log was read: the boot, and the time stamp of its last line."""

    boot_id: str
    seconds: float


def boot_id(path: str = BOOT_ID) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def read_marker(path: str) -> Marker | None:
    """The marker, or None (none yet, unreadable): then the whole log is read."""
    try:
        data = json.loads(Path(path).read_text())
        return Marker(str(data["boot_id"]), float(data["seconds"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_marker(path: str, marker: Marker) -> None:
    """Written whole beside it, then renamed: two jobs starting at once never read half."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(json.dumps({"boot_id": marker.boot_id, "seconds": marker.seconds}) + "\n")
    partial.replace(target)


def log_since(log: str, marker: Marker | None, boot: str) -> tuple[str, Marker]:
    """The kernel log's lines after the marker (`dmesg`: `[ 1234.567890] text`), and the
    marker for the next reader. A marker of another boot, or none, reads every line; a
    line without a time stamp goes with the line before it."""
    after = marker.seconds if marker and marker.boot_id == boot else -1.0
    kept, last = [], max(after, 0.0)
    stamp = 0.0
    for line in log.splitlines():
        found = _STAMP.match(line)
        if found:
            stamp = float(found.group(1))
        if stamp > after:
            kept.append(line)
        last = max(last, stamp)
    return "\n".join(kept), Marker(boot, last)


def judge_new_xids(log: str, since: str) -> Result:
    """kiln-health's XID verdict (gpu_checks.judge_xids) on the new part of the log."""
    return judge_xids(nvidia_smi.parse_xids(log), since)


def judge_gpu_state(gpus: list[nvidia_smi.SmiGpu], expected: int) -> list[Result]:
    """kiln-health's verdicts on the GPU_CHECKS, from the same `nvidia-smi -q -x`."""
    return [r for r in judge_gpus(gpus, expected, "", "") if r.check in GPU_CHECKS]


def job_gpus(value: str) -> list[int]:
    """SLURM_JOB_GPUS (`0,1` or `0-3,6`): the GPU indices Slurm gave the job."""
    found: list[int] = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"SLURM_JOB_GPUS {value!r} is not a list of GPU indices")
        found += range(int(first), int(last or first) + 1)
    return found


def judge_processes(gpus: list[nvidia_smi.SmiGpu], indices: list[int], when: str) -> Result:
    """Processes on the job's GPUs (their place in nvidia-smi's list, PCI bus order, as
    Slurm numbers them): before a job, another's left there; after it, its own that
    outlived it. Slurm gives those GPUs to no one else until the Epilog ends."""
    held = []
    for index in indices:
        if index >= len(gpus):
            continue  # gpu_count names a missing GPU
        for p in gpus[index].processes:
            memory = f", {p.used_mib} MiB" if p.used_mib is not None else ""
            held.append(f"pid {p.pid} ({p.name or '?'}{memory}) on GPU {index}")
    if held:
        more = f" (+{len(held) - 1} more)" if len(held) > 1 else ""
        return Result("gpu_processes", "FAIL", f"{held[0]}{more} {when}")
    return Result("gpu_processes", "OK", "the job's GPUs hold no process")


def drain_reason(result: Result, job: str, phase: str) -> str:
    """`kiln-health: CHECK: REASON (prolog, job N)`: kiln-health's prefix and check
    names, so kiln-health and the repair loop treat the drain as their own."""
    where = f" ({phase}, job {job})" if job else f" ({phase})"
    text = f"{slurm_state.HEALTH_PREFIX} {result.check}: {result.reason}"
    return text[: REASON_LIMIT - len(where)] + where
