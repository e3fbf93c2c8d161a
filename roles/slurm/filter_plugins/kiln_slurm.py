"""Filters that hand Slurm config rendering to kiln.slurm and kiln.topology: one
implementation for the CLI's checks and the role."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "cli"))

from ansible.errors import AnsibleFilterError

from kiln import hostlist, slurm
from kiln.topology import for_slurm
from kiln.topology.model import TopologyError


def _cached(host_vars, name):
    """A fact set with `cacheable: true`: a variable when set in this run, in the fact
    cache (so present even when the host is outside --limit) otherwise."""
    return host_vars.get(name) or (host_vars.get("ansible_facts") or {}).get(name) or []


def _shapes(hostvars, hosts, declared_key, detected_key):
    shapes = {}
    for host in hosts:
        data = hostvars[host].get(declared_key) or _cached(hostvars[host], detected_key)
        if not data:
            raise slurm.SlurmConfigError(
                f"no node shape for {host}: declare slurm_node_shape, or provision it once "
                "without --limit so Kiln can detect it"
            )
        shapes[host] = slurm.shape_from_dict(host, data)
    return shapes


def kiln_slurm_conf(settings, version, hostvars, compute, groups, declared_partitions):
    shapes = _shapes(hostvars, compute, "slurm_node_shape", "slurm_detected_shape")
    parts = slurm.partitions(declared_partitions, groups, compute)
    return slurm.slurm_conf(settings, slurm.parse_version(version), shapes, parts)


def kiln_slurm_nodes(hostvars, compute):
    shapes = _shapes(hostvars, compute, "slurm_node_shape", "slurm_detected_shape")
    return "\n".join(slurm.node_lines(shapes)) + "\n"


def kiln_gres_conf(hostvars, compute, autodetect_nvml):
    shapes = _shapes(hostvars, compute, "slurm_node_shape", "slurm_detected_shape")
    return slurm.gres_conf(shapes, bool(autodetect_nvml))


def kiln_cgroup_conf(settings, version):
    return slurm.cgroup_conf(settings, slurm.parse_version(version))


def kiln_topology(settings, version, hostvars, compute, collected=()):
    """settings: the slurm_topology_* variables without the prefix; collected:
    [label, text] pairs gathered on the nodes (ibnetdiscover output)."""
    source = settings["source"]
    labels = nvlink = None
    if source == "labels":
        labels = {h: hostvars[h].get("topology_path") for h in compute}
    if source == "nvlink":
        # Cached facts, like shapes: present for hosts outside --limit too.
        lines = [f"{h}: {line}" for h in compute for line in _cached(hostvars[h], "slurm_nvlink")]
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
            "kiln_slurm_merge": slurm.merge,
            "kiln_slurm_conf": kiln_slurm_conf,
            "kiln_slurm_nodes": kiln_slurm_nodes,
            "kiln_gres_conf": kiln_gres_conf,
            "kiln_cgroup_conf": kiln_cgroup_conf,
            "kiln_slurmd_shape": slurm.parse_slurmd_c,
            "kiln_hostlist": hostlist.compress,
            "kiln_slurm_node_state": slurm.node_state,
            "kiln_conf_value": slurm.conf_value,
            "kiln_topology": kiln_topology,
        }
