"""Filters that hand IMEX to kiln.imex: which nodes run it, each node's domain and
nodes_config.cfg, the package at the driver's version."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import imex
from kiln.roles import slurm
from kiln.roles.nvidia_driver import apt


def _nodes(hostvars, hosts):
    """Each host's cached IMEX fact: present for hosts outside --limit too."""
    nodes = {}
    for host in hosts:
        data = slurm.cached_fact(hostvars[host], imex.NODE_FACT)
        if data:
            nodes[host] = dict(data)
    return nodes


def kiln_imex_plan(hostvars, hosts, host, source):
    try:
        return imex.host_plan(_nodes(hostvars, list(hosts)), str(host), str(source)).to_json()
    except imex.ImexError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_imex_hosts(hostvars, hosts):
    try:
        return imex.imex_hosts(_nodes(hostvars, list(hosts)), list(hosts))
    except imex.ImexError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_imex_package(version):
    return imex.package(str(version))


def kiln_imex_mismatch(apt_policy, pinned):
    return apt.exact_mismatch(
        "IMEX", [imex.package(str(pinned))], str(pinned), apt.parse_apt_policy(str(apt_policy))
    )


class FilterModule:
    def filters(self):
        return {
            "kiln_imex_plan": kiln_imex_plan,
            "kiln_imex_hosts": kiln_imex_hosts,
            "kiln_imex_package": kiln_imex_package,
            "kiln_imex_mismatch": kiln_imex_mismatch,
        }
