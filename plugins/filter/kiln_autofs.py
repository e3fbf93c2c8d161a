"""Filters that hand storage declarations to kiln.roles.autofs: the role and `kiln inventory
check` judge a mount the same way."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import autofs


def kiln_storage_plan(
    declared, host_groups, kernel, default_options, filesystems=None, automount=True
):
    """The host's plan; with FILESYSTEMS (/proc/filesystems' text), refused on a kernel
    that cannot mount through autofs. AUTOMOUNT: `autofs_automount`."""
    try:
        plan = autofs.host_plan(
            declared, list(host_groups), kernel, dict(default_options), bool(automount)
        )
    except autofs.StorageError as exc:
        raise AnsibleFilterError(f"autofs_mounts: {exc}") from None
    refusal = None if filesystems is None else autofs.kernel_refusal(plan, kernel, filesystems)
    if refusal:
        raise AnsibleFilterError(refusal)
    return plan


def kiln_storage_packages(declared):
    try:
        return autofs.image_packages(declared)
    except autofs.StorageError as exc:
        raise AnsibleFilterError(f"autofs_mounts: {exc}") from None


class FilterModule:
    def filters(self):
        return {
            "kiln_storage_plan": kiln_storage_plan,
            "kiln_storage_packages": kiln_storage_packages,
        }
