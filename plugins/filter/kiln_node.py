"""Filters of Kiln's node library (kiln.node): the files the roles ship to the nodes,
and the reservation command lines the roles run on the controller (the validate role's
srun steps come whole from kiln.validation.suites)."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln import node
from kiln.node import slurm_jobs


def kiln_node_library(_=None):
    """{directories: [...], files: [{path, content}]}, absolute paths on the node."""
    root = Path(node.INSTALL_DIR)
    files = node.shipped_files()
    directories = sorted({str((root / name).parent) for name in files})
    return {
        "directories": [str(root), *directories],
        "files": [{"path": str(root / name), "content": text} for name, text in files.items()],
    }


def kiln_node_reserve(name, nodes, minutes, ignore_jobs=False):
    return slurm_jobs.reserve(str(name), list(nodes), int(minutes), bool(ignore_jobs))


def kiln_node_release(name):
    return slurm_jobs.release(str(name))


class FilterModule:
    def filters(self):
        return {
            "kiln_node_library": kiln_node_library,
            "kiln_node_release": kiln_node_release,
            "kiln_node_reserve": kiln_node_reserve,
        }
