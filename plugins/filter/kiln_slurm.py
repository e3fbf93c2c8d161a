"""Filters that hand Slurm config rendering to kiln.roles.slurm and kiln.topology: one
implementation for the CLI's checks and the role."""

from pathlib import Path

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import accounting
from kiln.roles import slurm
from kiln.topology import for_slurm
from kiln.topology.shape import TopologyError


def kiln_slurm_settings(defaults, overrides, plugin_paths, controllers, **cluster):
    """slurm.conf's settings (kiln.roles.slurm.settings); plugin_paths: what the controller has."""
    names = [Path(p).name for p in plugin_paths]
    try:
        return slurm.settings(
            defaults, slurm.Cluster(list(controllers), names, **cluster), overrides
        )
    except slurm.SlurmConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_slurm_pmix_problem(plugin_paths):
    """Why srun --mpi=pmix cannot work with what the controller has ("" when it can)."""
    return slurm.Cluster([], [Path(p).name for p in plugin_paths]).pmix_problem


def kiln_slurm_files(conf, cgroup, version, hostvars, compute, groups, partitions, plugin_paths):
    """Every file in /etc/slurm the role writes (the topology file aside)."""
    try:
        return slurm.config_files(
            conf,
            cgroup,
            slurm.parse_version(version),
            slurm.node_shapes(hostvars, list(compute)),
            slurm.partitions(partitions, groups, list(compute)),
            slurm.Cluster([], [Path(p).name for p in plugin_paths]).gpu_autodetect,
        )
    except slurm.SlurmConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_slurm_nodes(hostvars, compute):
    shapes = slurm.node_shapes(hostvars, compute)
    return "\n".join(slurm.node_lines(shapes)) + "\n"


def kiln_topology(settings, version, hostvars, compute, collected=()):
    """settings: the slurm_topology_* variables without the prefix; collected:
    [label, text] pairs gathered on the nodes (ibnetdiscover output)."""
    source = settings["source"]
    labels = nvlink = None
    if source == "labels":
        labels = {h: hostvars[h].get("topology_path") for h in compute}
    if source == "nvlink":
        # Cached facts, like shapes: present for hosts outside --limit too.
        lines = [
            f"{h}: {line}"
            for h in compute
            for line in slurm.cached_fact(hostvars[h], "slurm_nvlink")
        ]
        nvlink = [("nvidia-smi on the compute nodes", "\n".join(lines))]
    try:
        return for_slurm.render(
            source,
            settings["format"],
            slurm.parse_version(version),
            list(compute),
            labels=labels,
            texts=nvlink or [tuple(pair) for pair in collected],
            files=settings["files"],
            hca=settings["hca"],
            node_name_map=settings["node_name_map"],
            block_size=settings["block_size"],
            missing=settings["missing"],
            disconnected=settings["disconnected"],
            base_dir=settings["base_dir"],
        )
    except TopologyError as exc:
        raise AnsibleFilterError(f"topology: {exc}") from None


class FilterModule:
    def filters(self):
        return {
            "kiln_slurm_settings": kiln_slurm_settings,
            "kiln_slurm_files": kiln_slurm_files,
            "kiln_slurm_pmix_problem": kiln_slurm_pmix_problem,
            "kiln_slurm_nodes": kiln_slurm_nodes,
            "kiln_slurmd_shape": slurm.parse_slurmd_c,
            "kiln_slurm_node_state": slurm.node_state,
            "kiln_conf_value": slurm.conf_value,
            "kiln_topology": kiln_topology,
            "kiln_slurm_qos_to_set": accounting.qos_to_set,
            "kiln_slurm_plugstack": slurm.plugstack_conf,
        }
