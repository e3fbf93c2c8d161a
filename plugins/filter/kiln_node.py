"""Filters of Kiln's node library (kiln.node): the files the roles ship to the nodes,
and the reservation and node state command lines the roles run on the
controller (argv lists: no value passes through a shell)."""

import hashlib
from pathlib import Path

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import node
from kiln.node import slurm_jobs


def kiln_node_library(root=None):
    """{directories: [...], files: [{path, content}], manifest: {path, content, sha256},
    dry_run_dir}, absolute paths on the node: under node.INSTALL_DIR, or under ROOT (a
    dry run's copy, at dry_run_dir unless the run says otherwise). The manifest lists
    each file's sha256: the role looks at it alone (one stat) and installs the files
    only where it differs."""
    root = Path(root or node.INSTALL_DIR)
    files = node.shipped_files()
    directories = sorted({str((root / name).parent) for name in files})
    manifest = "".join(
        f"{hashlib.sha256(text.encode()).hexdigest()}  {name}\n" for name, text in files.items()
    )
    return {
        "directories": [str(root), *directories],
        "files": [{"path": str(root / name), "content": text} for name, text in files.items()],
        "manifest": {
            "path": str(root / node.MANIFEST),
            "content": manifest,
            "sha256": hashlib.sha256(manifest.encode()).hexdigest(),
        },
        "dry_run_dir": node.DRY_RUN_DIR,
    }


def kiln_node_reserve(name, nodes, minutes, ignore_jobs=False):
    return slurm_jobs.reserve(str(name), list(nodes), int(minutes), bool(ignore_jobs))


def kiln_node_release(name):
    return slurm_jobs.release(str(name))


def _names(nodes) -> list[str]:
    """One node's name or a list of names (None: none)."""
    if nodes is None:
        return []
    return [str(nodes)] if isinstance(nodes, str) else [str(n) for n in nodes]


def kiln_node_show_nodes(nodes=None):
    """`scontrol --oneliner show node` for `nodes`; None or none: every node."""
    return slurm_jobs.show_nodes(_names(nodes))


def kiln_node_drain(node, reason):
    return slurm_jobs.drain(str(node), str(reason))


def kiln_node_resume(node):
    return slurm_jobs.resume(str(node))


def kiln_node_reboot(nodes, reason):
    return slurm_jobs.reboot(_names(nodes), str(reason))


def kiln_node_reboot_drained(nodes):
    return slurm_jobs.reboot_drained(_names(nodes))


class FilterModule:
    def filters(self):
        return {
            "kiln_node_drain": kiln_node_drain,
            "kiln_node_library": kiln_node_library,
            "kiln_node_reboot": kiln_node_reboot,
            "kiln_node_reboot_drained": kiln_node_reboot_drained,
            "kiln_node_release": kiln_node_release,
            "kiln_node_reserve": kiln_node_reserve,
            "kiln_node_resume": kiln_node_resume,
            "kiln_node_show_nodes": kiln_node_show_nodes,
        }
