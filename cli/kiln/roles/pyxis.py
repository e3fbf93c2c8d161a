"""pyxis, the Slurm SPANK plugin behind `srun --container-image`: its release source
pinned by version and sha256, built on each node against the Slurm installed there, and
wired into Slurm through /etc/slurm/plugstack.conf.d/pyxis.conf.

Slurm refuses a plugin built for another release ("Incompatible plugin version"), so
each build goes in a directory named for the pyxis release and the Slurm release whose
headers it was built against. pyxis.conf names that build: when Slurm's version changes,
a new build is made and the old one is no longer loaded.
"""

import base64
import re
from typing import Any

from kiln import formats, pinned
from kiln.roles import slurm

DEFAULT_BASE_URL = "https://github.com/NVIDIA/pyxis/archive/refs/tags"
CONF = f"{slurm.PLUGSTACK_DIR}/pyxis.conf"
INSTALL_ROOT = "/usr/local/lib/pyxis"
PLUGIN = "spank_pyxis.so"
CONTAINER_SCOPES = ("job", "global")
_SLURM_VERSION = re.compile(r"^#define\s+SLURM_VERSION_NUMBER\s+0x([0-9a-fA-F]{6})\s*$", re.M)


class PyxisError(ValueError):
    """A setting or input that cannot be used; the message names it."""


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's pyxis_* settings (given
    without the prefix), before any node is touched."""
    if not settings.get("version"):
        return []
    problems = pinned.problems("pyxis", settings, "0.24.0", "the source tarball's")
    scope = settings.get("container_scope", "global")
    if scope not in CONTAINER_SCOPES:
        problems.append(
            f"pyxis_container_scope {scope!r}: expected one of {', '.join(CONTAINER_SCOPES)}"
        )
    runtime = str(settings.get("runtime_path", "/run/pyxis"))
    if why := formats.absolute_path(runtime):
        problems.append(f"pyxis_runtime_path {runtime!r}: {why}")
    return problems


def source(version: str, sha256: str, base_url: str) -> dict[str, str]:
    return pinned.tag_archive("pyxis", version, sha256, base_url)


def slurm_version(header: str) -> str:
    """The Slurm release whose headers are installed ("22.05.8", as Slurm writes its
    releases), from slurm/slurm_version.h's SLURM_VERSION_NUMBER (0x160508): the number
    the plugin carries and slurmd compares with its own."""
    found = _SLURM_VERSION.search(header)
    if not found:
        raise PyxisError("slurm/slurm_version.h has no SLURM_VERSION_NUMBER")
    number = int(found.group(1), 16)
    return f"{number >> 16}.{(number >> 8) & 0xFF:02d}.{number & 0xFF}"


HEADER = "/usr/include/slurm/slurm_version.h"
CONF = f"{slurm.PLUGSTACK_DIR}/pyxis.conf"


def node_read_argv(check_mode: bool) -> list[str]:
    """One read of what the role needs once Slurm's headers are installed, on lines
    node_state parses: the header's text (base64), the builds under INSTALL_ROOT and the
    plugins in them, and the files of plugstack.conf.d. Without the header it fails
    saying so, but in a dry run, which has installed no headers."""
    script = (
        f'if [ -e {HEADER} ]; then echo "header $(base64 -w0 {HEADER})"; '
        f'elif [ "$1" != check ]; then echo "no {HEADER}: libslurm-dev installed no '
        'headers" >&2; exit 1; fi; '
        f'for d in {INSTALL_ROOT}/*/; do [ -d "$d" ] && echo "build ${{d%/}}"; done; '
        f'for f in {INSTALL_ROOT}/*/slurm/{PLUGIN}; do [ -e "$f" ] && echo "plugin $f"; done; '
        f'for f in {slurm.PLUGSTACK_DIR}/*.conf; do [ -f "$f" ] && echo "plugstack $f"; done; '
        "true"
    )
    return ["sh", "-c", script, "kiln-pyxis-read", "check" if check_mode else "run"]


def node_state(output: str) -> dict[str, Any]:
    """node_read_argv's output as {header (its text, "" where there is none), builds,
    plugins, plugstack (the files of plugstack.conf.d, pyxis.conf among them: the role
    writes it before plugstack.conf)}."""
    found: dict[str, list[str]] = {"header": [], "build": [], "plugin": [], "plugstack": []}
    for line in output.splitlines():
        kind, _, value = line.partition(" ")
        if kind in found:
            found[kind].append(value)
    header = found["header"][0] if found["header"] else ""
    return {
        "header": base64.b64decode(header).decode() if header else "",
        "builds": found["build"],
        "plugins": found["plugin"],
        "plugstack": sorted({*found["plugstack"], CONF}),
    }


def build_dir(version: str, slurm: str) -> str:
    """Where the build for this pyxis and this Slurm is installed (make install's
    libdir; the plugin lands in its slurm/ directory)."""
    return f"{INSTALL_ROOT}/{version}-slurm-{slurm}"


def plugin_path(version: str, slurm: str) -> str:
    return f"{build_dir(version, slurm)}/slurm/{PLUGIN}"


def _flag(value: Any) -> str:
    return "1" if value else "0"


def config(settings: dict[str, Any], slurm: str) -> str:
    """/etc/slurm/plugstack.conf.d/pyxis.conf: the build for this Slurm and pyxis's
    options (`required`: a node where it cannot load runs no job steps, rather than
    steps that silently ignore --container-image)."""
    version = settings["version"]
    options = [
        f"runtime_path={settings['runtime_path']}",
        f"execute_entrypoint={_flag(settings['execute_entrypoint'])}",
        f"container_scope={settings['container_scope']}",
        f"sbatch_support={_flag(settings['sbatch_support'])}",
    ]
    return (
        f"# Written by Kiln (role pyxis): pyxis {version} built for Slurm {slurm}.\n"
        f"required {plugin_path(version, slurm)} {' '.join(options)}\n"
    )


def stale_builds(installed: list[str], version: str, slurm: str) -> list[str]:
    """Builds under INSTALL_ROOT other than the one pyxis.conf names (for another pyxis
    or another Slurm): nothing loads them."""
    keep = build_dir(version, slurm)
    return sorted(p for p in installed if p.startswith(INSTALL_ROOT + "/") and p != keep)
