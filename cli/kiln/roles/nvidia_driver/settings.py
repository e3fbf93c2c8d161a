"""The nvidia_driver settings `kiln inventory check` and the role's own pre-flight judge,
before any node is touched (the registry's contract: kiln.roles)."""

import re
from typing import Any

from kiln import formats, pinned
from kiln.roles.nvidia_driver.reboots import MAX_UNAVAILABLE, share_problem
from kiln.roles.nvidia_driver.versions import is_exact

FABRIC_MANAGER_SETTINGS = ("auto", "install", "off")
# The settings written as URIs of a deb822 sources file.
URL_SETTINGS = ("cuda_repo_url", "cuda_repos_url", "debian_mirror", "debian_security_mirror")
# A kernel module parameter (NVreg_EnableStreamMemOPs), written into modprobe.d's
# `options MODULE NAME=VALUE ...` line: a line break there would add an `install`
# command, which modprobe runs as root.
_MODULE_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's nvidia_driver_* settings
    (given without the prefix), before any node is touched."""
    source = settings.get("source", "debian")
    version = str(settings.get("version") or "")
    fabric_manager = settings.get("fabric_manager", "auto")
    problems = []
    if version and not (is_exact(version) or re.fullmatch(r"[0-9]{3,}", version)):
        problems.append(
            f"nvidia_driver_version {version!r} is neither an exact version (580.95.05) "
            "nor a branch (580)"
        )
    if fabric_manager == "install" and not is_exact(version):
        problems.append(
            "nvidia_driver_fabric_manager install needs an exact nvidia_driver_version "
            f"(the fabric manager must equal the driver to the patch), got {version!r}"
        )
    if fabric_manager == "install" and source == "debian":
        problems.append(
            "nvidia_driver_fabric_manager install: Debian does not package the fabric "
            "manager (use nvidia_driver_source cuda-repo)"
        )
    if source == "cuda-repo" and (
        wrong := pinned.sha256_problem(
            "nvidia_driver_cuda_repo_key_sha256",
            settings.get("cuda_repo_key_sha256"),
            "the repository's signing key's",
            "nvidia_driver_source cuda-repo",
        )
    ):
        problems.append(wrong)
    if source == "ubuntu" and not version:
        problems.append(
            "nvidia_driver_source ubuntu needs nvidia_driver_version: Canonical's packages "
            "are named for a branch (580) or an exact version (580.95.05)"
        )
    for name in URL_SETTINGS:
        url = settings.get(name) or ""
        if url and (why := formats.url(url)):
            problems.append(f"nvidia_driver_{name} {url!r}: {why} (apt's sources hold it)")
    problems += module_options_problems(settings.get("module_options") or {})
    if problem := share_problem("nvidia_driver_reboot_batch", settings.get("reboot_batch", "10%")):
        problems.append(problem)
    # The role passes the cluster-wide cap too; the inventory check reads it itself.
    if MAX_UNAVAILABLE in settings and (
        problem := share_problem(MAX_UNAVAILABLE, settings[MAX_UNAVAILABLE])
    ):
        problems.append(problem)
    return problems


def module_options_problems(options: Any) -> list[str]:
    """The module options modprobe.d's `options` line cannot hold, one line each."""
    if not isinstance(options, dict):
        return []  # the argument spec reports the type
    problems = []
    for name, value in options.items():
        if not _MODULE_PARAMETER.fullmatch(str(name)):
            problems.append(
                f"nvidia_driver_module_options: {str(name)!r} is not a module parameter name "
                "(letters, digits and '_')"
            )
        elif why := formats.word(value):
            problems.append(f"nvidia_driver_module_options: {name} {value!r} {why}")
    return problems


def _check_max_unavailable(value: Any, _groups: object = None) -> None:
    if problem := share_problem(MAX_UNAVAILABLE, value):
        raise ValueError(problem)


# Checked by `kiln inventory check` (kiln.inventory.checks) and by the role's own
# settings check; a count may be written as a number.
INVENTORY_CHECKS = {MAX_UNAVAILABLE: (object, _check_max_unavailable)}
