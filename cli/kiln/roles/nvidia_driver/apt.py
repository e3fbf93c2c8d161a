"""The driver's packages in apt: `apt-cache policy` read, the version every package is
pinned to, packages off that pin, and the components that must equal the driver
exactly (the fabric manager, IMEX)."""

import re
from dataclasses import dataclass

from kiln.roles.nvidia_driver.versions import branch, is_exact, upstream, version_key


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


def off_pin(dpkg_query: str, packages: list[str], pinned: str) -> list[str]:
    """The driver packages not installed at the pinned version, from `dpkg-query -W -f
    '${Package} ${Version}\\n' PACKAGE...`, each as "name version" (or "name missing")."""
    installed = dict(line.split(" ", 1) for line in dpkg_query.splitlines() if " " in line)
    return [
        f"{name} {installed.get(name) or 'missing'}"
        for name in packages
        if upstream(installed.get(name, "")) != pinned
    ]


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
