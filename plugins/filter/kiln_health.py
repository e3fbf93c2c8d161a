"""Filters that hand the health role's settings to kiln.roles.health: what kiln-health checks
on a node follows from the node's GPU fact and kiln.gpu_models, as Kiln's tests see it."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import health


def kiln_health_plan(gpu_fact, settings):
    return health.node_config(dict(gpu_fact or {}), dict(settings))


class FilterModule:
    def filters(self):
        return {"kiln_health_plan": kiln_health_plan}
