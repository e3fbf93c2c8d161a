"""Filters that hand the enroot role's settings to kiln.roles.enroot: the role and `kiln
inventory check` judge them the same way, and one place writes enroot's files."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import autofs, enroot


def kiln_enroot_node_read(caps, path, nccl_fact):
    """The argv of the role's one read of the node (kiln.roles.enroot.node_read_argv)."""
    return enroot.node_read_argv(bool(caps), path, nccl_fact)


def kiln_enroot_node(output):
    """That read's output as {arch, fstype, old_conf, nccl, dpkg}."""
    return enroot.node_state(output)


def kiln_enroot_plan(settings, arch, autofs_mounts, host_groups, nccl_files, nccl_dirs=()):
    """{problems, packages, files (kiln.cluster.write_files entries)} for one node;
    settings are its enroot_* variables without the prefix."""
    problems = enroot.settings_problems(settings)
    if problems:
        return {"problems": problems}
    try:
        chosen = enroot.packages(
            settings["version"],
            settings["sha256"],
            settings["caps"],
            settings["caps_sha256"],
            arch,
            settings["base_url"],
        )
        return {
            "problems": [],
            "packages": chosen,
            "files": enroot.files(
                enroot.config(settings),
                enroot.directories(settings),
                {
                    "50-kiln-storage.fstab": enroot.storage_mounts(autofs_mounts, host_groups),
                    "50-kiln-nccl.fstab": enroot.nccl_mounts(nccl_files, list(nccl_dirs)),
                },
            ),
        }
    except (enroot.EnrootError, autofs.StorageError) as exc:
        raise AnsibleFilterError(str(exc)) from None


def kiln_enroot_missing(packages, dpkg_output):
    """The plan's packages not installed at the pinned version, from the plan's query."""
    return enroot.missing(packages, dpkg_output)


def kiln_enroot_install_failure(packages, host, apt_stdout, apt_stderr):
    """One line naming what apt could not install on the host, and why."""
    return enroot.install_failure(host, packages, f"{apt_stdout}\n{apt_stderr}")


class FilterModule:
    def filters(self):
        return {
            "kiln_enroot_node_read": kiln_enroot_node_read,
            "kiln_enroot_node": kiln_enroot_node,
            "kiln_enroot_plan": kiln_enroot_plan,
            "kiln_enroot_missing": kiln_enroot_missing,
            "kiln_enroot_install_failure": kiln_enroot_install_failure,
        }
