"""`kiln inventory discover`: what the hosts are, read from the hosts themselves, and the
settings that follow from it.

playbooks/discover.yml brings back, per host, a few of Ansible's facts (OS, CPUs,
memory, disks, virtualization) and what two of Kiln's node programs print:
kiln-gpu-detect (PCI devices from sysfs, so GPUs are known before any driver is
installed) and kiln-nccl-probe (the RDMA ports). This module reads those reports
(`read_node`), and proposes the inventory settings an operator would otherwise type
(`propose`): the validation profile, the GPUs and compute-rail ports the health check
expects, the topology source, the clock and sysctl settings of container nodes, and
mounts made at boot where a kernel has no autofs.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kiln import gpu_models, hostlist
from kiln.inventory.spec import ClusterSpec
from kiln.roles import autofs, nccl_env
from kiln.roles.nvidia_driver import hardware
from kiln.validation import profiles
from kiln_node import counted

if TYPE_CHECKING:
    from pathlib import Path

    from kiln.run.display import Displays
    from kiln.run.events import RunSummary

# Ansible's virtualization_type values for a node that is a container, not a machine.
CONTAINER_TYPES = ("container", "docker", "podman", "lxc", "systemd-nspawn", "containerd")
# Block devices that are no local disk.
_NOT_DISKS = ("loop", "ram", "dm-", "sr", "zram", "md", "nbd")
COMPUTE = "slurm_compute"


@dataclass(frozen=True)
class Disk:
    name: str
    size_bytes: int
    rotational: bool
    model: str = ""


@dataclass
class NodeHardware:
    """One host as discover read it."""

    host: str
    os: str = ""  # Ubuntu 24.04
    distribution: str = ""  # Ubuntu
    major: str = ""  # 24
    rdma_stack: str = ""  # nvidia_driver.hardware.rdma_stack: doca-ofed, mlnx-ofed, inbox, none
    architecture: str = ""
    sockets: int = 0
    cores: int = 0  # per socket
    threads_per_core: int = 0
    vcpus: int = 0
    memory_mb: int = 0
    disks: list[Disk] = field(default_factory=list)
    container: bool = False
    gpu_ids: list[str] = field(default_factory=list)  # PCI device ids, one per GPU
    nvswitches: int = 0
    ports: list[nccl_env.Port] = field(default_factory=list)
    fabric: nccl_env.Fabric = field(default_factory=nccl_env.Fabric)
    autofs: bool = True  # the kernel has autofs (/proc/filesystems)

    @property
    def gpu_model(self) -> str:
        """nvidia-smi's name of the node's GPUs, "" without any, or the PCI id of a model
        Kiln does not know (several kinds: the first; `problems` names the mix)."""
        if not self.gpu_ids:
            return ""
        found = gpu_models.by_pci_id(self.gpu_ids[0])
        return found.name if found else f"NVIDIA GPU {self.gpu_ids[0]}"

    @property
    def rails(self) -> list[nccl_env.Port]:
        """The compute rails: the ports NCCL would use (kiln.roles.nccl_env.rails)."""
        return nccl_env.rails(self.ports, [])[0]

    @property
    def preset(self) -> str:
        return nccl_env.preset(self.fabric)[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "os": self.os,
            "distribution": self.distribution,
            "major": self.major,
            "rdma_stack": self.rdma_stack,
            "architecture": self.architecture,
            "sockets": self.sockets,
            "cores_per_socket": self.cores,
            "threads_per_core": self.threads_per_core,
            "vcpus": self.vcpus,
            "memory_mb": self.memory_mb,
            "disks": [vars(d) for d in self.disks],
            "container": self.container,
            "gpus": len(self.gpu_ids),
            "gpu_model": self.gpu_model,
            "gpu_pci_ids": self.gpu_ids,
            "nvswitches": self.nvswitches,
            "ports": [
                {
                    "name": p.name,
                    "state": p.state,
                    "link_layer": p.link_layer,
                    "rate_gbps": p.rate_gbps,
                    "compute_rail": p in self.rails,
                }
                for p in self.ports
            ],
            "nccl_preset": self.preset,
            "autofs": self.autofs,
        }

    def line(self) -> str:
        """The host in one line, as `kiln inventory discover` prints it."""
        parts = [self.os or "unknown OS", self.architecture]
        if self.sockets:
            parts.append(f"{self.sockets}x{self.cores} cores, {counted(self.vcpus, 'thread')}")
        parts.append(f"{self.memory_mb / 1024:.0f} GiB")
        if self.gpu_ids:
            parts.append(f"{len(self.gpu_ids)}x {self.gpu_model}")
        else:
            parts.append("no GPU")
        if self.nvswitches:
            parts.append(counted(self.nvswitches, "NVSwitch", "NVSwitches"))
        for (layer, rate), ports in _rates(self.rails).items():
            parts.append(f"{len(ports)}x {layer} {rate:g} Gb/s ({_names(ports)})")
        others = [p for p in self.ports if p not in self.rails]
        for state in dict.fromkeys(p.state for p in others):
            for (layer, rate), ports in _rates([p for p in others if p.state == state]).items():
                shown = "" if state == "ACTIVE" else f", {state}"
                parts.append(f"also {len(ports)}x {layer} {rate:g} Gb/s ({_names(ports)}{shown})")
        if self.disks:
            parts.append(", ".join(f"{d.name} {_size(d.size_bytes)}" for d in self.disks))
        if self.container:
            parts.append("container")
        if not self.autofs:
            parts.append("no autofs in its kernel")
        return f"{self.host}: " + "; ".join(p for p in parts if p)


def read_node(host: str, raw: dict[str, Any]) -> NodeHardware:
    """A host from what playbooks/discover.yml brought back."""
    facts = raw.get("facts") or {}
    detected_raw = raw.get("gpu_detect") or {}
    detected = hardware.detect(detected_raw.get("pci") or [])
    probe = raw.get("nccl_probe") or {}
    fabric = nccl_env.fabric_of(probe)
    os_name = " ".join(
        str(facts.get(k) or "") for k in ("distribution", "distribution_version")
    ).strip()
    return NodeHardware(
        host=host,
        os=os_name,
        distribution=str(facts.get("distribution") or ""),
        major=str(facts.get("distribution_version") or "").split(".")[0],
        rdma_stack=hardware.rdma_stack(detected_raw.get("packages") or {}),
        architecture=str(facts.get("architecture") or ""),
        sockets=_int(facts.get("processor_count")),
        cores=_int(facts.get("processor_cores")),
        threads_per_core=_int(facts.get("processor_threads_per_core")),
        vcpus=_int(facts.get("processor_vcpus")),
        memory_mb=_int(facts.get("memtotal_mb")),
        disks=_disks(facts.get("devices") or {}),
        container=facts.get("virtualization_role") == "guest"
        and facts.get("virtualization_type") in CONTAINER_TYPES,
        gpu_ids=[d.device for d in detected.gpus],
        nvswitches=len(detected.nvswitches),
        ports=list(fabric.ports),
        fabric=fabric,
        # A report without the reading (an older playbook) says nothing against autofs.
        autofs="filesystems" not in raw
        or "autofs" in autofs.kernel_filesystems(str(raw["filesystems"])),
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _disks(devices: dict[str, Any]) -> list[Disk]:
    """Local disks from Ansible's `devices` fact: sectors x sector size, no removable,
    loop, RAM or device-mapper devices."""
    found = []
    for name, device in sorted(devices.items()):
        if not isinstance(device, dict) or name.startswith(_NOT_DISKS):
            continue
        if str(device.get("removable", "0")) == "1":
            continue
        size = _int(device.get("sectors")) * _int(device.get("sectorsize") or 512)
        if size:
            rotational = str(device.get("rotational", "0")) == "1"
            found.append(Disk(name, size, rotational, str(device.get("model") or "").strip()))
    return found


def _size(size_bytes: int) -> str:
    for unit, scale in (("TB", 10**12), ("GB", 10**9)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes / 10**6:.0f} MB"


def _rates(ports: list[nccl_env.Port]) -> dict[tuple[str, float], list[nccl_env.Port]]:
    grouped: dict[tuple[str, float], list[nccl_env.Port]] = {}
    for port in ports:
        grouped.setdefault((port.link_layer, port.rate_gbps), []).append(port)
    return grouped


def _names(ports: list[nccl_env.Port]) -> str:
    return hostlist.compress(p.device for p in ports)


# --- proposing settings ------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """A variable discover proposes for a group, and why."""

    group: str  # all, slurm_compute
    name: str
    value: Any
    reason: str


@dataclass
class Discovery:
    nodes: dict[str, NodeHardware]
    unreachable: dict[str, str]  # host -> why it was not read
    settings: list[Setting] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what an operator should look at


def propose(
    spec: ClusterSpec, nodes: dict[str, NodeHardware], unreachable: dict[str, str]
) -> Discovery:
    """The settings the hosts call for. Compute nodes are judged by their majority: a node
    that differs (a GPU or a port missing) is named in a note, never the norm."""
    found = Discovery(nodes, unreachable)
    compute = [nodes[h] for h in spec.group(COMPUTE) if h in nodes]
    if not compute:
        found.notes.append("no compute node was read: nothing to propose for them")
    else:
        _propose_compute(found, compute)
    if nodes and all(n.container for n in nodes.values()):
        reason = "every host is a container: it shares its host's clock and kernel settings"
        found.settings += [
            Setting("all", "base_chrony_control_clock", False, reason),
            Setting("all", "base_sysctl_apply", False, reason),
            Setting(
                "all",
                "slurm_cgroup_enabled",
                False,
                "every host is a container: Slurm cannot constrain jobs with cgroups there",
            ),
        ]
    without = [host for host, node in nodes.items() if not node.autofs]
    if without:
        found.settings.append(
            Setting(
                "all",
                "autofs_automount",
                False,
                f"{hostlist.compress(without)}: the kernel has no autofs: shared mounts are "
                "made at boot (systemd mount units), not on access",
            )
        )
    return found


def _majority(values: list[Any]) -> Any:
    return Counter(values).most_common(1)[0][0]


def _propose_compute(found: Discovery, compute: list[NodeHardware]) -> None:
    model = _majority([n.gpu_model for n in compute])
    gpus = _majority([len(n.gpu_ids) for n in compute])
    rails = _majority([tuple(_rail_key(p) for p in n.rails) for n in compute])
    nvswitches = _majority([n.nvswitches for n in compute])
    for node in compute:
        differs = []
        if node.gpu_model != model or len(node.gpu_ids) != gpus:
            differs.append(f"{len(node.gpu_ids)}x {node.gpu_model or 'no GPU'}")
        if len({gpu_models.PCI_DEVICE_IDS.get(i, i) for i in node.gpu_ids}) > 1:
            differs.append("GPUs of several models")
        if node.nvswitches != nvswitches:
            differs.append(counted(node.nvswitches, "NVSwitch", "NVSwitches"))
        if tuple(_rail_key(p) for p in node.rails) != rails:
            differs.append(f"compute rails {_rail_text(node.rails)}")
        if differs:
            found.notes.append(
                f"{node.host} differs from the other compute nodes: {', '.join(differs)} "
                f"(most have {gpus}x {model or 'no GPU'}, {_rail_text_keys(rails)}): "
                "a fault, or a node for another group"
            )
    for node in compute:
        if node.gpu_ids and gpu_models.by_pci_id(node.gpu_ids[0]) is None:
            found.notes.append(
                f"{node.host}: GPU {node.gpu_ids[0]} is not in Kiln's table "
                "(kiln.gpu_models.PCI_DEVICE_IDS): no profile or NVLink count proposed"
            )
            break
    typical = next(
        n
        for n in compute
        if n.gpu_model == model
        and len(n.gpu_ids) == gpus
        and tuple(_rail_key(p) for p in n.rails) == rails
    )
    _propose_profile(found, typical)
    if gpus:
        found.settings += [
            Setting(COMPUTE, "health_gpus", gpus, f"{gpus}x {model} on the compute nodes"),
            Setting(
                COMPUTE,
                "nvidia_driver_required",
                True,
                "a compute node that shows no GPU is a fault, not a CPU node",
            ),
        ]
    if typical.rails:
        found.settings.append(
            Setting(
                COMPUTE,
                "health_ib_ports",
                [{"device": p.device, "port": p.port, "rate": _rate(p)} for p in typical.rails],
                f"the compute rails: {_rail_text(typical.rails)}",
            )
        )
    _propose_topology(found, typical, [n.host for n in compute])


def _rail_key(port: nccl_env.Port) -> tuple[str, int, str, float]:
    return (port.device, port.port, port.link_layer, port.rate_gbps)


def _rate(port: nccl_env.Port) -> int | float:
    return int(port.rate_gbps) if port.rate_gbps == int(port.rate_gbps) else port.rate_gbps


def _rail_text(ports: list[nccl_env.Port]) -> str:
    if not ports:
        return "none"
    return ", ".join(
        f"{len(group)}x {layer} {rate:g} Gb/s ({_names(group)})"
        for (layer, rate), group in _rates(ports).items()
    )


def _rail_text_keys(keys: tuple) -> str:
    return _rail_text([nccl_env.Port(d, p, "ACTIVE", r, layer) for d, p, layer, r in keys])


def _propose_profile(found: Discovery, node: NodeHardware) -> None:
    fabric = node.rails[0].link_layer if node.rails else ""
    rate = min((p.rate_gbps for p in node.rails), default=0.0)
    matches = [
        name
        for name in profiles.shipped()
        if (hardware := profiles.load(name).hardware)
        and hardware.fits(node.gpu_model, len(node.gpu_ids), fabric, rate, node.container)
    ]
    if matches:
        found.settings.append(
            Setting(
                "all",
                "validate_profile",
                matches[0],
                f"the shipped profile for {profiles.load(matches[0]).description}",
            )
        )
    else:
        found.notes.append(
            f"no shipped validation profile fits {len(node.gpu_ids)}x "
            f"{node.gpu_model or 'no GPU'} with {_rail_text(node.rails)}: write your own "
            "(docs/validation.md, profiles) and name it in validate_profile"
        )


def _propose_topology(found: Discovery, node: NodeHardware, hosts: list[str]) -> None:
    model = gpu_models.by_pci_id(node.gpu_ids[0]) if node.gpu_ids else None
    if model is not None and model.name == "NVIDIA GB200":
        found.settings.append(
            Setting(
                "all",
                "slurm_topology_source",
                "nvlink",
                "GB200 nodes: NVLink domains (NVL72 racks) as Slurm blocks",
            )
        )
    elif node.rails and node.rails[0].link_layer == "InfiniBand":
        found.settings += [
            Setting(
                "all",
                "slurm_topology_source",
                "ibnetdiscover",
                "the compute rails are InfiniBand: the switch tree from the fabric",
            ),
            Setting(
                "all",
                "slurm_topology_fabric_hosts",
                [hosts[0]],
                "one node per fabric runs ibnetdiscover",
            ),
            Setting(
                "all",
                "slurm_topology_hca",
                sorted({p.device for p in node.rails}, key=hostlist.sort_key),
                "the compute rails' HCAs (a storage rail stays out of the tree)",
            ),
        ]


def discover(spec: ClusterSpec, display: "Displays") -> tuple[Discovery, "RunSummary"]:
    """Read every host of the inventory (playbooks/discover.yml) and propose."""
    import json

    from kiln.run.gather import gather

    gathered = gather("discover.yml", spec, list(spec.hosts), display, "discover_dir")
    nodes = {host: read_node(host, json.loads(text)) for host, text in gathered.texts.items()}
    _save(spec, nodes)
    return propose(spec, nodes, gathered.errors), gathered.summary


def _record_path(spec: ClusterSpec) -> "Path":
    import hashlib

    from kiln import paths

    digest = hashlib.sha256(str(spec.path.absolute()).encode()).hexdigest()[:16]
    return paths.state_dir() / "discover" / f"{digest}.json"


def _save(spec: ClusterSpec, nodes: dict[str, NodeHardware]) -> None:
    """What was read, kept for `kiln inventory pins`: the artifacts named for the nodes'
    OS (HPC-X's tarball, NVIDIA's repository) follow the last discovery."""
    from kiln import files

    path = _record_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(files.json_text({h: n.to_json() for h, n in nodes.items()}))


def last(spec: ClusterSpec) -> dict[str, dict[str, Any]]:
    """The last discovery's nodes ({host: NodeHardware.to_json()}), {} without one."""
    import json

    path = _record_path(spec)
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


# --- what changes in the inventory -------------------------------------------------------

# Where `--write` adds a proposal its group does not set yet (group_vars/GROUP/FILE).
NEW_FILE = "discovered.yml"


@dataclass(frozen=True)
class Difference:
    setting: Setting
    current: Any  # the value the group's hosts resolve now (None: not set, no default)
    source: str  # where that value comes from: the inventory, or the role's default


def differences(spec: ClusterSpec, found: Discovery) -> list[Difference]:
    """The proposals whose value the inventory does not hold yet, each with the value its
    group's first host has now (set in the inventory, or the role's default)."""
    from kiln import argspec, paths, roles

    catalogue = argspec.load_catalogue(paths.roles_dir())
    changed = []
    for setting in found.settings:
        members = spec.group(setting.group) if setting.group != "all" else list(spec.hosts)
        host = spec.hosts[members[0]] if members else None
        if host is not None and setting.name in host.vars:
            current, source = host.vars[setting.name], "inventory"
        else:
            role = catalogue[setting.name].role if setting.name in catalogue else ""
            current, source = roles.defaults(role).get(setting.name) if role else None, "default"
        if current != setting.value:
            changed.append(Difference(setting, current, source))
    return changed
