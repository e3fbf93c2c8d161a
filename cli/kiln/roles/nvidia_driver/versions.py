"""Driver versions: the module loaded and the one installed, and the rules that compare
them (exact or branch, as numbers, inside a package version)."""

import re
from dataclasses import dataclass

# An exact driver version: branch.minor or branch.minor.patch (580.159.04, 550.54.15).
EXACT_VERSION = re.compile(r"([0-9]{3,})\.([0-9]{1,3})(\.[0-9]{1,3})?")


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


def is_exact(version: str) -> bool:
    return bool(EXACT_VERSION.fullmatch(version))


def branch(version: str) -> str:
    """The driver branch packages are named for (580 for 580.159.04)."""
    return version.split(".", 1)[0]


def upstream(package_version: str) -> str:
    """The driver version inside a Debian package version: 580.159.04-1, 1:580.159.04-0ubuntu1
    and 580.159.04-1~deb13u1 are all 580.159.04."""
    return package_version.split(":", 1)[-1].split("-", 1)[0]


def version_key(version: str) -> tuple[int, ...]:
    """Driver versions compare as numbers: 535.309.01 is newer than 535.261.03."""
    return tuple(int(part) for part in re.findall(r"\d+", version))
