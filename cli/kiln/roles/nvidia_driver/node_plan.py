"""One node: what the nvidia_driver role does there, from what the node reported (its
kiln-gpu-detect) and the host's settings, what a preinstalled driver lacks, and the
node's kiln_gpu local fact. Nothing here runs a command: the role gathers the inputs
and hands them over through its filter plugin (kiln_gpu)."""

from dataclasses import asdict, dataclass
from typing import Any

from kiln.roles.nvidia_driver.apt import wants_fabric_manager
from kiln.roles.nvidia_driver.hardware import detect, rdma_path, rdma_stack
from kiln.roles.nvidia_driver.versions import loaded_module, needs_reboot, upstream
from kiln_node import nvidia_smi


@dataclass
class NodePlan:
    """What the role does on one node, from what the node reported (the role's detect
    script) and the host's settings."""

    gpus: int
    nvswitches: int
    hcas: int
    work: bool  # install or verify the driver stack here
    skip: str = ""  # why the role does nothing on this node (a note, never a failure)
    fail: str = ""  # why the node cannot have the stack the settings ask for
    loaded: str = ""  # the kernel module running now
    loaded_open: bool = False
    installed: str = ""  # the module version on disk (modinfo)
    reboot_needed: bool = False
    rdma_stack: str = "none"
    rdma_path: str = "none"
    fabric_manager: bool = False  # install it (NVSwitches, or asked to)
    fabric_manager_installed: str = ""  # the fabric manager package's driver version
    fabric_manager_active: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def node_plan(detected: dict[str, Any], settings: dict[str, Any]) -> NodePlan:
    """settings: the role's variables without the prefix (source, required,
    install_without_gpu, kernel_modules, fabric_manager)."""
    hardware = detect(detected.get("pci") or [])
    module = loaded_module(str(detected.get("proc_version") or ""))
    installed = str(detected.get("modinfo_version") or "")
    stack = rdma_stack(detected.get("packages") or {})
    manager = detected.get("fabric_manager") or {}
    plan = NodePlan(
        gpus=len(hardware.gpus),
        nvswitches=len(hardware.nvswitches),
        hcas=len(hardware.hcas),
        work=hardware.has_gpu or bool(settings.get("install_without_gpu")),
        loaded=module.version if module else "",
        loaded_open=bool(module and module.open),
        installed=installed,
        reboot_needed=hardware.has_gpu
        and needs_reboot(module.version if module else "", installed),
        rdma_stack=stack,
        rdma_path=rdma_path(stack, str(settings.get("kernel_modules", "open"))),
        fabric_manager=wants_fabric_manager(
            str(settings.get("fabric_manager", "auto")), len(hardware.nvswitches)
        ),
        fabric_manager_installed=upstream(str(manager.get("version") or "")),
        fabric_manager_active=manager.get("state") == "active",
    )
    if not hardware.has_gpu and settings.get("required"):
        plan.fail = "no NVIDIA GPU found on the PCI bus, and nvidia_driver_required is true"
    elif not plan.work:
        plan.skip = "no NVIDIA GPU found on the PCI bus: the driver stack is not installed here"
    elif plan.fabric_manager and settings.get("source") == "debian":
        plan.fail = (
            f"{plan.nvswitches} NVSwitches need the fabric manager, which Debian does not "
            "package: use nvidia_driver_source cuda-repo (NVIDIA's repository or a mirror)"
        )
    return plan


def preinstalled_driver(plan: dict[str, Any]) -> str:
    """The driver a preinstalled node keeps: the module on disk, else the one loaded (a
    machine given its driver by its host, with no module or no modinfo of its own, as
    on the GPU test machine of docs/gpu.md)."""
    return str(plan["installed"] or plan["loaded"])


def preinstalled_problems(plan: dict[str, Any], version: str, listed: int | None) -> list[str]:
    """Why a node's own driver does not do (nvidia_driver_source preinstalled), one line
    each: none there, another version than nvidia_driver_version, a fabric manager not
    at the driver's exact version on NVSwitch systems, or nvidia-smi listing fewer GPUs
    (`listed`; None: not asked, e.g. while a reboot is pending) than the PCI bus."""
    driver, found = preinstalled_driver(plan), []
    if not driver:
        found.append(
            "nvidia_driver_source is preinstalled but no NVIDIA kernel module is installed "
            "(modinfo finds neither nvidia nor nvidia-current) or loaded"
        )
    elif version and version != driver:
        found.append(f"driver {driver} is installed, not nvidia_driver_version {version}")
    if plan["fabric_manager"] and plan["fabric_manager_installed"] != driver:
        found.append(
            f"{plan['nvswitches']} NVSwitches: the fabric manager must equal driver "
            f"{driver or '(none)'} exactly, and it is "
            f"{plan['fabric_manager_installed'] or 'not installed'}"
        )
    if listed is not None and listed != plan["gpus"]:
        found.append(f"nvidia-smi lists {listed} of the {plan['gpus']} GPUs on the PCI bus")
    return found


def local_fact(
    plan: dict[str, Any], smi_xml: str, pinned: str, source: str, imex: bool = False
) -> dict[str, Any]:
    """The node's `kiln_gpu` local fact: what drift checks, the slurm and health roles
    read. Stable between runs (no times), so writing it again changes nothing. imex:
    the role set IMEX up here (kiln.imex)."""
    try:
        gpus = nvidia_smi.parse_xml(smi_xml).gpus if smi_xml.strip() else []
    except ValueError:
        gpus = []
    # The NVLink domain (GB200/GB300 NVL72); nvidia-smi says N/A outside one.
    domain = next(
        (
            {"cluster_uuid": g.cluster_uuid, "clique_id": g.clique_id}
            for g in gpus
            if g.cluster_uuid.strip("[]").upper() not in ("", "N/A")
        ),
        {},
    )
    return {
        "gpu_count": plan["gpus"],
        "gpu_model": gpus[0].name if gpus else "",
        "gpus": [
            {"bus_id": g.bus_id, "name": g.name, "uuid": g.uuid, "vbios": g.vbios} for g in gpus
        ],
        "nvswitch_count": plan["nvswitches"],
        "hca_count": plan["hcas"],
        "driver": {
            "source": source,
            "pinned": pinned,
            "installed": plan["installed"],
            "loaded": plan["loaded"],
            "open": plan["loaded_open"],
            "reboot_pending": plan["reboot_needed"],
        },
        "fabric_manager": {
            "wanted": plan["fabric_manager"],
            "installed": plan["fabric_manager_installed"],
            "active": plan["fabric_manager_active"],
        },
        "persistence": bool(gpus) and all(g.persistence == "Enabled" for g in gpus),
        "rdma": {"stack": plan["rdma_stack"], "path": plan["rdma_path"]},
        "nvlink_domain": domain,
        "imex": bool(imex),
    }
