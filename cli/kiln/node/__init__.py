"""Kiln's node library: what the node programs (roles/*/files) and the control side
both know about the nodes' own outputs, in one place.

Standard library only, and no import of the rest of `kiln`: the roles copy this package
to INSTALL_DIR on every host (roles/base/tasks/node_library.yml, `kiln_node_library`
filter), where the node programs run it with the system python3 (3.11 on Debian 12,
3.13 on 13).
"""

# Where the roles install the package on the nodes: each node program puts this (or the
# copy KILN_NODE_LIBRARY names) first on sys.path (it runs without Kiln) before
# `import kiln.node`.
INSTALL_DIR = "/usr/local/lib/kiln"
# Beside the package there: each shipped file's sha256, written after the files.
MANIFEST = "kiln-node-library.sha256"
# A dry run installs nothing, yet its probes import the library: where the node's copy
# is missing or another version, they read one put here, replaced by each such dry run
# (one fixed place, not a new temporary directory per run left behind; /run is root's
# and empty after a reboot).
DRY_RUN_DIR = "/run/kiln-node-library"


def counted(number: int, noun: str, plural: str = "") -> str:
    """A count and its noun as a message says it: 1 GPU, 0 GPUs, 8 GPUs (`plural` where
    it is not the noun and an s)."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"


def shipped_files() -> dict[str, str]:
    """What the roles copy to a node: {path under INSTALL_DIR: text}. The package's own
    modules, and an empty `kiln` package above them (only kiln.node goes to the nodes)."""
    from pathlib import Path

    here = Path(__file__).parent
    files = {"kiln/__init__.py": '"""Kiln\'s node library only (kiln.node): see Kiln."""\n'}
    for module in sorted(here.glob("*.py")):
        files[f"kiln/node/{module.name}"] = module.read_text()
    return files
