"""The CUDA toolkit's compiler and NCCL that nccl-tests is built with, installed by the
nccl_tests role on a GPU node from NVIDIA's CUDA repository (the one the nvidia_driver
role adds with `nvidia_driver_source: cuda-repo`) at the release that matches the
node's driver. The one table of that match is RELEASES; the operator overrides it per
node with nccl_tests_cuda_version and nccl_tests_nccl_version.

What gets installed: `cuda-nvcc-<X>-<Y>` and `cuda-cudart-dev-<X>-<Y>` (the compiler
and the runtime it links; the package names carry the CUDA release, so the release is
pinned by name), `libnccl2` and `libnccl-dev` at one exact version, kept there by an
apt preference (NVIDIA's repository offers every NCCL build side by side, and a plain
upgrade would move to one built for a newer CUDA than the driver runs).
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from kiln.roles.nvidia_driver import apt, versions

# The nccl_tests_toolkit choices: auto installs where the driver comes from NVIDIA's
# repository and no *_home names the operator's own toolkit; cuda-repo always (the
# repository must be on the node); none never.
SOURCES = ("auto", "cuda-repo", "none")


@dataclass(frozen=True)
class Release:
    driver: int  # the oldest driver branch this CUDA release runs on
    cuda: str  # the toolkit's release, as its package names carry it (13.0: *-13-0)
    nccl: str  # the libnccl2 / libnccl-dev version built for it in NVIDIA's repository


# Newest first. The driver each CUDA release needs: NVIDIA's "CUDA Toolkit and
# Corresponding Driver Versions" table (13.1: 590, 13.0: 580, 12.9: 575, 12.8: 570,
# 12.4: 550, 12.2: 535). The NCCL build per release: the libnccl2 version NVIDIA's own
# CUDA images and public installs pin for it (docs/nccl.md lists the sources).
RELEASES: tuple[Release, ...] = (
    Release(590, "13.1", "2.29.2-1+cuda13.1"),
    Release(580, "13.0", "2.28.9-1+cuda13.0"),
    Release(575, "12.9", "2.27.7-1+cuda12.9"),
    Release(570, "12.8", "2.26.2-1+cuda12.8"),
    Release(550, "12.4", "2.21.5-1+cuda12.4"),
    Release(535, "12.2", "2.19.3-1+cuda12.2"),
)
# Minor version compatibility: a CUDA major runs on any driver from this branch on.
MAJOR_MIN_DRIVER = {"12": 525, "13": 580}
CUDA_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)")
NCCL_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\+cuda([0-9]+)\.[0-9]+")
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")
# Where NVIDIA's libnccl-dev puts NCCL (include/nccl.h, lib/<triplet>/libnccl.so).
NCCL_HOME = "/usr"


def cuda_home(cuda: str) -> str:
    """Where the CUDA repository's packages install that release."""
    return f"/usr/local/cuda-{cuda}"


def packages(cuda: str, nccl: str) -> list[str]:
    """What apt installs: the compiler and runtime of that CUDA release, NCCL at its
    exact version."""
    suffix = cuda.replace(".", "-")
    return [
        f"cuda-nvcc-{suffix}",
        f"cuda-cudart-dev-{suffix}",
        *(f"{name}={nccl}" for name in NCCL_PACKAGES),
    ]


def for_driver(driver: str) -> Release | None:
    """The newest release the driver runs (its branch at least the release's), or None
    for a driver older than every release or no driver."""
    branch = versions.branch(driver or "")
    if not branch.isdigit():
        return None
    return next((r for r in RELEASES if r.driver <= int(branch)), None)


def for_cuda(cuda: str) -> Release | None:
    return next((r for r in RELEASES if r.cuda == cuda), None)


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What is wrong with nccl_tests_toolkit, _cuda_version and _nccl_version (without
    the prefix), one line each, before any node is touched."""
    found = []
    toolkit = settings.get("toolkit", "auto")
    if toolkit not in SOURCES:
        found.append(f"nccl_tests_toolkit {toolkit!r}: expected one of {', '.join(SOURCES)}")
    cuda = str(settings.get("cuda_version") or "")
    nccl = str(settings.get("nccl_version") or "")
    cuda_ok = CUDA_RELEASE.fullmatch(cuda)
    nccl_ok = NCCL_VERSION.fullmatch(nccl)
    if cuda and not cuda_ok:
        found.append(f"nccl_tests_cuda_version {cuda!r}: expected a CUDA release such as 13.0")
    if nccl and not nccl_ok:
        found.append(
            f"nccl_tests_nccl_version {nccl!r}: expected a package version of NVIDIA's "
            "repository such as 2.28.9-1+cuda13.0"
        )
    if cuda_ok and nccl_ok and cuda_ok.group(1) != nccl_ok.group(1):
        found.append(
            f"nccl_tests_nccl_version {nccl} is built for CUDA {nccl_ok.group(1)}, "
            f"nccl_tests_cuda_version {cuda} is CUDA {cuda_ok.group(1)}"
        )
    if cuda_ok and not nccl and not for_cuda(cuda):
        known = ", ".join(r.cuda for r in RELEASES)
        found.append(
            f"nccl_tests_cuda_version {cuda} needs nccl_tests_nccl_version: Kiln knows "
            f"NCCL's build for {known}"
        )
    return found


def node_driver(fact_text: str, configured: str) -> str:
    """The node's driver: the nvidia_driver role's local fact (the module installed,
    else the version pinned), else nvidia_driver_version (a branch will do)."""
    try:
        fact = json.loads(fact_text) if fact_text.strip() else {}
    except ValueError:
        fact = {}
    driver = fact.get("driver") if isinstance(fact, dict) else None
    driver = driver if isinstance(driver, dict) else {}
    return str(driver.get("installed") or driver.get("pinned") or configured or "")


def plan(settings: dict[str, Any], source: str, repository: bool, driver: str) -> dict[str, Any]:
    """What the nccl_tests role installs on one node: {install, fail, cuda, nccl,
    packages, pin, cuda_home, nccl_home}. `settings` are the nccl_tests_* variables
    without the prefix; `source` is nvidia_driver_source; `repository` whether NVIDIA's
    repository is configured on the node (the nvidia_driver role added it: a GPU node);
    `driver` the node's driver version (node_driver). Nothing is installed (and the
    homes are the operator's, or searched) unless it is asked for and can be done; what
    cannot be is `fail`, one line naming the variables."""
    nothing = {
        "install": False,
        "fail": "",
        "cuda": "",
        "nccl": "",
        "packages": [],
        "pin": [],
        "cuda_home": "",
        "nccl_home": "",
    }
    toolkit = settings.get("toolkit", "auto")
    own = bool(settings.get("cuda_home") or settings.get("nccl_home"))
    if toolkit == "none" or (toolkit == "auto" and (own or source != "cuda-repo")):
        return nothing
    if not repository:
        if toolkit == "auto":
            return nothing  # the driver role left this node alone: no GPU
        return {
            **nothing,
            "fail": "nccl_tests_toolkit cuda-repo: NVIDIA's CUDA repository is not "
            "configured on this node (nvidia_driver_source: cuda-repo adds it)",
        }
    cuda = str(settings.get("cuda_version") or "")
    if not cuda:
        release = for_driver(driver)
        if release is None:
            oldest = RELEASES[-1]
            why = (
                f"driver {driver} is older than branch {oldest.driver}"
                if driver
                else (
                    "no driver version is known on this node (the nvidia_driver role's "
                    "kiln_gpu fact, nvidia_driver_version)"
                )
            )
            return {
                **nothing,
                "fail": f"nccl_tests: no CUDA release to install: {why}; set "
                "nccl_tests_cuda_version and nccl_tests_nccl_version",
            }
        cuda = release.cuda
    minimum = MAJOR_MIN_DRIVER.get(cuda.split(".")[0], 0)
    branch = versions.branch(driver or "")
    if branch.isdigit() and int(branch) < minimum:
        return {
            **nothing,
            "fail": f"nccl_tests_cuda_version {cuda} needs driver branch {minimum} or "
            f"newer; this node's is {driver}",
        }
    known = for_cuda(cuda)
    nccl = str(settings.get("nccl_version") or (known.nccl if known else ""))
    return {
        "install": True,
        "fail": "",
        "cuda": cuda,
        "nccl": nccl,
        "packages": packages(cuda, nccl),
        "pin": list(NCCL_PACKAGES),
        "cuda_home": cuda_home(cuda),
        "nccl_home": NCCL_HOME,
    }


def not_offered(policy: str, chosen: dict[str, Any]) -> str:
    """From `apt-cache policy` of the chosen packages (without versions): what NVIDIA's
    repository does not offer, one line naming the variable to set, or ""."""
    policies = apt.parse_apt_policy(policy)
    missing = []
    for entry in chosen["packages"]:
        name, _, version = entry.partition("=")
        offered = policies.get(name)
        if offered is None or not offered.offered:
            missing.append(name)
        elif version and version not in offered.offered:
            missing.append(f"{name} {version} (offered: {', '.join(offered.offered)})")
    if not missing:
        return ""
    return (
        f"NVIDIA's repository on this node offers no {'; no '.join(missing)}: set "
        "nccl_tests_cuda_version and nccl_tests_nccl_version to a release it has "
        "(apt-cache madison cuda-nvcc-<X>-<Y> libnccl2)"
    )
