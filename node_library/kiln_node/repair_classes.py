"""The repair loop's failure classes and their ladders, declared as data, and the one
mapping from what kiln-health and kiln-health-active report (a FAIL's check and reason,
or the drain reason they wrote) to a class.

A ladder is the steps tried in order, each followed by a re-check in a reservation; a
class with an empty ladder has no repair Kiln can make (a full disk, a hot GPU): the node
stays drained and is re-checked until it passes or reaches RMA. What cannot be read is
UNKNOWN, which the decision never drains nor resumes (kiln_node.repair_decision)."""

import re
from dataclasses import dataclass

from kiln_node import nvidia_smi, slurm_state


@dataclass(frozen=True)
class Step:
    name: str
    where: str  # "node": argv run on the node; "slurm": the controller asks Slurm;
    # "bmc": the controller asks the node's BMC (kiln_node.bmc_power)
    argv: tuple[str, ...]  # the node's command; empty for "slurm" (kiln_node.slurm_jobs)
    evidence: bool  # the evidence bundle is collected first (before a reset or a reboot)


def _restart(unit: str) -> tuple[str, ...]:
    return ("systemctl", "restart", unit)


# A slurmd that does not answer is as often munge's fault (it cannot sign or read a
# message): both are restarted, munge first. A hung slurmd does not end on SIGTERM
# (systemd waits TimeoutStopSec, 90 s): it is killed first; KillMode=process spares
# the jobs' slurmstepd.
_RESTART_SLURMD = (
    "systemctl kill --signal=KILL --kill-whom=main slurmd 2>/dev/null;"
    " systemctl restart munge slurmd"
)
# Shared mounts: autofs restarted where the node runs it (its automounts), and the
# mount units systemd mounts at boot started again (those of local-fs and remote-fs).
_RESTART_MOUNTS = (
    "! systemctl is-enabled --quiet autofs 2>/dev/null || systemctl restart autofs;"
    " systemctl start local-fs.target remote-fs.target"
)
GPU_RESET = "gpu-reset"
REBOOT = "reboot"
POWER_CYCLE = "power-cycle"
RECHECK = "recheck"  # not a repair: the post-repair checks in a reservation
STEPS = {
    step.name: step
    for step in (
        Step("restart-mounts", "node", ("sh", "-c", _RESTART_MOUNTS), evidence=False),
        Step("restart-munge", "node", _restart("munge"), evidence=False),
        Step("restart-slurmd", "node", ("sh", "-c", _RESTART_SLURMD), evidence=False),
        Step("restart-persistenced", "node", _restart("nvidia-persistenced"), evidence=False),
        Step("restart-fabricmanager", "node", _restart("nvidia-fabricmanager"), evidence=True),
        Step("restart-imex", "node", _restart("nvidia-imex"), evidence=False),
        # Every GPU of the node; nvidia-smi refuses while a process holds one, and the
        # decision asks for it only where no job runs.
        Step(GPU_RESET, "node", ("nvidia-smi", "--gpu-reset"), evidence=True),
        # scontrol reboot: Slurm reboots the node when it is empty and it comes back drained.
        Step(REBOOT, "slurm", (), evidence=True),
        # Through the node's BMC (Redfish), for a node that does not answer Slurm: no
        # evidence, as nothing on the node answers; it comes back drained, as a reboot.
        Step(POWER_CYCLE, "bmc", (), evidence=False),
    )
}

UNKNOWN = "unknown"
_GPU_LADDER = (GPU_RESET, REBOOT)
# Each class: its ladder, and what it is (alerts and docs/health.md say it).
CLASSES: dict[str, tuple[tuple[str, ...], str]] = {
    "mount": (("restart-mounts",), "a shared mount does not answer"),
    "munge": (("restart-munge",), "munge does not answer"),
    "slurmd": (("restart-slurmd", POWER_CYCLE), "slurmd does not answer the controller"),
    "slurm-version": ((), "slurmd's version differs from the controller's: kiln provision"),
    "disk-full": ((), "a checked path is below its free space"),
    "network": ((), "a compute-rail port is down or slow: cable, transceiver or switch"),
    "hardware": ((), "the hardware slows a GPU (thermal, power brake) or its InfoROM is bad"),
    "gpu-config": (("restart-persistenced",), "persistence mode is off"),
    "fabric-manager": (("restart-fabricmanager", REBOOT), "the fabric manager is not active"),
    "imex": (("restart-imex",), "the IMEX domain is not up"),
    "gpu-diag": (_GPU_LADDER, "DCGM's diagnostic failed"),
    # kiln-prolog: a process still holds a GPU Slurm gave a job (left by an ended job:
    # Slurm could not kill it, so neither can a GPU reset).
    "job-leftovers": ((REBOOT,), "a process of an ended job still holds a GPU"),
    # The XID classes (kiln_node.nvidia_smi), and the checks that see the same faults.
    nvidia_smi.GPU_RESET: (_GPU_LADDER, "a GPU or its micro-controller stopped"),
    nvidia_smi.GPU_HARDWARE: ((REBOOT,), "a GPU is missing or off the bus"),
    nvidia_smi.DRIVER: (_GPU_LADDER, "the driver or the GPU's firmware (GSP) failed"),
    nvidia_smi.MEMORY_ECC: (_GPU_LADDER, "uncorrectable GPU memory errors"),
    nvidia_smi.MEMORY_REMAP: (_GPU_LADDER, "GPU memory row remapping failed"),
    nvidia_smi.NVLINK: (_GPU_LADDER, "NVLink errors or links down"),
}


def ladder(cls: str) -> tuple[str, ...]:
    return CLASSES[cls][0] if cls in CLASSES else ()


@dataclass(frozen=True)
class Failure:
    cls: str  # a key of CLASSES, or UNKNOWN
    start: str = ""  # the first step to try when not the ladder's first (XID 79: reboot)
    why: str = ""  # for UNKNOWN: why the class could not be told


# kiln-health's and kiln-health-active's checks, by the class their FAIL is.
CHECK_CLASSES = {
    "mounts": "mount",
    "munge": "munge",
    "slurmd": "slurmd",  # kiln-repair's own drain of a node Slurm set DOWN (REPAIR_PREFIX)
    "slurmd_version": "slurm-version",
    "free_space": "disk-full",
    "ib_ports": "network",
    "gpu_count": nvidia_smi.GPU_HARDWARE,
    "gpu_pcie": nvidia_smi.GPU_HARDWARE,  # a reboot retrains the link
    "gpu_driver": nvidia_smi.DRIVER,
    "gpu_persistence": "gpu-config",
    "gpu_ecc": nvidia_smi.MEMORY_ECC,
    "gpu_remap": nvidia_smi.MEMORY_REMAP,
    "gpu_clocks": "hardware",
    "gpu_nvlink": nvidia_smi.NVLINK,
    "nvlink_fabric": nvidia_smi.NVLINK,
    "fabric_manager": "fabric-manager",
    "imex_domain": "imex",
    "dcgm_diag": "gpu-diag",
    "gpu_processes": "job-leftovers",
}
# A reason that says the check itself did not run to its end: no class can be told.
_CHECK_BROKEN = ("check failed: ", "did not finish in time")
_XID = re.compile(r"\bXID (\d+)\b")
_REASON = re.compile(r"(?P<check>[a-z_]+): (?P<reason>.*)", re.S)
_LINE = re.compile(r"(?P<status>OK|WARN|FAIL) (?P<check>[a-z_]+): (?P<reason>.*)", re.S)


def _xid_failure(reason: str) -> Failure:
    """The draining XIDs the reason names; the one with the furthest step decides."""
    draining = [
        nvidia_smi.XIDS[x]
        for x in map(int, _XID.findall(reason))
        if nvidia_smi.xid_step(x) in nvidia_smi.DRAINING_STEPS
    ]
    if not draining:
        return Failure(UNKNOWN, why=f"gpu_xid names no XID that drains: {reason}")
    worst = max(draining, key=lambda x: nvidia_smi.XID_STEPS.index(x.step))
    return Failure(worst.cls, GPU_RESET if worst.step == nvidia_smi.RESET else REBOOT)


def classify(check: str, reason: str) -> Failure:
    """The class of one FAIL of kiln-health (or kiln-health-active)."""
    if reason.startswith(_CHECK_BROKEN):
        return Failure(UNKNOWN, why=f"{check}: the check did not run to its end: {reason}")
    if check == "gpu_xid":
        return _xid_failure(reason)
    if check == "gpu_smi":
        # nvidia-smi's own exit codes (kiln_node.gpu_checks.SMI_EXIT); else it hung or
        # printed nothing readable: the driver, which a reboot reloads.
        if "InfoROM" in reason:
            return Failure("hardware")
        if "fallen off the bus" in reason:
            return Failure(nvidia_smi.GPU_HARDWARE)
        return Failure(nvidia_smi.DRIVER, REBOOT)
    if check == "gpu_driver":
        return Failure(nvidia_smi.DRIVER, REBOOT)  # loaded and installed differ
    if check in CHECK_CLASSES:
        return Failure(CHECK_CLASSES[check])
    return Failure(UNKNOWN, why=f"no class for check {check!r}")


def classify_lines(lines: list[str]) -> Failure | None:
    """kiln-health's result lines (`FAIL check: reason`): the class of the first FAIL,
    as kiln-health drains for it; None when nothing failed."""
    for line in lines:
        found = _LINE.fullmatch(line.strip())
        if found and found["status"] == "FAIL":
            return classify(found["check"], found["reason"])
    return None


def classify_reason(reason: str) -> Failure:
    """The class of a drain reason Kiln's checks wrote (`kiln-health: check: reason`,
    `kiln-active: dcgm_diag: reason`); any other reason is UNKNOWN."""
    for prefix in slurm_state.HEALTH_PREFIXES:
        if reason.startswith(prefix):
            found = _REASON.fullmatch(reason[len(prefix) :].strip())
            if found:
                return classify(found["check"], found["reason"])
    return Failure(UNKNOWN, why=f"not a reason of Kiln's checks: {reason or 'none'}")
