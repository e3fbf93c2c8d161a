"""Filters of Kiln's node library (kiln_node): the files the node_library role ships,
and the reservation and node state command lines the roles run on the
controller (argv lists: no value passes through a shell)."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import node_library
from kiln_node import slurm_jobs


def kiln_node_library(root=None):
    """What the node_library role installs, under node.INSTALL_DIR or ROOT (a dry run's
    copy): kiln.roles.node_library.install."""
    return node_library.install(root)


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
