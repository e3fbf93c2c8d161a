"""Filters that hand Slurm config rendering to kiln.slurm: one implementation for the
CLI's checks and the role."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "cli"))

from kiln import hostlist, slurm


def _shapes(hostvars, hosts, declared_key, detected_key):
    shapes = {}
    for host in hosts:
        facts = hostvars[host].get("ansible_facts") or {}
        # A detected shape is a cached fact: present even when the host is outside --limit.
        data = (hostvars[host].get(declared_key) or hostvars[host].get(detected_key)
                or facts.get(detected_key))
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
        }
