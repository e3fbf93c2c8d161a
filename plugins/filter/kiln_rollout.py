"""Filters of `kiln rollout`'s step playbook: whether what it waits for is there."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln.rollout import waits


def kiln_rollout_ready(stdout, wait):
    """`wait`: {kind: idle|back|controller, nodes: [...]} (kiln.rollout.waits)."""
    return waits.ready(str(stdout), str(wait["kind"]), [str(n) for n in wait.get("nodes", [])])


class FilterModule:
    def filters(self):
        return {"kiln_rollout_ready": kiln_rollout_ready}
