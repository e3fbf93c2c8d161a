"""NCCL's site settings per node: the fabric read from sysfs, the preset for that fabric
(each setting naming its source), the operator's overrides on top, and /etc/nccl.conf
written as NCCL reads it.

How NCCL reads the file (its setEnvFile, unchanged from 2.x to 2.28): ~/.nccl.conf, then
/etc/nccl.conf; each line is split at its first '='; a line without '=' is skipped;
nothing is trimmed, so `  NCCL_DEBUG = INFO` sets a variable named "  NCCL_DEBUG ";
setenv(..., 0) leaves a variable already in the environment alone. So: bare KEY=VALUE
lines, comments on lines of their own holding no '=', and what users export wins.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from kiln import formats
from kiln.cloud import cloud_of, machine_type

CONF = "/etc/nccl.conf"
_KEY = re.compile(r"[A-Z][A-Z0-9_]*")
_STATE = re.compile(r"^\d+:\s*(\S+)")  # "4: ACTIVE"
_RATE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec")  # "400 Gb/sec (4X NDR)"
# The GID NCCL should use on RoCE: RoCE v2 over IPv4 (an IPv4-mapped IPv6 address).
_IPV4_MAPPED = re.compile(r"0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}")
# The variables nccl_env_overrides may set (docs/nccl.md): NCCL's own, and those of the
# libraries NCCL and its network plugins load, which read them from the environment
# NCCL sets from /etc/nccl.conf: libfabric's (FI_) and AWS's aws-ofi-nccl (OFI_NCCL_),
# UCX (UCX_) and SHARP (SHARP_) for NVIDIA's nccl-rdma-sharp-plugins, rdma-core's
# (RDMAV_, MLX5_, IBV_) and CUDA's (CUDA_). Never another program's: LD_PRELOAD, PATH.
OVERRIDE_FAMILIES = (
    "NCCL_",
    "FI_",
    "OFI_NCCL_",
    "UCX_",
    "SHARP_",
    "RDMAV_",
    "MLX5_",
    "IBV_",
    "CUDA_",
)
# CUDA's variables that load a library into every process that starts CUDA.
LIBRARY_LOADERS = ("CUDA_INJECTION32_PATH", "CUDA_INJECTION64_PATH")


class NcclError(ValueError):
    """A setting or an input that cannot be used; the message says which."""


@dataclass(frozen=True)
class Port:
    """One port of an RDMA device, from /sys/class/infiniband/<device>/ports/<n>/."""

    device: str  # mlx5_0, rdmap16s27 (EFA)
    port: int
    state: str  # ACTIVE, DOWN, INIT
    rate_gbps: float
    link_layer: str  # InfiniBand, Ethernet, Unspecified (EFA)
    driver: str = ""  # mlx5_core, efa
    netdevs: tuple[str, ...] = ()
    roce_v2_gid: int | None = None  # the first RoCE v2 GID over IPv4

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class Fabric:
    """What a node offers NCCL: its RDMA ports, the interface that reaches the other
    nodes (bootstrap and socket traffic), and the cloud it runs in ("" on bare metal)."""

    ports: tuple[Port, ...] = ()
    socket_ifname: str = ""
    cloud: str = ""  # aws, azure, gcp
    # The cloud's machine type where it says (Azure's instance metadata: vmSize,
    # Standard_ND96isr_H100_v5); DMI names only "Virtual Machine" there.
    machine: str = ""


@dataclass
class Settings:
    """NCCL variables in order, each with where it came from."""

    values: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # comment lines: what was left out, why

    def set(self, key: str, value: Any, source: str) -> None:
        self.values[key] = str(value)
        self.sources[key] = source


# --- reading the node ---------------------------------------------------------------------


def read_ports(sysfs: dict[str, str]) -> list[Port]:
    """The RDMA ports from a dump of /sys/class/infiniband ({path below it: content};
    links given as their target's basename), in device and port order."""
    devices: dict[str, dict[str, str]] = {}
    for path, content in sysfs.items():
        device, _, rest = path.partition("/")
        devices.setdefault(device, {})[rest] = content.strip()
    ports = []
    for device, files in sorted(devices.items(), key=lambda item: _natural(item[0])):
        numbers = sorted({int(m.group(1)) for f in files if (m := re.match(r"ports/(\d+)/", f))})
        netdevs = tuple(sorted(f.split("/")[2] for f in files if f.startswith("device/net/")))
        for number in numbers:
            base = f"ports/{number}"
            state = _STATE.match(files.get(f"{base}/state", ""))
            rate = _RATE.match(files.get(f"{base}/rate", ""))
            ports.append(
                Port(
                    device=device,
                    port=number,
                    state=state.group(1) if state else "UNKNOWN",
                    rate_gbps=float(rate.group(1)) if rate else 0.0,
                    link_layer=files.get(f"{base}/link_layer", ""),
                    driver=files.get("device/driver", ""),
                    netdevs=netdevs,
                    roce_v2_gid=_roce_v2_gid(files, base),
                )
            )
    return ports


def _roce_v2_gid(files: dict[str, str], base: str) -> int | None:
    indexes = sorted(
        int(m.group(1))
        for f, content in files.items()
        if (m := re.fullmatch(rf"{base}/gid_attrs/types/(\d+)", f)) and content == "RoCE v2"
    )
    for index in indexes:
        if _IPV4_MAPPED.fullmatch(files.get(f"{base}/gids/{index}", "")):
            return index
    return None


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


# --- choosing the preset ------------------------------------------------------------------


def rails(ports: list[Port], excluded: list[str]) -> tuple[list[Port], list[str]]:
    """The ports NCCL should use, and a note for each left out, in port order: only
    ACTIVE ports of the node's fastest link layer and rate (a slower port is a storage
    or management rail), none the operator excluded (by device, or device:port)."""

    def is_excluded(port: Port) -> bool:
        return port.device in excluded or port.name in excluded

    active = [p for p in ports if p.state == "ACTIVE" and not is_excluded(p)]
    fastest = max(active, key=lambda p: (p.link_layer == "InfiniBand", p.rate_gbps), default=None)
    chosen, notes = [], []
    for port in ports:
        if is_excluded(port):
            notes.append(f"{port.name} excluded by nccl_env_exclude_hcas")
        elif port.state != "ACTIVE":
            notes.append(f"{port.name} left out: {port.state}")
        elif fastest and (port.link_layer, port.rate_gbps) != (
            fastest.link_layer,
            fastest.rate_gbps,
        ):
            notes.append(
                f"{port.name} left out: {port.link_layer} at {port.rate_gbps:g} Gb/s, the "
                f"compute rails are {fastest.link_layer} at {fastest.rate_gbps:g} Gb/s "
                "(a storage rail?)"
            )
        else:
            chosen.append(port)
    return chosen, notes


def hca_list(ports: list[Port]) -> str:
    """NCCL_IB_HCA with the '=' prefix: exact names, so mlx5_1 does not also match
    mlx5_10 (without it NCCL matches names by prefix)."""
    return "=" + ",".join(port.name for port in ports)


# Where each preset's settings come from, written above them in /etc/nccl.conf.
SOURCES = {
    "infiniband": "NCCL's environment variable documentation (NCCL_IB_HCA exact match)",
    "roce": "NCCL's environment variable documentation (NCCL_IB_GID_INDEX, NCCL_IB_TC)",
    "efa": "AWS's aws-ofi-nccl plugin: recent releases configure themselves",
    "azure-ndv5": "Azure HPC images, customizations for ND H100 v5",
    "socket": "no RDMA device: NCCL over TCP sockets",
    "gcp-tcpx": "Google's GPUDirect-TCPX NCCL plugin: its environment script",
    "gcp-tcpxo": "Google's GPUDirect-TCPXO NCCL plugin: its environment script",
    "gcp-gib": "Google's gIB NCCL plugin: its environment script",
}
# Google's machine types whose GPU network needs Google's own NCCL plugin, by plugin.
GCP_PLUGIN_OF = {
    "a3-highgpu-8g": "tcpx",
    "a3-megagpu-8g": "tcpxo",
    "a3-ultragpu-8g": "gib",
    "a4-highgpu-8g": "gib",
}
# Variables the dynamic loader reads when a process starts: NCCL reads /etc/nccl.conf
# later, so they cannot be set there.
PROCESS_START = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PATH")
# RoCE traffic class: DSCP 26 (the lossless class of common RoCE QoS setups) shifted
# into the TOS byte, with ECN capable (26 << 2 | 2).
ROCE_TRAFFIC_CLASS = 106


def gcp_plugin(fabric: Fabric) -> str:
    """tcpx, tcpxo, gib: the Google NCCL plugin the node's machine type needs, or ""."""
    return GCP_PLUGIN_OF.get(fabric.machine, "") if fabric.cloud == "gcp" else ""


def preset(
    fabric: Fabric, excluded: list[str] | None = None, plugin_env: dict[str, str] | None = None
) -> tuple[str, Settings]:
    """The preset for the node's fabric, and its settings with their sources. On
    Google's A3 and A4 machines, plugin_env is what the NCCL plugin's own environment
    script sets (None where the script is not on the node)."""
    chosen, notes = rails(list(fabric.ports), list(excluded or []))
    settings = Settings(notes=notes)
    efa = [p for p in chosen if p.driver == "efa"]
    plugin = gcp_plugin(fabric)
    if plugin and plugin_env is None:
        settings.notes.append(
            f"{fabric.machine} needs Google's {plugin} NCCL plugin; its environment script "
            "is not on this node (nccl_env_gcp_plugins), so the generic preset is used"
        )
    if plugin and plugin_env is not None:
        name = f"gcp-{plugin}"
        for key, value in plugin_env.items():
            if key in PROCESS_START:
                settings.notes.append(
                    f"{key} from the plugin's script left out: the loader reads it when a "
                    "process starts, before NCCL reads this file"
                )
            elif _KEY.fullmatch(key) and not formats.one_line(value) and value == value.strip():
                settings.set(key, value, name)
        return name, settings  # the script names its own interfaces
    if efa:
        name = "efa"
        settings.set("FI_PROVIDER", "efa", name)
    elif chosen and chosen[0].link_layer == "InfiniBand":
        ndv5 = fabric.cloud == "azure" and fabric.machine.endswith("H100_v5")
        name = "azure-ndv5" if ndv5 else "infiniband"
        settings.set("NCCL_IB_HCA", hca_list(chosen), name)
        if name == "azure-ndv5":
            settings.set("NCCL_TOPO_FILE", "/opt/microsoft/ndv5/topo.xml", name)
            settings.set("NCCL_IB_PCI_RELAXED_ORDERING", 1, name)
            settings.set("NCCL_IGNORE_CPU_AFFINITY", 1, name)
    elif chosen and chosen[0].link_layer == "Ethernet":
        name = "roce"
        settings.set("NCCL_IB_HCA", hca_list(chosen), name)
        gids = {p.roce_v2_gid for p in chosen}
        if len(gids) == 1 and None not in gids:
            settings.set("NCCL_IB_GID_INDEX", gids.pop(), name)
        else:
            settings.notes.append(
                "NCCL_IB_GID_INDEX left to NCCL: the rails have no common RoCE v2 GID over IPv4"
            )
        settings.set("NCCL_IB_TC", ROCE_TRAFFIC_CLASS, name)
    else:
        name = "socket"
        settings.set("NCCL_IB_DISABLE", 1, name)
    if fabric.socket_ifname and name != "efa":
        # '=': this interface exactly, not every interface whose name starts so.
        settings.set("NCCL_SOCKET_IFNAME", f"={fabric.socket_ifname}", name)
    return name, settings


def with_overrides(settings: Settings, overrides: dict[str, Any]) -> Settings:
    """The operator's nccl_env_overrides on top: a value replaces the preset's, an empty
    one (null or "") removes it."""
    merged = Settings(dict(settings.values), dict(settings.sources), list(settings.notes))
    for key, value in overrides.items():
        check_key(key)
        if value is None or value == "":
            merged.values.pop(key, None)
            merged.sources.pop(key, None)
            merged.notes.append(f"{key} removed by nccl_env_overrides")
        else:
            check_value(key, value)
            merged.set(key, value, "override")
    return merged


def check_key(key: Any) -> None:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise NcclError(f"nccl_env_overrides: {key!r} is not an environment variable name")
    if not key.startswith(OVERRIDE_FAMILIES) or key in LIBRARY_LOADERS:
        raise NcclError(
            f"nccl_env_overrides: {key} is not a setting of NCCL or of a library it loads "
            f"(allowed: {', '.join(f + '*' for f in OVERRIDE_FAMILIES)}; not "
            f"{', '.join(LIBRARY_LOADERS)})"
        )


def check_value(key: str, value: Any) -> None:
    text = str(value)
    if formats.one_line(text) or text != text.strip():
        raise NcclError(
            f"nccl_env_overrides: {key}'s value {text!r} has a line break, a control "
            "character, or leading or trailing spaces, which NCCL would keep"
        )


# --- the file ---------------------------------------------------------------------------


def render(name: str, settings: Settings) -> str:
    """/etc/nccl.conf: comment lines (never holding '=', which NCCL would read as a
    setting) naming each source, then bare KEY=VALUE lines."""
    lines = [f"# Written by Kiln (role nccl_env): preset {name}"]
    by_source: dict[str, list[str]] = {}
    for key, value in settings.values.items():
        by_source.setdefault(settings.sources[key], []).append(f"{key}={value}")
    for source, entries in by_source.items():
        words = SOURCES.get(source, "the operator's nccl_env_overrides")
        lines.append(f"# {source}: {words}")
        lines += entries
    lines += [f"# {note}" for note in settings.notes]
    for line in lines:
        if line.startswith("#") and "=" in line:
            raise NcclError(f"a comment NCCL would read as a setting: {line!r}")
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[str, str]:
    """What NCCL takes from a file: each line split at its first '=', lines without one
    skipped, nothing trimmed (so a key with spaces is a variable NCCL never reads)."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found.setdefault(key, value)
    return found


def check_overrides(overrides: dict[str, Any], groups: Any = None) -> None:
    """kiln inventory check: every name and value of nccl_env_overrides usable."""
    for key, value in overrides.items():
        check_key(key)
        if value not in (None, ""):
            check_value(key, value)


INVENTORY_CHECKS = {"nccl_env_overrides": (dict, check_overrides)}


# --- the role's plan and what is in effect on a node ----------------------------------------


def fabric_of(probe: dict[str, Any]) -> Fabric:
    """The Fabric from the role's node probe (roles/nccl_env/files/kiln-nccl-probe)."""
    cloud = cloud_of(probe.get("dmi", {}))
    return Fabric(
        ports=tuple(read_ports(probe.get("infiniband", {}))),
        socket_ifname=probe.get("socket_ifname", ""),
        cloud=cloud,
        machine=machine_type(cloud, probe.get("machine", "")),
    )


def plugin_script(probe: dict[str, Any], plugins: dict[str, dict[str, str]]) -> str:
    """The environment script of the Google NCCL plugin the node needs ("" for none)."""
    plugin = gcp_plugin(fabric_of(probe))
    return plugins.get(plugin, {}).get("env_script", "") if plugin else ""


def plan(
    probe: dict[str, Any],
    overrides: dict[str, Any],
    excluded: list[str],
    plugin_env: dict[str, str] | None = None,
    library_dir: str = "",
) -> dict[str, Any]:
    """What the nccl_env role writes on a node: the file, and the local fact that
    records the preset and each setting's source (read by `kiln nccl show`)."""
    name, settings = preset(fabric_of(probe), excluded, plugin_env)
    plugin_dir = library_dir if name.startswith("gcp-") else ""
    if plugin_dir:
        settings.notes.append(
            f"the plugin's libraries are in {plugin_dir}: jobs need it on LD_LIBRARY_PATH"
        )
    settings = with_overrides(settings, overrides)
    fact = {
        "preset": name,
        "values": settings.values,
        "sources": settings.sources,
        "notes": settings.notes,
    }
    if plugin_dir:  # the enroot role binds it into containers
        fact["library_dir"] = plugin_dir
    return {"preset": name, "conf": render(name, settings), "fact": fact}


@dataclass(frozen=True)
class Effective:
    """One NCCL variable as a job on the node gets it, and where it comes from."""

    key: str
    value: str
    source: str  # "preset <name>", "override", "file", "environment"


def effective(conf: str, fact: dict[str, Any], environment: dict[str, str]) -> list[Effective]:
    """The settings in effect on a node: /etc/nccl.conf as NCCL reads it, each naming
    the preset or override Kiln wrote it from ("file" where the file holds what Kiln did
    not write), then what the environment of a login shell exports, which wins."""
    preset_name = fact.get("preset", "")
    written, sources = fact.get("values", {}), fact.get("sources", {})
    found: dict[str, Effective] = {}
    for key, value in parse(conf).items():
        source = sources.get(key, "")
        if written.get(key) != value or not source:
            label = "file"
        elif source == "override":
            label = "override"
        else:
            label = f"preset {preset_name}"
        found[key] = Effective(key, value, label)
    for key, value in environment.items():
        if key.startswith(("NCCL_", "FI_")):
            found[key] = Effective(key, value, "environment")
    return list(found.values())


def differences(settings: dict[str, list[Effective]], groups: dict[str, list[str]]) -> list[str]:
    """One line per group whose nodes do not all have the same settings, naming each
    variable that differs and the values seen."""
    lines = []
    for group, members in sorted(groups.items()):
        shown = [m for m in members if m in settings]
        if len(shown) < 2:
            continue
        values = {m: {e.key: e.value for e in settings[m]} for m in shown}
        keys = sorted({k for v in values.values() for k in v})
        for key in keys:
            seen: dict[str, list[str]] = {}
            for member in shown:
                seen.setdefault(values[member].get(key, "(unset)"), []).append(member)
            if len(seen) > 1:
                parts = "; ".join(f"{v} on {', '.join(m)}" for v, m in seen.items())
                lines.append(f"group {group}: {key} differs: {parts}")
    return lines
