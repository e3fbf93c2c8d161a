"""Filters of `kiln rollout`'s step playbook: whether what it waits for is there."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.rollout import waits


def kiln_rollout_ready(stdout, wait):
    """`wait`: {kind: idle|back|controller, nodes: [...]} (kiln.rollout.waits)."""
    return waits.ready(str(stdout), str(wait["kind"]), [str(n) for n in wait.get("nodes", [])])


class FilterModule:
    def filters(self):
        return {"kiln_rollout_ready": kiln_rollout_ready}
