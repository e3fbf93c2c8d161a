"""The NVIDIA driver stack on a node: what hardware is there (from sysfs), which driver
is loaded and which installed, the version rules that keep userspace, kernel module and
fabric manager together, and the reboot plan when a new module waits to load.

The nvidia_driver role gathers raw inputs on each node and hands them here through its
filter plugin; nothing in this module runs a command. What each GPU model is (its
NVLinks, memory, peak throughput) is kiln.gpu_models'.
"""

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kiln import formats, pinned
from kiln.node import nvidia_smi, slurm_state

NVIDIA = "0x10de"
MELLANOX = "0x15b3"
# PCI classes (the first four hex digits of sysfs' class: class and subclass).
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible, 3D controller
NVSWITCH_CLASS = "0x0680"  # bridge, "other"
HCA_CLASSES = ("0x0200", "0x0207")  # Ethernet (RoCE), InfiniBand

# An exact driver version: branch.minor or branch.minor.patch (580.159.04, 550.54.15).
EXACT_VERSION = re.compile(r"([0-9]{3,})\.([0-9]{1,3})(\.[0-9]{1,3})?")


# --- hardware ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PciDevice:
    """One entry of /sys/bus/pci/devices, as the role's detect script reads it."""

    address: str  # 0000:00:06.0
    vendor: str  # 0x10de
    device: str  # 0x2330
    pci_class: str  # 0x030200
    driver: str = ""  # the bound kernel driver's name, or ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PciDevice":
        return cls(
            address=str(data.get("address", "")),
            vendor=str(data.get("vendor", "")).lower(),
            device=str(data.get("device", "")).lower(),
            pci_class=str(data.get("class", "")).lower(),
            driver=str(data.get("driver") or ""),
        )

    def is_class(self, *classes: str) -> bool:
        return self.pci_class[:6] in classes


@dataclass
class Hardware:
    """What the node has that the driver stack cares about."""

    gpus: list[PciDevice] = field(default_factory=list)
    nvswitches: list[PciDevice] = field(default_factory=list)
    hcas: list[PciDevice] = field(default_factory=list)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)


def detect(devices: list[dict[str, Any]]) -> Hardware:
    """Sort sysfs' PCI devices into GPUs, NVSwitches and Mellanox/NVIDIA HCAs."""
    found = Hardware()
    for device in map(PciDevice.from_json, devices):
        if device.vendor == NVIDIA and device.is_class(*GPU_CLASSES):
            found.gpus.append(device)
        elif device.vendor == NVIDIA and device.is_class(NVSWITCH_CLASS):
            found.nvswitches.append(device)
        elif device.vendor == MELLANOX and device.is_class(*HCA_CLASSES):
            found.hcas.append(device)
    for kind in (found.gpus, found.nvswitches, found.hcas):
        kind.sort(key=lambda d: d.address)
    return found


def rdma_stack(packages: dict[str, str]) -> str:
    """Which RDMA stack is installed, from installed package names and versions:
    `doca-ofed`, `mlnx-ofed` (both carry the peer-memory symbols nvidia-peermem needs),
    `inbox` (the distribution's rdma-core) or `none`."""
    if any(name.startswith("doca-ofed") or name == "doca-roce" for name in packages):
        return "doca-ofed"
    if "mlnx-ofed-kernel-dkms" in packages or "mlnx-ofed-kernel-utils" in packages:
        return "mlnx-ofed"
    if "rdma-core" in packages:
        return "inbox"
    return "none"


def rdma_path(stack: str, kernel_modules: str) -> str:
    """How GPUDirect RDMA can work on the node: `peermem` (nvidia-peermem over OFED's
    peer-memory API), `dmabuf` (open kernel modules with inbox rdma-core), or `none`."""
    if stack in ("doca-ofed", "mlnx-ofed"):
        return "peermem"
    if stack == "inbox" and kernel_modules == "open":
        return "dmabuf"
    return "none"


# --- the driver, loaded and installed ---------------------------------------------------


@dataclass(frozen=True)
class LoadedModule:
    """/proc/driver/nvidia/version: the kernel module running now."""

    version: str
    open: bool  # the open kernel module (required from Blackwell on)


def loaded_module(proc_version: str) -> LoadedModule | None:
    """Parse /proc/driver/nvidia/version; None when no module is loaded (empty text)."""
    first = proc_version.splitlines()[0] if proc_version.strip() else ""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", first)
    if not match:
        return None
    return LoadedModule(version=match.group(1), open="Open Kernel Module" in first)


def needs_reboot(loaded: str, installed: str) -> bool:
    """A module is installed whose version differs from the one loaded: only a reboot
    (or unloading every user of the GPU) brings them together. Nothing loaded yet on a
    node with a module installed needs a reboot too (the first install)."""
    return bool(installed) and loaded != installed


# --- version rules ----------------------------------------------------------------------


def is_exact(version: str) -> bool:
    return bool(EXACT_VERSION.fullmatch(version))


def branch(version: str) -> str:
    """The driver branch packages are named for (580 for 580.159.04)."""
    return version.split(".", 1)[0]


def upstream(package_version: str) -> str:
    """The driver version inside a Debian package version: 580.159.04-1, 1:580.159.04-0ubuntu1
    and 580.159.04-1~deb13u1 are all 580.159.04."""
    return package_version.split(":", 1)[-1].split("-", 1)[0]


def apt_pin(version: str) -> str:
    """An apt preferences `Pin: version` pattern for every package of this driver."""
    return f"{version}-*" if is_exact(version) else f"{version}.*"


@dataclass(frozen=True)
class AptPolicy:
    """One package in `apt-cache policy`."""

    installed: str  # "" when not installed
    candidate: str  # "" when no source offers it
    offered: tuple[str, ...]  # every version in the version table apt would install


# A version table line: "     580.95.05-1 1001" (" *** " marks the installed one).
VERSION_LINE = re.compile(r"^\s+(?:\*\*\* )?(\S+) (-?\d+)$")


def parse_apt_policy(text: str) -> dict[str, AptPolicy]:
    """`apt-cache policy PACKAGE...` (apt 2.x): each package's block."""
    found: dict[str, AptPolicy] = {}
    name, installed, candidate, offered = "", "", "", []
    for line in [*text.splitlines(), "end:"]:
        if line and not line[0].isspace() and line.endswith(":"):
            if name:
                found[name] = AptPolicy(installed, candidate, tuple(offered))
            name, installed, candidate, offered = line[:-1], "", "", []
            continue
        key, _, value = line.strip().partition(": ")
        if key == "Installed":
            installed = "" if value == "(none)" else value
        elif key == "Candidate":
            candidate = "" if value == "(none)" else value
        # A version pinned below 0 is one apt never installs: not offered.
        elif (match := VERSION_LINE.match(line)) and int(match.group(2)) >= 0:
            offered.append(match.group(1))
    return found


def version_key(version: str) -> tuple[int, ...]:
    """Driver versions compare as numbers: 535.309.01 is newer than 535.261.03."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


# --- one node ---------------------------------------------------------------------------


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


def pin_version(requested: str, policies: dict[str, AptPolicy]) -> str:
    """The driver version a node is pinned to, among those every one of its packages is
    offered at (Debian 12's security archive updates nvidia-graphics-drivers but not the
    open kernel modules): the exact one asked for; else, within the branch asked for (580)
    or any, the one installed, so a re-run never upgrades; else the newest. Raises
    ValueError when there is none."""
    offered = {name: {upstream(v) for v in p.offered} for name, p in policies.items()}
    common = set.intersection(*offered.values()) if offered else set()
    if is_exact(requested):
        if requested in common:
            return requested
    else:
        common = {v for v in common if not requested or branch(v) == requested}
        installed = {upstream(p.installed) for p in policies.values() if p.installed}
        if len(installed) == 1 and installed <= common:
            return installed.pop()
        if common:
            return max(common, key=version_key)
    each = "; ".join(
        f"{name}: {', '.join(sorted(versions, key=version_key)) or 'none'}"
        for name, versions in sorted(offered.items())
    )
    wanted = (
        f"driver {requested} is not"
        if is_exact(requested)
        else f"no driver of branch {requested} is"
        if requested
        else "no driver version is"
    )
    raise ValueError(f"{wanted} offered for every package ({each or 'no package'})")


# --- the fabric manager -----------------------------------------------------------------

FABRIC_MANAGER_SETTINGS = ("auto", "install", "off")
REBOOT_BATCH = re.compile(r"[1-9][0-9]*|(?:100|[1-9][0-9]?(?:\.[0-9]+)?)%")


def wants_fabric_manager(setting: str, nvswitches: int) -> bool:
    """auto: where NVSwitches are (HGX boards); install: also without them (an image
    built for such boards); off: never."""
    return setting == "install" or (setting == "auto" and nvswitches > 0)


def fabric_manager_packages(version: str) -> list[str]:
    """NVIDIA names the fabric manager and NSCQ for the driver branch."""
    return [f"nvidia-fabricmanager-{branch(version)}", f"libnvidia-nscq-{branch(version)}"]


def fabric_manager_mismatch(pinned: str, policies: dict[str, AptPolicy]) -> str:
    """Why the fabric manager cannot run with driver `pinned`, or "": it must equal the
    driver to the patch version (one patch off, CUDA sees no GPU on an NVSwitch board)."""
    return exact_mismatch("the fabric manager", fabric_manager_packages(pinned), pinned, policies)


def exact_mismatch(what: str, names: list[str], pinned: str, policies: dict[str, AptPolicy]) -> str:
    """Why a component built for one driver (the fabric manager, IMEX) cannot be installed
    beside driver `pinned`, or "": each of its packages must be offered at exactly it."""
    for name in names:
        policy = policies.get(name, AptPolicy("", "", ()))
        offered = sorted({upstream(v) for v in policy.offered}, key=version_key)
        if pinned not in offered:
            return (
                f"{what} must equal the driver exactly: driver {pinned}, {name} "
                f"offered at {', '.join(offered) or 'no version'}"
            )
    return ""


# --- inventory pre-flight ---------------------------------------------------------------

# The settings written as URIs of a deb822 sources file.
URL_SETTINGS = ("cuda_repo_url", "cuda_repos_url", "debian_mirror", "debian_security_mirror")
# A kernel module parameter (NVreg_EnableStreamMemOPs), written into modprobe.d's
# `options MODULE NAME=VALUE ...` line: a line break there would add an `install`
# command, which modprobe runs as root.
_MODULE_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's nvidia_driver_* settings
    (given without the prefix), before any node is touched."""
    source = settings.get("source", "debian")
    version = str(settings.get("version") or "")
    fabric_manager = settings.get("fabric_manager", "auto")
    problems = []
    if version and not (is_exact(version) or re.fullmatch(r"[0-9]{3,}", version)):
        problems.append(
            f"nvidia_driver_version {version!r} is neither an exact version (580.95.05) "
            "nor a branch (580)"
        )
    if fabric_manager == "install" and not is_exact(version):
        problems.append(
            "nvidia_driver_fabric_manager install needs an exact nvidia_driver_version "
            f"(the fabric manager must equal the driver to the patch), got {version!r}"
        )
    if fabric_manager == "install" and source == "debian":
        problems.append(
            "nvidia_driver_fabric_manager install: Debian does not package the fabric "
            "manager (use nvidia_driver_source cuda-repo)"
        )
    if source == "cuda-repo" and (
        wrong := pinned.sha256_problem(
            "nvidia_driver_cuda_repo_key_sha256",
            settings.get("cuda_repo_key_sha256"),
            "the repository's signing key's",
            "nvidia_driver_source cuda-repo",
        )
    ):
        problems.append(wrong)
    if source == "ubuntu" and not version:
        problems.append(
            "nvidia_driver_source ubuntu needs nvidia_driver_version: Canonical's packages "
            "are named for a branch (580) or an exact version (580.95.05)"
        )
    for name in URL_SETTINGS:
        url = settings.get(name) or ""
        if url and (why := formats.url(url)):
            problems.append(f"nvidia_driver_{name} {url!r}: {why} (apt's sources hold it)")
    problems += module_options_problems(settings.get("module_options") or {})
    if problem := share_problem("nvidia_driver_reboot_batch", settings.get("reboot_batch", "10%")):
        problems.append(problem)
    # The role passes the cluster-wide cap too; the inventory check reads it itself.
    if MAX_UNAVAILABLE in settings and (
        problem := share_problem(MAX_UNAVAILABLE, settings[MAX_UNAVAILABLE])
    ):
        problems.append(problem)
    return problems


def module_options_problems(options: Any) -> list[str]:
    """The module options modprobe.d's `options` line cannot hold, one line each."""
    if not isinstance(options, dict):
        return []  # the argument spec reports the type
    problems = []
    for name, value in options.items():
        if not _MODULE_PARAMETER.fullmatch(str(name)):
            problems.append(
                f"nvidia_driver_module_options: {str(name)!r} is not a module parameter name "
                "(letters, digits and '_')"
            )
        elif why := formats.word(value):
            problems.append(f"nvidia_driver_module_options: {name} {value!r} {why}")
    return problems


def off_pin(dpkg_query: str, packages: list[str], pinned: str) -> list[str]:
    """The driver packages not installed at the pinned version, from `dpkg-query -W -f
    '${Package} ${Version}\\n' PACKAGE...`, each as "name version" (or "name missing")."""
    installed = dict(line.split(" ", 1) for line in dpkg_query.splitlines() if " " in line)
    return [
        f"{name} {installed.get(name) or 'missing'}"
        for name in packages
        if upstream(installed.get(name, "")) != pinned
    ]


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


# --- reboots ----------------------------------------------------------------------------

# The cluster-wide cap on compute nodes out of service at once for a change that needs
# them out (kiln rollout's batches, the driver's reboots), and its default.
MAX_UNAVAILABLE = "rollout_max_unavailable"
MAX_UNAVAILABLE_DEFAULT = "10%"


@dataclass
class RebootPlan:
    """Nodes whose new kernel module waits for a reboot, and how each gets it."""

    rollout: list[str] = field(default_factory=list)  # slurmd runs: kiln rollout reboots
    batches: list[list[str]] = field(default_factory=list)  # not in Slurm yet: reboot now
    reported: dict[str, str] = field(default_factory=dict)  # not rebooted here: node -> why

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def batch_size(batch: str | int, total: int) -> int:
    """A node count or a share of `total` nodes (`nvidia_driver_reboot_batch`,
    `rollout_max_unavailable`: 10% or 4) as a count; at least one node."""
    text = str(batch).strip()
    if not REBOOT_BATCH.fullmatch(text):
        raise ValueError(f"not a node count or a share: {text!r}")
    if text.endswith("%"):
        count = int(total * float(text[:-1]) / 100)
    else:  # a count longer than total's is more than total (and may be past int()'s limit)
        count = int(text) if len(text) <= len(str(total)) else total
    return max(1, min(count, total)) if total else 0


def share_problem(name: str, value: Any) -> str:
    """Why a setting read by batch_size is neither a node count nor a share, or ""."""
    text = str(value).strip()
    if REBOOT_BATCH.fullmatch(text):
        return ""
    return f"{name} {text!r}: expected a node count (4) or a share of the nodes (10%)"


def _check_max_unavailable(value: Any, _groups: object = None) -> None:
    if problem := share_problem(MAX_UNAVAILABLE, value):
        raise ValueError(problem)


# Checked by `kiln inventory check` (kiln.inventory.checks) and by the role's own
# settings check; a count may be written as a number.
INVENTORY_CHECKS = {MAX_UNAVAILABLE: (object, _check_max_unavailable)}


def out_of_service(states: dict[str, slurm_state.NodeState], nodes: list[str]) -> list[str]:
    """The nodes Slurm lists as out of service now."""
    return sorted(n for n in nodes if n in states and states[n].flags & slurm_state.OUT_OF_SERVICE)


def reboot_room(limit: str | int, compute: list[str], states: dict[str, Any]) -> int:
    """How many more compute nodes may go out of service for a reboot now: `limit`
    (rollout_max_unavailable: a count, or a share of the compute nodes) less the nodes
    out of service already, so a change never takes more of the cluster at once than
    the operator allows."""
    return max(0, batch_size(limit, len(compute)) - len(out_of_service(states, compute)))


def reboot_plan(
    pending: list[str], in_slurm: list[str], batch: str | int, reboot: bool = True
) -> RebootPlan:
    """The role never reboots a node whose slurmd runs: it is left to `kiln rollout`,
    which drains it, waits for its jobs and reboots it through Slurm within
    rollout_max_unavailable. Nodes Slurm does not run yet (a first provisioning) reboot
    here in batches, so a bad driver stops at the first batch. --no-reboot (`reboot`
    false) only reports, and leaves nothing to the rollout."""
    plan = RebootPlan()
    rest = []
    for node in sorted(pending):
        if not reboot:
            plan.reported[node] = "not rebooted (--no-reboot)"
        elif node in in_slurm:
            plan.rollout.append(node)
            plan.reported[node] = "slurmd runs here: kiln rollout reboots it through Slurm"
        else:
            rest.append(node)
    size = batch_size(batch, len(rest))  # checks the batch even when no node waits
    plan.batches = [rest[i : i + size] for i in range(0, len(rest), size)] if rest else []
    return plan


def reboot_reason(version: str) -> str:
    """The reason Slurm shows while a node waits for its reboot (set_stats' kiln_reboots)."""
    return f"kiln: driver {version}"


def reboot_target(fact: dict[str, Any], proc_version: str, version: str, source: str) -> str:
    """The driver a node in Slurm would wait to load, after a reboot, once the role has
    applied `version` (nvidia_driver_version) from `source`; "" when none would wait.
    Read before anything is installed: `fact` is the node's kiln_gpu local fact (what the
    role installed last time; the packages are held since), `proc_version` the module
    loaded now (/proc/driver/nvidia/version). A reboot already pending counts. A node
    without the fact (the role never ran there) is not judged: the role itself still
    leaves its reboot to kiln rollout. A branch is judged by the installed driver's
    branch (the role keeps the installed version within it while it is offered)."""
    if not fact.get("gpu_count"):
        return ""
    module = loaded_module(proc_version)
    loaded = module.version if module else ""
    installed = str((fact.get("driver") or {}).get("installed") or "")
    if needs_reboot(loaded, installed):
        return installed
    if source == "preinstalled":
        return ""
    if is_exact(version):
        target = version
    elif installed and (not version or branch(installed) == version):
        target = installed
    else:
        target = f"of branch {version}" if version else "(a first install)"
    return target if target != loaded else ""


def reboot_refusal(
    targets: dict[str, str],
    limit: str | int,
    compute: list[str],
    states: dict[str, slurm_state.NodeState],
    inventory: str,
) -> str:
    """Why a plain provisioning must not install the driver, or "": it would leave more
    nodes in Slurm waiting for a reboot (`targets`: node -> the driver it would wait to
    load) than rollout_max_unavailable allows out of service now (reboot_room: nodes
    already out count, and a waiting node already out takes no more room)."""
    out = set(out_of_service(states, compute))
    waiting = sorted(n for n, target in targets.items() if target and n not in out)
    room = reboot_room(limit, compute, states)
    if len(waiting) <= room:
        return ""
    drivers = ", ".join(sorted({targets[n] for n in waiting}, key=version_key))
    already = f" more, {len(out)} compute nodes being out of service already" if out else ""
    return (
        f"{len(waiting)} nodes in Slurm would need a reboot for driver {drivers}; "
        f"{MAX_UNAVAILABLE} ({limit}) allows {room}{already}: apply it with "
        f"`kiln rollout -i {inventory}`"
    )
