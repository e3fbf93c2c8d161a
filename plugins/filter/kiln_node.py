"""Filters of Kiln's node library (kiln.node): the files the roles ship to the nodes,
and the srun and reservation command lines the roles run on the controller."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln import node
from kiln.node import slurm_jobs


def kiln_node_library(root=None):
    """{directories: [...], files: [{path, content}]}, absolute paths on the node: under
    node.INSTALL_DIR, or under ROOT (a dry run's temporary copy)."""
    root = Path(root or node.INSTALL_DIR)
    files = node.shipped_files()
    directories = sorted({str((root / name).parent) for name in files})
    return {
        "directories": [str(root), *directories],
        "files": [{"path": str(root / name), "content": text} for name, text in files.items()],
    }


_NUMBERS = ("tasks_per_node", "minutes", "immediate_s", "nice")


def kiln_node_srun(step, **changes):
    """An srun step's argv (its command appended by the caller) from its settings by
    name (kiln.node.slurm_jobs.Srun), `changes` overriding them."""
    settings = {**step, **changes}
    for name in _NUMBERS:
        if settings.get(name) is not None:
            settings[name] = int(settings[name])
    return slurm_jobs.Srun(**settings).argv()


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
            "kiln_node_srun": kiln_node_srun,
        }
