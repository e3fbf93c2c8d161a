"""Filters that hand the nccl_env role's node probe and settings to kiln.roles.nccl_env: the role
and `kiln inventory check` judge them the same way, and one place renders the file."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import cloud
from kiln.roles import nccl_env


def kiln_nccl_plugin(probe, plugins):
    """The Google NCCL plugin's settings ({env_script, library_dir}) the node needs,
    or {} where it needs none or none is configured."""
    script = nccl_env.plugin_script(probe, plugins)
    if not script:
        return {}
    plugin = nccl_env.gcp_plugin(nccl_env.fabric_of(probe))
    return {"env_script": script, "library_dir": plugins[plugin].get("library_dir", "")}


def kiln_nccl_plan(probe, overrides, excluded, plugin_env=None, library_dir=""):
    """{preset, conf: /etc/nccl.conf's text, fact: the local fact kiln_nccl}."""
    try:
        return nccl_env.plan(probe, overrides or {}, list(excluded or []), plugin_env, library_dir)
    except nccl_env.NcclError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_nccl_metadata(dmi):
    """{url, header} of the metadata service the node probe asks, or {}."""
    return cloud.metadata_request(dict(dmi or {}))


class FilterModule:
    def filters(self):
        return {
            "kiln_nccl_plugin": kiln_nccl_plugin,
            "kiln_nccl_plan": kiln_nccl_plan,
            "kiln_nccl_metadata": kiln_nccl_metadata,
        }
