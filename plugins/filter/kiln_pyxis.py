"""Filters that hand the pyxis role's settings to kiln.roles.pyxis: the role and `kiln
inventory check` judge them the same way, and one place writes pyxis.conf."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import pyxis


def kiln_pyxis_problems(settings):
    """What is wrong with one node's pyxis_* settings (without the prefix)."""
    return pyxis.settings_problems(settings)


def kiln_pyxis_node_read(check_mode):
    """The argv of the role's one read of the node (kiln.roles.pyxis.node_read_argv)."""
    return pyxis.node_read_argv(bool(check_mode))


def kiln_pyxis_node(output):
    """That read's output as {header, builds, plugins, plugstack}."""
    return pyxis.node_state(output)


def kiln_pyxis_plan(settings, slurm_version_header, installed_builds):
    """{slurm, source, build_dir, plugin, conf, stale} for one node, from its settings
    and the text of its slurm/slurm_version.h."""
    try:
        slurm = pyxis.slurm_version(slurm_version_header)
    except pyxis.PyxisError as exc:
        raise AnsibleFilterError(str(exc)) from None
    version = settings["version"]
    return {
        "slurm": slurm,
        "source": pyxis.source(version, settings["sha256"], settings["base_url"]),
        "build_dir": pyxis.build_dir(version, slurm),
        "plugin": pyxis.plugin_path(version, slurm),
        "conf": pyxis.config(settings, slurm),
        "stale": pyxis.stale_builds(installed_builds, version, slurm),
    }


class FilterModule:
    def filters(self):
        return {
            "kiln_pyxis_problems": kiln_pyxis_problems,
            "kiln_pyxis_node_read": kiln_pyxis_node_read,
            "kiln_pyxis_node": kiln_pyxis_node,
            "kiln_pyxis_plan": kiln_pyxis_plan,
        }
