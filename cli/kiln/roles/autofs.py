"""Shared storage declared once in the inventory (`autofs_mounts`), rendered as autofs
maps, or as systemd mount units for mounts made at boot (`automount: false`, or
`autofs_automount: false` for every mount of a host). The autofs role and `kiln inventory
check` both use this module, so a declaration is judged the same way before a run and
during it."""

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kiln import formats, roles

TYPES = ("nfs", "nfs4", "lustre", "glusterfs", "wekafs", "bind", "generic")

# Default mount options per type live in one place, the autofs role's
# `autofs_default_options` (the role passes them; role_default_options() reads them for
# everything else). On NFS, several TCP connections where the kernel has nconnect (5.3+).
NCONNECT = "nconnect=8"
NCONNECT_KERNEL = (5, 3)
# Idle time before autofs unmounts; a mount with open files is never expired.
DEFAULT_TIMEOUT = 3600
# Debian packages for each type's client; None: a vendor client the distro lacks.
CLIENT_PACKAGES: dict[str, list[str] | None] = {
    "nfs": ["nfs-common"],
    "lustre": None,
    "glusterfs": ["glusterfs-client"],
    "wekafs": None,
    "bind": [],
    "generic": [],
}
# What proves a vendor client is installed, and what to tell the operator otherwise.
VENDOR_CLIENTS = {
    "lustre": ("/sbin/mount.lustre", "the Lustre client (lustre-client-utils and its modules)"),
    "wekafs": ("/sbin/mount.wekafs", "the Weka client (the agent your Weka backends serve)"),
}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


class StorageError(ValueError):
    """A storage declaration that cannot be used; the message names the mount."""


@dataclass(frozen=True)
class Mount:
    name: str
    path: str  # mount point; ending in /* makes an indirect map keyed by subdirectory
    type: str
    source: str
    options: tuple[str, ...] = ()
    fstype: str = ""  # generic only
    groups: tuple[str, ...] = ("all",)
    timeout: int = DEFAULT_TIMEOUT
    required: bool = True
    default_options: bool = True
    automount: bool = True  # False: a systemd mount unit, mounted at boot

    @property
    def unit(self) -> str:
        """The systemd mount unit of a mount made at boot ('' for an automount)."""
        return "" if self.automount else unit_name(self.mount_point)

    @property
    def kind(self) -> str:
        return type_kind(self.type)

    @property
    def indirect(self) -> bool:
        return self.path.endswith("/*")

    @property
    def mount_point(self) -> str:
        return self.path.removesuffix("/*")

    @property
    def server(self) -> str:
        """The host the mount depends on, for messages ('' for bind mounts)."""
        if self.kind == "bind":
            return ""
        return re.split(r"[:@/]", self.source, maxsplit=1)[0]


def parse(
    raw: Any, groups: dict[str, list[str]] | None = None, automount: bool = True
) -> list[Mount]:
    """Check and normalize `autofs_mounts`; groups (name -> hosts) checks `groups:`;
    automount: a mount's `automount` where it does not say (`autofs_automount`)."""
    if not isinstance(raw, list):
        raise StorageError(f"autofs_mounts must be a list of mounts, got {type(raw).__name__}")
    mounts = [_one(item, index, groups, automount) for index, item in enumerate(raw)]
    _no_duplicates(mounts)
    return mounts


def _one(item: Any, index: int, groups: dict[str, list[str]] | None, automount: bool) -> Mount:
    if not isinstance(item, dict):
        raise StorageError(f"autofs_mounts[{index}] must be a mapping, got {item!r}")
    name = str(item.get("name", ""))
    if not _NAME.fullmatch(name):
        raise StorageError(
            f"autofs_mounts[{index}]: name {name!r} must be lower-case letters, digits, - or _ "
            "(it names files)"
        )
    label = f"mount {name}"
    kind = item.get("type")
    if kind not in TYPES:
        raise StorageError(f"{label}: unknown type {kind!r}; expected one of {', '.join(TYPES)}")
    path = str(item.get("path", ""))
    if not path.startswith("/"):
        raise StorageError(f"{label}: mount point {path!r} must be an absolute path")
    if PurePosixPath(path.removesuffix("/*")) in (PurePosixPath("/"),) or ".." in path.split("/"):
        raise StorageError(f"{label}: mount point {path!r} is not a place to mount on")
    source = str(item.get("source", ""))
    if not source:
        raise StorageError(f"{label}: source is required (e.g. server:/export, or a path for bind)")
    if kind == "bind" and not source.startswith("/"):
        raise StorageError(
            f"{label}: a bind mount's source must be an absolute path, got {source!r}"
        )
    fstype = str(item.get("fstype", ""))
    if kind == "generic" and not fstype:
        raise StorageError(f"{label}: type generic needs fstype (passed to autofs as -fstype)")
    options = item.get("options", [])
    if isinstance(options, str):
        options = [o for o in options.split(",") if o]
    # Each is a word of an autofs map line; the mount point is one of an enroot fstab too.
    if why := formats.word(path):
        raise StorageError(f"{label}: mount point {path!r} {why}")
    for what, value in [("source", source), ("fstype", fstype)] + [("option", o) for o in options]:
        if value and (why := formats.autofs_word(value)):
            raise StorageError(f"{label}: {what} {str(value)!r} {why}")
    wanted = item.get("groups", ["all"])
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    if groups is not None:
        unknown = [g for g in wanted if g != "all" and g not in groups]
        if unknown:
            raise StorageError(f"{label}: group {', '.join(unknown)} is not in the inventory")
    timeout = item.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
        raise StorageError(
            f"{label}: timeout must be whole seconds (0: never unmount), got {timeout!r}"
        )
    automount = item.get("automount", automount)
    if not isinstance(automount, bool):
        raise StorageError(f"{label}: automount must be true or false, got {automount!r}")
    if path.endswith("/*") and not automount:
        raise StorageError(
            f"{label}: {path} is an indirect map, which only autofs serves: "
            "automount false needs one mount point"
        )
    return Mount(
        name=name,
        path=path,
        type=kind,
        source=source,
        options=tuple(str(o) for o in options),
        fstype=fstype,
        groups=tuple(wanted),
        timeout=timeout,
        required=bool(item.get("required", True)),
        default_options=bool(item.get("default_options", True)),
        automount=automount,
    )


def _no_duplicates(mounts: list[Mount]) -> None:
    by_name: dict[str, Mount] = {}
    by_point: dict[str, Mount] = {}
    for mount in mounts:
        if mount.name in by_name:
            raise StorageError(f"two mounts are named {mount.name}")
        if mount.mount_point in by_point:
            raise StorageError(
                f"mounts {by_point[mount.mount_point].name} and {mount.name}"
                f" both mount on {mount.mount_point}"
            )
        by_name[mount.name] = by_point[mount.mount_point] = mount


def for_host(mounts: list[Mount], host_groups: list[str]) -> list[Mount]:
    wanted = set(host_groups) | {"all"}
    return [m for m in mounts if wanted & set(m.groups)]


def _kernel(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else (0, 0)


Defaults = dict[str, list[str]]


@functools.cache
def role_default_options() -> Defaults:
    """`autofs_default_options` as the autofs role declares it."""
    return roles.defaults("autofs")["autofs_default_options"]


def options(mount: Mount, kernel: str = "", defaults: Defaults | None = None) -> list[str]:
    """The mount options autofs passes: defaults (unless turned off), then the operator's,
    where an operator option replaces a default of the same name."""
    defaults = role_default_options() if defaults is None else defaults
    chosen = list(defaults.get(mount.kind, [])) if mount.default_options else []
    if mount.kind == "nfs" and mount.default_options and _kernel(kernel) >= NCONNECT_KERNEL:
        chosen.append(NCONNECT)
    own = {o.split("=", 1)[0] for o in mount.options}
    chosen = [o for o in chosen if o.split("=", 1)[0] not in own] + list(mount.options)
    check_options({mount.kind: chosen})
    return chosen


def check_options(options: Any, _groups: Any = None) -> None:
    """autofs_default_options ({type: [option, ...]}): each a word of an autofs map line."""
    for kind, chosen in options.items():
        for option in chosen if isinstance(chosen, list) else [chosen]:
            if why := formats.autofs_word(option):
                raise StorageError(f"autofs_default_options {kind}: {str(option)!r} {why}")


def fstype(mount: Mount) -> str:
    return {"nfs": "nfs4" if mount.type == "nfs4" else "nfs"}.get(
        mount.kind, mount.fstype or mount.kind
    )


# Locations autofs must not read as host:path: a local path, Lustre's MGS@NET:/FS.
_COLON_PREFIX = ("bind", "lustre")


def map_line(mount: Mount, kernel: str = "", defaults: Defaults | None = None) -> str:
    """One autofs map entry: KEY -fstype=TYPE,OPTIONS LOCATION."""
    key = "*" if mount.indirect else mount.mount_point
    opts = ",".join([f"-fstype={fstype(mount)}", *options(mount, kernel, defaults)])
    location = (":" if mount.kind in _COLON_PREFIX else "") + mount.source
    if mount.indirect:
        location = location.rstrip("/") + "/&"
    return f"{key} {opts} {location}"


def master_line(mount: Mount) -> str:
    mount_at = mount.mount_point if mount.indirect else "/-"
    return f"{mount_at} /etc/auto.kiln-{mount.name} --timeout={mount.timeout}"


def unit_name(mount_point: str) -> str:
    """systemd's name for the mount unit at mount_point (as `systemd-escape --path
    --suffix=mount` writes it): / becomes -, and every byte but letters, digits, ':', '_'
    and a '.' not first is written \\xNN."""
    trimmed = "/".join(part for part in mount_point.split("/") if part)
    out = []
    for index, byte in enumerate(trimmed.encode()):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif (char.isascii() and char.isalnum()) or char in ":_" or (char == "." and index):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return ("".join(out) or "-") + ".mount"


def unit_text(mount: Mount, kernel: str = "", defaults: Defaults | None = None) -> str:
    """A mount made at boot: systemd mounts it with the options autofs would pass, after
    the network for a network filesystem (_netdev), and Kiln's repair starts it again."""
    chosen = options(mount, kernel, defaults)
    if mount.kind == "bind":
        how, target = [f"Options={','.join(['bind', *chosen])}"], "local-fs.target"
    else:
        chosen = chosen if "_netdev" in chosen else [*chosen, "_netdev"]
        how, target = [f"Type={fstype(mount)}", f"Options={','.join(chosen)}"], "remote-fs.target"
    # '%' starts a specifier in a unit file.
    mount_section = [f"What={mount.source}", f"Where={mount.mount_point}", *how]
    lines = [
        HEADER.rstrip("\n"),
        "[Unit]",
        f"Description=Kiln's mount {mount.name}",
        "",
        "[Mount]",
        *(line.replace("%", "%%") for line in mount_section),
        "",
        "[Install]",
        f"WantedBy={target}",
    ]
    return "\n".join(lines) + "\n"


HEADER = "# Managed by Kiln (autofs role): changes are overwritten.\n"
UNIT_DIR = "/etc/systemd/system"


def files(
    mounts: list[Mount], kernel: str = "", defaults: Defaults | None = None
) -> dict[str, str]:
    """path -> content of every autofs map and mount unit for these mounts."""
    out = {}
    for mount in mounts:
        if not mount.automount:
            out[f"{UNIT_DIR}/{mount.unit}"] = unit_text(mount, kernel, defaults)
            continue
        out[f"/etc/auto.master.d/kiln-{mount.name}.autofs"] = HEADER + master_line(mount) + "\n"
        out[f"/etc/auto.kiln-{mount.name}"] = HEADER + map_line(mount, kernel, defaults) + "\n"
    return out


def check_list(mounts: list[Mount], kernel: str = "") -> list[dict[str, Any]]:
    """What the health check reads on the node (/etc/kiln/mounts.json)."""
    return [
        {
            "name": m.name,
            "path": m.mount_point,
            "indirect": m.indirect,
            "fstype": fstype(m) if m.kind != "bind" else "",
            "source": m.source,
            "server": m.server,
            "required": m.required,
            "unit": m.unit,
        }
        for m in mounts
    ]


def type_kind(mount_type: str) -> str:
    """nfs4 is nfs; the rest are themselves."""
    return "nfs" if mount_type == "nfs4" else mount_type


def packages(mount_types: Iterable[str], automount: bool = True) -> list[str]:
    """autofs (where a mount is an automount) and the distribution's clients of these
    mount types (none for no mount)."""
    types = list(mount_types)
    unknown = [t for t in types if type_kind(t) not in CLIENT_PACKAGES]
    if unknown:
        raise StorageError(f"unknown mount type {unknown[0]!r}; expected one of {', '.join(TYPES)}")
    clients = sorted({p for t in types for p in CLIENT_PACKAGES[type_kind(t)] or []})
    return ["autofs", *clients] if types and automount else clients


def image_packages(declared: Any) -> list[str]:
    """An image's (`kiln image build`): the clients of every mount the inventory declares,
    each mount judged as a host's plan judges it; its nodes may be in any group."""
    return packages(m.type for m in parse(declared))


def host_plan(
    declared: Any,
    host_groups: list[str],
    kernel: str,
    defaults: Defaults | None = None,
    automount: bool = True,
) -> dict[str, Any]:
    """What one host gets (the autofs role's plan): autofs maps and mount units, client
    packages, vendor clients to look for, the list the health check reads, whether autofs
    runs, and the mount units to start."""
    mounts = for_host(parse(declared, automount=automount), host_groups)
    autofs_runs = any(m.automount for m in mounts)
    vendor = [
        {
            "mount": m.name,
            "type": m.type,
            "probe": VENDOR_CLIENTS[m.kind][0],
            "client": VENDOR_CLIENTS[m.kind][1],
        }
        for m in mounts
        if m.kind in VENDOR_CLIENTS
    ]
    return {
        "files": files(mounts, kernel, defaults),
        "packages": packages((m.type for m in mounts), autofs_runs),
        "vendor": vendor,
        "checks": check_list(mounts),
        "autofs": autofs_runs,
        "units": [m.unit for m in mounts if m.unit],
    }


def kernel_filesystems(text: str) -> set[str]:
    """The filesystems a kernel has now, from /proc/filesystems ("nodev\tNAME" or
    "\tNAME" a line)."""
    return {line.split()[-1] for line in text.splitlines() if line.split()}


def kernel_refusal(plan: dict[str, Any], kernel: str, filesystems: str) -> str | None:
    """Why this node cannot mount what its plan gives it, or None: a kernel without
    autofs. systemd loads autofs4 at boot wherever the kernel has it, so on a node
    running systemd, autofs missing from /proc/filesystems is autofs missing."""
    if not plan["autofs"] or "autofs" in kernel_filesystems(filesystems):
        return None
    names = ", ".join(check["name"] for check in plan["checks"] if not check["unit"])
    return (
        f"autofs: this node's kernel ({kernel}) has no autofs (none in /proc/filesystems), "
        f"so its automounts ({names}) cannot work: boot a kernel with autofs "
        "(CONFIG_AUTOFS_FS), mount them at boot instead (autofs_automount: false), "
        "or leave the node out of the mounts' groups"
    )


# Inventory variables this module checks before anything runs (kiln.inventory.checks).
INVENTORY_CHECKS = {
    "autofs_mounts": (list, lambda value, groups: parse(value, groups)),
    "autofs_default_options": (dict, check_options),
}
