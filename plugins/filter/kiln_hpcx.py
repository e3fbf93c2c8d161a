"""Filters that hand the hpcx role's settings and facts to kiln.roles.hpcx: the role, the
pre-flight play and `kiln inventory check` judge them the same way."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import hostlist
from kiln.roles import hpcx


def kiln_hpcx_plan(settings, facts, packages, driver=""):
    """One node's HPC-X (kiln.roles.hpcx.plan), after the checks `kiln inventory check`
    makes; a setting that cannot be used fails the task with its one-line reason."""
    problems = hpcx.settings_problems(settings)
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    try:
        return hpcx.plan(settings, facts, packages or "", driver or "")
    except hpcx.HpcxError as exc:
        return {"refusal": str(exc)}


def kiln_hpcx_refusals(hostvars, hosts):
    """One line naming every node refused and why, grouped by reason ("" for none)."""
    by_reason = {}
    for host in hosts:
        reason = (hostvars[host].get("_hpcx_plan") or {}).get("refusal")
        if reason:
            by_reason.setdefault(reason, []).append(host)
    return "; ".join(f"{hostlist.compress(h)}: {r}" for r, h in by_reason.items())


def kiln_hpcx_module_files(home, version, rebuilt, module_path, family=True):
    """Kiln's HPC-X module files under module_path, as kiln.cluster.write_files entries
    (their text shown in a diff)."""
    return [
        {"path": f"{module_path}/{name}", "content": text, "diff": True}
        for name, text in hpcx.module_files(home, version, rebuilt, bool(family)).items()
    ]


class FilterModule:
    def filters(self):
        return {
            "kiln_hpcx_plan": kiln_hpcx_plan,
            "kiln_hpcx_refusals": kiln_hpcx_refusals,
            "kiln_hpcx_module_files": kiln_hpcx_module_files,
        }
