"""Filters that hand the enroot role's settings to kiln.enroot: the role and `kiln
inventory check` judge them the same way, and one place writes enroot's files."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from ansible.errors import AnsibleFilterError

from kiln import enroot, storage


def kiln_enroot_plan(settings, arch, autofs_mounts, host_groups, nccl_files, nccl_dirs=()):
    """{problems, packages, conf, directories, mounts: {file name: text ('' = none)}}
    for one node; settings are its enroot_* variables without the prefix."""
    problems = enroot.settings_problems(settings)
    if problems:
        return {"problems": problems}
    try:
        return {
            "problems": [],
            "packages": enroot.packages(
                settings["version"],
                settings["sha256"],
                settings["caps"],
                settings["caps_sha256"],
                arch,
                settings["base_url"],
            ),
            "conf": enroot.config(settings),
            "directories": enroot.directories(settings),
            "mounts": {
                "50-kiln-storage.fstab": enroot.storage_mounts(autofs_mounts, host_groups),
                "50-kiln-nccl.fstab": enroot.nccl_mounts(nccl_files, list(nccl_dirs)),
            },
        }
    except (enroot.EnrootError, storage.StorageError) as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"kiln_enroot_plan": kiln_enroot_plan}
