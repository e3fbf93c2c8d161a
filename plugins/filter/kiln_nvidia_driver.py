"""Filters that hand what a node reported to kiln.roles.nvidia_driver: the role and
Kiln's tests judge GPUs, driver versions and pins the same way."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles.nvidia_driver import apt, node_plan, reboots, settings, versions
from kiln_node import slurm_state


def kiln_gpu_plan(detected, settings):
    return node_plan.node_plan(dict(detected), dict(settings)).to_json()


def kiln_gpu_preinstalled_problems(plan, version, listed=""):
    """listed: how many GPUs nvidia-smi -L printed; "" when it was not asked."""
    count = int(listed) if str(listed).strip() not in ("", "None") else None
    return node_plan.preinstalled_problems(plan, str(version or ""), count)


def kiln_gpu_preinstalled_driver(plan):
    return node_plan.preinstalled_driver(plan)


def kiln_gpu_pin(apt_policy, requested):
    try:
        return apt.pin_version(str(requested or ""), apt.parse_apt_policy(str(apt_policy)))
    except ValueError as exc:
        raise AnsibleFilterError(f"nvidia_driver_version: {exc}") from None


def kiln_gpu_off_pin(dpkg_query, packages, pinned):
    return apt.off_pin(str(dpkg_query), list(packages), str(pinned))


def kiln_gpu_apt_pin(version):
    return apt.apt_pin(str(version))


def kiln_gpu_settings_problems(given):
    return settings.settings_problems(dict(given))


def kiln_gpu_branch(version):
    return versions.branch(str(version or ""))


def kiln_gpu_fabric_manager_packages(version):
    return apt.fabric_manager_packages(str(version))


def kiln_gpu_fabric_manager_mismatch(apt_policy, pinned):
    return apt.fabric_manager_mismatch(str(pinned), apt.parse_apt_policy(str(apt_policy)))


def kiln_gpu_fact(plan, smi_xml, pinned, source, imex=False):
    return node_plan.local_fact(
        dict(plan), str(smi_xml or ""), str(pinned or ""), str(source), bool(imex)
    )


def kiln_gpu_reboot_plan(hosts, hostvars, batch, reboot):
    """The play's nodes that wait for a reboot (the role's _nvidia_driver_now), and those
    of them whose slurmd is active (_nvidia_driver_slurmd): kiln rollout reboots those."""
    pending, in_slurm = [], []
    for host in hosts:
        facts = hostvars[host]
        if not (facts.get("_nvidia_driver_now") or {}).get("reboot_needed"):
            continue
        pending.append(host)
        if (facts.get("_nvidia_driver_slurmd") or {}).get("stdout") == "active":
            in_slurm.append(host)
    try:
        return reboots.reboot_plan(pending, in_slurm, batch, bool(reboot)).to_json()
    except ValueError as exc:
        raise AnsibleFilterError(
            f"nvidia_driver_reboot_batch: expected a count (4) or a share (10%), got {batch!r}"
        ) from exc


def kiln_gpu_reboot_target(fact, proc_version, version, source):
    return reboots.reboot_target(
        dict(fact or {}), str(proc_version or ""), str(version or ""), str(source)
    )


def kiln_gpu_reboot_refusal(hosts, hostvars, limit, compute, scontrol, inventory):
    """The pre-flight's refusal, or "": each play host's _nvidia_driver_reboot_target,
    judged against rollout_max_unavailable of the `compute` nodes and Slurm's states
    (`scontrol --oneliner show node`). A cap that is no count or share is the refusal:
    returned, not raised, so every node fails with it (the filter runs once)."""
    if problem := reboots.share_problem(reboots.MAX_UNAVAILABLE, limit):
        return problem
    targets = {h: str(hostvars[h].get("_nvidia_driver_reboot_target") or "") for h in hosts}
    return reboots.reboot_refusal(
        targets,
        limit,
        list(compute or hosts),
        slurm_state.parse(str(scontrol or "")),
        " -i ".join(str(i) for i in inventory or []) or "INVENTORY",
    )


def kiln_gpu_reboot_reason(version):
    return reboots.reboot_reason(str(version))


class FilterModule:
    def filters(self):
        return {
            "kiln_gpu_plan": kiln_gpu_plan,
            "kiln_gpu_pin": kiln_gpu_pin,
            "kiln_gpu_preinstalled_driver": kiln_gpu_preinstalled_driver,
            "kiln_gpu_preinstalled_problems": kiln_gpu_preinstalled_problems,
            "kiln_gpu_off_pin": kiln_gpu_off_pin,
            "kiln_gpu_apt_pin": kiln_gpu_apt_pin,
            "kiln_gpu_fact": kiln_gpu_fact,
            "kiln_gpu_branch": kiln_gpu_branch,
            "kiln_gpu_settings_problems": kiln_gpu_settings_problems,
            "kiln_gpu_fabric_manager_packages": kiln_gpu_fabric_manager_packages,
            "kiln_gpu_fabric_manager_mismatch": kiln_gpu_fabric_manager_mismatch,
            "kiln_gpu_reboot_plan": kiln_gpu_reboot_plan,
            "kiln_gpu_reboot_target": kiln_gpu_reboot_target,
            "kiln_gpu_reboot_refusal": kiln_gpu_reboot_refusal,
            "kiln_gpu_reboot_reason": kiln_gpu_reboot_reason,
        }
