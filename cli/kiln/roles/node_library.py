"""The node_library role: what it ships to each node (the kiln_node package) and how it
tells the node's copy from this one. Control side only: the nodes run kiln_node, not
this module (filter kiln_node_library)."""

import hashlib
from pathlib import Path
from typing import Any

import kiln_node

# Beside the package on the node: each shipped file's sha256, written after the files.
MANIFEST = "kiln-node-library.sha256"
# A dry run installs nothing, yet its probes import the library: where the node's copy
# is missing or another version, they read one put here, replaced by each such dry run
# (one fixed place, not a new temporary directory per run left behind; /run is root's
# and empty after a reboot).
DRY_RUN_DIR = "/run/kiln-node-library"


def shipped_files() -> dict[str, str]:
    """What the role copies to a node: {path under INSTALL_DIR: text}, the package's
    modules (the package alone: nothing else of Kiln goes to the nodes)."""
    here = Path(kiln_node.__file__).parent
    return {f"kiln_node/{module.name}": module.read_text() for module in sorted(here.glob("*.py"))}


def install(root: str | None = None) -> dict[str, Any]:
    """{directories: [...], files: [{path, content}], manifest: {path, content, sha256},
    dry_run_dir}, absolute paths on the node: under kiln_node.INSTALL_DIR, or under ROOT (a
    dry run's copy, at dry_run_dir unless the run says otherwise). The manifest lists
    each file's sha256: the role looks at it alone (one stat) and installs the files
    only where it differs."""
    top = Path(root or kiln_node.INSTALL_DIR)
    files = shipped_files()
    directories = sorted({str((top / name).parent) for name in files})
    manifest = "".join(
        f"{hashlib.sha256(text.encode()).hexdigest()}  {name}\n" for name, text in files.items()
    )
    return {
        "directories": [str(top), *directories],
        "files": [{"path": str(top / name), "content": text} for name, text in files.items()],
        "manifest": {
            "path": str(top / MANIFEST),
            "content": manifest,
            "sha256": hashlib.sha256(manifest.encode()).hexdigest(),
        },
        "dry_run_dir": DRY_RUN_DIR,
    }
