"""Slurm configuration as data: slurm.conf, gres.conf and cgroup.conf rendered from
settings dicts, node shapes and partitions. Used by the slurm role through its
filter plugin, and by the inventory checks.

Settings are dicts of slurm.conf keys. The operator's overrides are merged over the
role's defaults; a value of null (or Ansible's omit) removes a key. Keys a Slurm
version does not know are left out for that version.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from kiln import formats, hostlist
from kiln_node import slurm_state

# Keys that appeared or were removed in a Slurm release: (first version, last version).
VERSIONED_KEYS: dict[str, tuple[tuple[int, int] | None, tuple[int, int] | None]] = {
    # cgroup.conf: CgroupPlugin chooses v1/v2 from 22.05 on.
    "CgroupPlugin": ((22, 5), None),
    # cgroup.conf: CgroupAutomount is defunct from 23.02 on.
    "CgroupAutomount": (None, (22, 5)),
}
# Keys that may repeat: a list value becomes one line per item.
REPEATED_KEYS = {"SlurmctldHost"}
SHAPE_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
_OMIT_PREFIX = "__omit_place_holder__"


class SlurmConfigError(ValueError):
    """A setting, shape or partition that cannot be turned into Slurm config."""


def parse_version(text: str) -> tuple[int, int]:
    """'slurm-wlm 24.11.5' or 'slurm 22.05.8' or '24.11' -> (24, 11)."""
    match = re.search(r"(\d+)\.(\d+)", text)
    if not match:
        raise SlurmConfigError(f"cannot read a Slurm version from {text!r}")
    return int(match.group(1)), int(match.group(2))


def _removed(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.startswith(_OMIT_PREFIX))


def merge(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = {**defaults, **overrides}
    return {k: v for k, v in merged.items() if not _removed(v)}


def _known_in(key: str, version: tuple[int, int]) -> bool:
    first, last = VERSIONED_KEYS.get(key, (None, None))
    return (first is None or version >= first) and (last is None or version <= last)


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, list):
        return ",".join(_format(v) for v in value)
    return str(value)


def settings_lines(
    settings: dict[str, Any], version: tuple[int, int], file: str = "slurm.conf"
) -> list[str]:
    lines = []
    for key in sorted(settings):
        if not _known_in(key, version):
            continue
        value = settings[key]
        if key in REPEATED_KEYS and isinstance(value, list):
            lines.extend(f"{key}={_word(file, key, v)}" for v in value)
        else:
            lines.append(f"{key}={_word(file, key, value)}")
    return lines


def _word(where: str, key: Any, value: Any) -> str:
    """KEY=VALUE as Slurm's parser reads it: a space would start another setting, a line
    break another line, '#' a comment."""
    if why := formats.slurm_key(key):
        raise SlurmConfigError(f"{where}: {key!r} {why}")
    text = _format(value)
    if text and (why := formats.word(text)):
        raise SlurmConfigError(f"{where}: {key} {text!r} {why}")
    return text


def check_conf(settings: dict[str, Any], file: str = "slurm.conf") -> None:
    """Every key and value of a slurm.conf (or cgroup.conf) settings dict, as written."""
    for key, value in settings.items():
        if not _removed(value):
            for item in value if key in REPEATED_KEYS and isinstance(value, list) else [value]:
                _word(file, key, item)


@dataclass(frozen=True)
class NodeShape:
    """What slurm.conf says about a node's hardware."""

    cpus: int
    boards: int = 1
    sockets_per_board: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    real_memory: int = 1
    gpus: int = 0
    features: tuple[str, ...] = field(default_factory=tuple)

    def words(self) -> str:
        parts = [
            f"CPUs={self.cpus}",
            f"Boards={self.boards}",
            f"SocketsPerBoard={self.sockets_per_board}",
            f"CoresPerSocket={self.cores_per_socket}",
            f"ThreadsPerCore={self.threads_per_core}",
            f"RealMemory={self.real_memory}",
        ]
        if self.gpus:
            parts.append(f"Gres=gpu:{self.gpus}")
        if self.features:
            parts.append(f"Features={','.join(self.features)}")
        return " ".join(parts)


def parse_slurmd_c(text: str, gpus: int = 0) -> dict[str, Any]:
    """`slurmd -C` output -> a shape dict (the form group/host vars use)."""
    fields = dict(re.findall(r"(\w+)=(\S+)", text.splitlines()[0] if text else ""))
    missing = [k for k in SHAPE_KEYS if k not in fields]
    if missing:
        raise SlurmConfigError(f"slurmd -C gave no {', '.join(missing)}: {text[:120]!r}")
    shape: dict[str, Any] = {k: int(fields[k]) for k in SHAPE_KEYS}
    if gpus:
        shape["Gres"] = f"gpu:{gpus}"
    return shape


def shape_from_dict(host: str, data: dict[str, Any]) -> NodeShape:
    """A declared or detected shape; errors name the host and the key."""

    def number(key: str, default: int | None = None) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SlurmConfigError(f"{host}: shape {key} must be an integer, got {value!r}")
        return value

    sockets = data.get("SocketsPerBoard", data.get("Sockets", 1))
    gres = str(data.get("Gres", "") or "")
    gpus = 0
    if gres:
        match = re.fullmatch(r"gpu(?::[A-Za-z0-9_-]+)?:([0-9]+)", gres)
        if not match:
            raise SlurmConfigError(f"{host}: shape Gres must look like gpu:8, got {gres!r}")
        gpus = int(match.group(1))
    features = data.get("Features") or []
    if isinstance(features, str):
        features = [f for f in features.split(",") if f]
    if not isinstance(features, list):
        raise SlurmConfigError(f"{host}: shape Features must be a list or a1,a2, got {features!r}")
    for feature in features:
        if not formats.is_name(feature):
            raise SlurmConfigError(f"{host}: shape feature {feature!r} {formats.NAME_RULE}")
    return NodeShape(
        cpus=number("CPUs"),
        boards=number("Boards", 1),
        sockets_per_board=number("SocketsPerBoard", sockets if isinstance(sockets, int) else 1),
        cores_per_socket=number("CoresPerSocket", 1),
        threads_per_core=number("ThreadsPerCore", 1),
        real_memory=number("RealMemory"),
        gpus=gpus,
        features=tuple(sorted(features)),
    )


def node_lines(shapes: dict[str, NodeShape]) -> list[str]:
    """One NodeName line per distinct shape, its hosts compressed."""
    by_shape: dict[NodeShape, list[str]] = {}
    for host, shape in shapes.items():
        by_shape.setdefault(shape, []).append(host)
    lines = [
        f"NodeName={hostlist.compress(hosts)} {shape.words()} State=UNKNOWN"
        for shape, hosts in by_shape.items()
    ]
    return sorted(lines)


@dataclass
class Partition:
    name: str
    nodes: list[str]
    default: bool = False
    max_time: str = "INFINITE"
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        words = [
            f"PartitionName={self.name}",
            f"Nodes={hostlist.compress(self.nodes)}",
            f"Default={'YES' if self.default else 'NO'}",
            f"MaxTime={self.max_time}",
            "State=UP",
        ]
        words += [f"{k}={_format(v)}" for k, v in sorted(self.extra.items())]
        return " ".join(words)


def partitions(
    declared: list[dict[str, Any]], groups: dict[str, list[str]], compute: list[str]
) -> list[Partition]:
    """Partitions from the inventory: `nodes` is an inventory group or a hostlist."""
    result = []
    for item in declared:
        name = str(item.get("name", ""))
        if not formats.is_name(name):
            raise SlurmConfigError(f"partition name {name!r} {formats.NAME_RULE}")
        max_time = str(item.get("max_time", "INFINITE"))
        if why := formats.slurm_time(max_time):
            raise SlurmConfigError(f"partition {name}: max_time {max_time!r}: {why}")
        extra = dict(item.get("extra") or {})
        for key, value in extra.items():
            _word(f"partition {name}: extra", key, value)
        spec = str(item.get("nodes", "slurm_compute"))
        if spec in groups:
            nodes = groups[spec]
        elif "[" in spec or "," in spec or spec in compute:
            nodes = hostlist.expand(spec)
        else:
            raise SlurmConfigError(
                f"partition {name}: nodes {spec!r} is neither an inventory group nor a hostlist "
                "of compute nodes"
            )
        unknown = sorted(set(nodes) - set(compute))
        if unknown:
            raise SlurmConfigError(
                f"partition {name}: {hostlist.compress(unknown)} are not compute nodes"
            )
        if not nodes:
            raise SlurmConfigError(f"partition {name}: no nodes")
        result.append(
            Partition(
                name=name,
                nodes=nodes,
                default=bool(item.get("default", False)),
                max_time=max_time,
                extra=extra,
            )
        )
    if result and not any(p.default for p in result):
        result[0].default = True
    return result


def slurm_conf(
    settings: dict[str, Any],
    version: tuple[int, int],
    shapes: dict[str, NodeShape],
    parts: list[Partition],
) -> str:
    lines = ["# Managed by Kiln (slurm role). Change slurm_conf_overrides, not this file.", ""]
    lines += settings_lines(settings, version)
    lines += ["", "# Nodes", *node_lines(shapes)]
    lines += ["", "# Partitions"] + [p.line() for p in parts]
    return "\n".join(lines) + "\n"


def gres_conf(shapes: dict[str, NodeShape], autodetect: str) -> str:
    """AutoDetect=<autodetect> where the build has a GPU detection plugin (Cluster's
    gpu_autodetect); explicit device files otherwise; nothing for CPU-only nodes."""
    lines = ["# Managed by Kiln (slurm role)."]
    by_gpus: dict[int, list[str]] = {}
    for host, shape in shapes.items():
        if shape.gpus:
            by_gpus.setdefault(shape.gpus, []).append(host)
    for gpus, hosts in sorted(by_gpus.items()):
        names = hostlist.compress(hosts)
        if autodetect:
            lines.append(f"NodeName={names} AutoDetect={autodetect}")
        else:
            files = "/dev/nvidia0" if gpus == 1 else f"/dev/nvidia[0-{gpus - 1}]"
            lines.append(f"NodeName={names} Name=gpu File={files}")
    return "\n".join(lines) + "\n"


def cgroup_conf(settings: dict[str, Any], version: tuple[int, int]) -> str:
    lines = ["# Managed by Kiln (slurm role).", *settings_lines(settings, version, "cgroup.conf")]
    return "\n".join(lines) + "\n"


USABLE_STATES = {"IDLE", "ALLOCATED", "MIXED", "COMPLETING"}


def node_state(scontrol_oneliner: str) -> dict[str, Any]:
    """`scontrol show node X --oneliner` -> {state, base, reason, usable, settled}."""
    seen = slurm_state.parse_line(scontrol_oneliner)
    usable = seen.base in USABLE_STATES and not seen.drained and "NOT_RESPONDING" not in seen.flags
    # A drain is somebody's decision: waiting will not change it.
    return {
        "state": seen.state,
        "base": seen.base,
        "reason": seen.reason,
        "usable": usable,
        "settled": usable or seen.drained,
    }


def conf_value(text: str, key: str) -> str:
    """The value of KEY=VALUE in a Slurm-style config file, or ''."""
    match = re.search(rf"(?m)^\s*{re.escape(key)}=(.*)$", text or "")
    return match.group(1).strip() if match else ""


# slurm.conf keys that depend on whether cgroups are used.
CGROUP_KEYS = {
    "ProctrackType": "proctrack/cgroup",
    "TaskPlugin": "task/cgroup,task/affinity",
    "JobAcctGatherType": "jobacct_gather/cgroup",
    "PrologFlags": "Contain",
}
NO_CGROUP_KEYS = {
    "ProctrackType": "proctrack/linuxproc",
    "TaskPlugin": "task/none",
    "JobAcctGatherType": "jobacct_gather/linux",
}
# Kiln's job-edge checks (the health role installs them): slurm.conf's Prolog and Epilog.
KILN_PROLOG = "/usr/local/sbin/kiln-prolog"
KILN_EPILOG = "/usr/local/sbin/kiln-epilog"
# gres.conf's AutoDetect value for each GPU detection plugin, preferred first. Slurm
# 24.11's gpu_nvidia.so (Debian 13's build) reads the driver's /proc and sysfs files
# without NVML and answers only to AutoDetect=nvidia: under AutoDetect=nvml it finds no
# GPU and Slurm drains the node ("gres/gpu count reported lower than configured").
GPU_AUTODETECT = (("gpu_nvml.so", "nvml"), ("gpu_nvidia.so", "nvidia"))
# Slurm 24.11's switch plugin that gives each job its IMEX channel (NVL72).
IMEX_PLUGIN = "switch_nvidia_imex.so"


@dataclass
class Cluster:
    """What the slurm.conf keys Kiln computes depend on: the inventory's choices and
    what the controller has installed (the plugin and library file names found)."""

    controllers: list[str]
    plugins: list[str]
    topology_plugin: str = ""
    configless: bool = False
    cgroup: bool = True
    accounting: bool = False
    dbd_host: str = ""
    dbd_port: int = 6819
    mpi: str = "pmix"  # slurm_mpi_default: pmix, pmi2 or none
    imex_nodes: list[str] = field(default_factory=list)  # compute nodes that run IMEX
    # Prolog and Epilog: Kiln's check first (when on), then the operator's programs.
    prolog: bool = False
    epilog: bool = False
    prolog_extra: list[str] = field(default_factory=list)
    epilog_extra: list[str] = field(default_factory=list)

    @property
    def gpu_autodetect(self) -> str:
        """gres.conf's AutoDetect value, "" when the build has no detection plugin."""
        return next((mode for name, mode in GPU_AUTODETECT if name in self.plugins), "")

    @property
    def pmix_problem(self) -> str:
        """Why `srun --mpi=pmix` cannot work with what the controller has ("" when it can).
        Slurm's plugin dlopen()s the unversioned libpmix.so (upstream builds and Debian 12;
        Debian's libpmix-dev), so the runtime's libpmix.so.2 alone is not enough there."""
        if "mpi_pmix.so" not in self.plugins:
            return (
                "this Slurm build has no PMIx plugin (mpi_pmix.so): Open MPI programs start"
                " with mpirun inside an allocation"
            )
        if "libpmix.so" not in self.plugins:
            return (
                "the PMIx library Slurm's plugin loads (libpmix.so, Debian's libpmix-dev) "
                "is not installed"
            )
        return ""

    @property
    def pmix(self) -> bool:
        return not self.pmix_problem

    @property
    def mpi_default(self) -> str:
        """MpiDefault: what slurm_mpi_default asks for, none where PMIx cannot work."""
        return "none" if self.mpi == "pmix" and not self.pmix else self.mpi


def settings(defaults: dict[str, Any], cluster: Cluster, overrides: dict[str, Any]) -> dict:
    """slurm.conf's settings: the role's defaults, then what Kiln computes for this
    cluster, then the operator's overrides (a null value removes a key)."""
    computed: dict[str, Any] = {
        "SlurmctldHost": cluster.controllers,
        "MpiDefault": cluster.mpi_default,
    }
    if cluster.topology_plugin:
        computed["TopologyPlugin"] = cluster.topology_plugin
    if cluster.configless:
        computed["SlurmctldParameters"] = "enable_configless"
    computed.update(CGROUP_KEYS if cluster.cgroup else NO_CGROUP_KEYS)
    computed.update(job_programs(cluster))
    if cluster.imex_nodes:
        # Without it jobs spanning an NVLink domain get no IMEX channel: refuse rather
        # than write a slurm.conf that schedules them anyway.
        if IMEX_PLUGIN not in cluster.plugins:
            raise SlurmConfigError(
                f"{hostlist.compress(cluster.imex_nodes)} run IMEX, but this Slurm has no "
                f"switch/nvidia_imex plugin ({IMEX_PLUGIN}, Slurm 24.11 or later): upgrade "
                "Slurm, or set nvidia_driver_imex off for them"
            )
        computed["SwitchType"] = "switch/nvidia_imex"
    if cluster.accounting:
        computed.update(
            AccountingStorageType="accounting_storage/slurmdbd",
            AccountingStorageHost=cluster.dbd_host,
            AccountingStoragePort=cluster.dbd_port,
            AccountingStorageTRES="gres/gpu",
        )
    return merge(merge(defaults, computed), overrides)


def job_programs(cluster: Cluster) -> dict[str, Any]:
    """Prolog= and Epilog=: Kiln's check, then the operator's, as one comma-separated
    list (Slurm 21.08 and later run each in turn). Without cgroups PrologFlags=Alloc
    runs the Prolog when the job is allocated, before it starts (Contain implies it)."""
    found: dict[str, Any] = {}
    for key, kiln, on, extra in (
        ("Prolog", KILN_PROLOG, cluster.prolog, cluster.prolog_extra),
        ("Epilog", KILN_EPILOG, cluster.epilog, cluster.epilog_extra),
    ):
        programs = ([kiln] if on else []) + list(extra)
        for program in programs:
            if why := formats.word(str(program)):
                raise SlurmConfigError(f"{key} {program!r} {why}")
            if not str(program).startswith("/") or "," in str(program):
                raise SlurmConfigError(
                    f"{key} {program!r}: expected one absolute path (slurmd runs it with no PATH)"
                )
        if programs:
            found[key] = ",".join(programs)
    if found.get("Prolog") and not cluster.cgroup:
        found["PrologFlags"] = "Alloc"
    return found


PLUGSTACK_DIR = "/etc/slurm/plugstack.conf.d"
# Include lines end at the first blank (Slurm's parser).
_INCLUDABLE = re.compile(r"^\S+\.conf$")


def plugstack_conf(found: list[str]) -> str:
    """/etc/slurm/plugstack.conf: one include line per file of plugstack.conf.d, in the
    order a glob gives them. Debian ships `include /etc/slurm/plugstack.conf.d/*.conf`,
    which SPANK reads, but Slurm's own parser refuses a glob: slurmctld, reading
    plugstack.conf for configless nodes (24.11), logs "Slurm does not support glob
    parsing" and '"Include" failed' at every start and reconfigure. The slurm role
    writes it before Slurm starts, and the pyxis role again once pyxis.conf is there."""
    files = sorted(p for p in found if p.startswith(PLUGSTACK_DIR + "/") and _INCLUDABLE.match(p))
    lines = [
        "# Written by Kiln (roles slurm and pyxis): each file of plugstack.conf.d by name,",
        "# since Slurm's own parser refuses a glob.",
        *(f"include {path}" for path in files),
    ]
    return "\n".join(lines) + "\n"


def config_files(
    conf: dict[str, Any],
    cgroup: dict[str, Any],
    version: tuple[int, int],
    shapes: dict[str, NodeShape],
    parts: list[Partition],
    gpu_autodetect: str,
) -> dict[str, str]:
    """Every file the slurm role writes in /etc/slurm (the topology file aside)."""
    return {
        "slurm.conf": slurm_conf(conf, version, shapes, parts),
        "gres.conf": gres_conf(shapes, gpu_autodetect),
        "cgroup.conf": cgroup_conf(cgroup, version),
    }


def cached_fact(host_vars: dict[str, Any], name: str) -> Any:
    """A fact the role sets with `cacheable: true`: a variable when set in this run, in
    the fact cache (so present even when the host is outside --limit) otherwise."""
    return host_vars.get(name) or (host_vars.get("ansible_facts") or {}).get(name) or []


def node_shapes(hostvars: dict[str, Any], hosts: list[str]) -> dict[str, NodeShape]:
    """Each compute node's shape: declared (slurm_node_shape), else detected on it."""
    shapes = {}
    for host in hosts:
        data = hostvars[host].get("slurm_node_shape") or cached_fact(
            hostvars[host], "slurm_detected_shape"
        )
        if not data:
            raise SlurmConfigError(
                f"no node shape for {host}: declare slurm_node_shape, or provision it once "
                "in a run not limited to other hosts, so Kiln can detect it"
            )
        shapes[host] = shape_from_dict(host, data)
    return shapes


def _check_partitions(value: list, groups: dict[str, list[str]]) -> None:
    partitions(value, groups, groups.get("slurm_compute", []))


def _check_shape(value: dict, groups: dict[str, list[str]]) -> None:
    shape_from_dict("slurm_node_shape", value)  # its message names the variable


def _check_dbd_password(value: str, groups: dict[str, list[str]]) -> None:
    """slurmdbd.conf's StoragePass; the message never repeats the password."""
    if why := formats.word(value):
        raise SlurmConfigError(f"slurm_dbd_password {why} (slurmdbd.conf's StoragePass)")


# Inventory variables this module checks before anything runs (kiln.inventory.checks).
INVENTORY_CHECKS = {
    "slurm_partitions": (list, _check_partitions),
    "slurm_node_shape": (dict, _check_shape),
    "slurm_conf_defaults": (dict, lambda value, groups: check_conf(value)),
    "slurm_conf_overrides": (dict, lambda value, groups: check_conf(value)),
    "slurm_cgroup_conf": (dict, lambda value, groups: check_conf(value, "cgroup.conf")),
    "slurm_dbd_password": (str, _check_dbd_password),
    "slurm_prolog_extra": (
        list,
        lambda value, groups: job_programs(Cluster([], [], prolog_extra=value)),
    ),
    "slurm_epilog_extra": (
        list,
        lambda value, groups: job_programs(Cluster([], [], epilog_extra=value)),
    ),
    # Written as slurm.conf's HealthCheckNodeState (slurm_conf_defaults).
    "slurm_health_node_state": (
        str,
        lambda value, groups: _word("slurm.conf", "HealthCheckNodeState", value),
    ),
}
