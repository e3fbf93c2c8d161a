"""Filters that hand the health role's settings to kiln.health: what kiln-health checks
on a node follows from the node's GPU fact and kiln.gpu_models, as Kiln's tests see it."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln import health


def kiln_health_plan(gpu_fact, settings):
    return health.node_config(dict(gpu_fact or {}), dict(settings))


class FilterModule:
    def filters(self):
        return {"kiln_health_plan": kiln_health_plan}
