"""The roles' pre-flight checks: the values they write into config files (the checks of
`kiln inventory check`, kiln.inventory.checks.VALUE_CHECKS, on what Ansible resolved:
roles/base/tasks/values.yml), their argument specs taken together (site.yml's pre-flight
play), and each node's operating system against its roles' (kiln.os_support)."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import argspec, os_support, paths, roles
from kiln.inventory import checks


def kiln_value_problems(values, groups=None):
    """One line per value its file cannot hold ({variable: value}); `groups`, the
    inventory's, for the checks that name groups (slurm_partitions' nodes)."""
    groups = {name: list(hosts) for name, hosts in dict(groups or {}).items()}
    return [
        problem
        for name, value in dict(values).items()
        for problem in checks.value_problems(name, value, groups)
    ]


def kiln_checked_variables(role_names):
    """The variables of the roles named (one name, or a list) that kiln_value_problems
    checks (their pre-flight reads their values with the `vars` lookup)."""
    names = [role_names] if isinstance(role_names, str) else list(role_names)
    return list(dict.fromkeys(v for name in names for v in checks.role_variables(str(name))))


def kiln_argument_spec(role_names):
    """The options of the `main` argument specs of the roles named, as one spec: what
    Ansible checks at each role's start, checked once by site.yml's pre-flight play
    (each role's variables begin with its prefix, so none is declared twice)."""
    return {
        name: spec
        for role in role_names
        for name, spec in argspec.main_options(str(role), paths.roles_dir()).items()
    }


def kiln_site_roles(host, groups):
    """The roles site.yml applies to `host`, in its order (kiln.roles.applied_to)."""
    return roles.applied_to(str(host), {g: list(h) for g, h in dict(groups).items()})


def kiln_os_refusals(os_releases, groups):
    """One line per operating system that roles of its hosts do not support, naming the
    hosts and roles; `os_releases`: {host: /etc/os-release's text, or its ansible_facts}."""
    releases = {
        host: os_support.os_release(read) if isinstance(read, str) else os_support.release(read)
        for host, read in dict(os_releases).items()
    }
    groups = {name: list(hosts) for name, hosts in dict(groups).items()}
    return os_support.refusals(releases, groups, groups.get("all", list(releases)))


class FilterModule:
    def filters(self):
        return {
            "kiln_value_problems": kiln_value_problems,
            "kiln_checked_variables": kiln_checked_variables,
            "kiln_os_refusals": kiln_os_refusals,
            "kiln_site_roles": kiln_site_roles,
            "kiln_argument_spec": kiln_argument_spec,
        }
