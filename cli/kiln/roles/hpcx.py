"""NVIDIA HPC-X: which of NVIDIA's builds a node takes (its flavour), the tarball's
name and URL, what the hpcx role refuses before touching a node, and the module files
that put HPC-X in the mpi family. The hpcx role and `kiln inventory check` use this."""

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kiln import pinned
from kiln.roles import mpi
from kiln.roles.nvidia_driver import hardware

DEFAULT_ROOT = "/opt/hpcx"
# NVIDIA builds HPC-X under /build-result/<tarball's directory>; its pkg-config files
# still name it (prefix=/build-result/hpcx-v2.22.1-gcc-...-x86_64/ucx).
BUILD_PREFIX_PATTERN = r"/build-result/[^/\s]+"
# Where hpcx_rebuild.sh installs Open MPI rebuilt against the system PMIx, and the
# module file it writes for it, both inside the HPC-X directory.
REBUILD_DIR = "hpcx-rebuild"
MARK = "## Written by Kiln (role hpcx)"

# HPC-X publishes Ubuntu and RHEL builds and none for Debian: a Debian release takes
# the Ubuntu LTS build whose glibc and libstdc++ are not newer than its own.
BUILD_DISTRO = {
    ("Debian", "12"): "ubuntu22.04",  # glibc 2.36 >= 22.04's 2.35
    ("Debian", "13"): "ubuntu24.04",  # glibc 2.41 >= 24.04's 2.39
    ("Ubuntu", "20"): "ubuntu20.04",
    ("Ubuntu", "22"): "ubuntu22.04",
    ("Ubuntu", "24"): "ubuntu24.04",
}
# The oldest driver branch each CUDA major of HPC-X's CUDA-aware UCX runs on.
CUDA_MIN_DRIVER = {"11": 450, "12": 525, "13": 580}
# HPC-X 2.19 renamed its OFED builds from mlnx_ofed to doca_ofed; either runs on
# MLNX OFED and DOCA OFED alike. `inbox` builds are for the distribution's rdma-core.
OFED_TOKENS = ("doca_ofed", "mlnx_ofed")
ARCHES = ("x86_64", "aarch64")

_VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+){0,2}")
_TOKENS = {
    "distro": re.compile(
        r"(?:^|-)((?:ubuntu|debian|redhat|rhel|sles|rocky)\d+(?:\.\d+|sp\d+)?)(?=-|$)"
    ),
    "cuda": re.compile(r"(?:^|-)cuda(\d+)(?=-|$)"),
    "ofed": re.compile(r"(?:^|-)(inbox|doca_ofed|mlnx_ofed|MLNX_OFED_LINUX)(?=-|$)"),
    "arch": re.compile(r"(?:^|-)(x86_64|aarch64)(?=-|$)"),
}


class HpcxError(ValueError):
    """An HPC-X setting that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Flavour:
    """What one HPC-X build is made for, as its tarball's name spells it."""

    distro: str  # ubuntu22.04
    ofed: str  # doca_ofed, mlnx_ofed or inbox
    cuda: str  # the CUDA major: 12
    arch: str  # x86_64 or aarch64


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def node_flavour(
    distribution: str, major: str, arch: str, rdma_stack: str, cuda: str, version: str
) -> Flavour:
    """The build a node needs, from its facts (distribution, major release,
    architecture), its RDMA stack (kiln.roles.nvidia_driver.hardware.rdma_stack) and the
    CUDA major asked for."""
    distro = BUILD_DISTRO.get((distribution, str(major)))
    if distro is None:
        supported = ", ".join(f"{d} {m}" for d, m in BUILD_DISTRO)
        raise HpcxError(f"HPC-X has no build for {distribution} {major} (Kiln knows {supported})")
    if arch not in ARCHES:
        raise HpcxError(f"HPC-X has no build for the {arch} architecture")
    if rdma_stack in ("doca-ofed", "mlnx-ofed"):
        ofed = "doca_ofed" if version_key(version) >= (2, 19) else "mlnx_ofed"
    else:
        ofed = "inbox"
    return Flavour(distro=distro, ofed=ofed, cuda=str(cuda), arch=arch)


def tarball_name(version: str, flavour: Flavour) -> str:
    """NVIDIA's name: hpcx-v<version>-gcc-<ofed>-<distro>-cuda<N>-<arch>.tbz."""
    return (
        f"hpcx-v{version}-gcc-{flavour.ofed}-{flavour.distro}-cuda{flavour.cuda}-{flavour.arch}.tbz"
    )


def default_url(base_url: str, version: str, flavour: Flavour) -> str:
    """NVIDIA's published layout, which a mirror keeps: <base>/v<version>/<tarball>."""
    return f"{base_url.rstrip('/')}/v{version}/{tarball_name(version, flavour)}"


def file_name(url: str) -> str:
    return PurePosixPath(url.split("?", 1)[0]).name


def url_flavour(url: str) -> dict[str, str]:
    """The flavour a tarball's file name claims, field by field (missing: not said)."""
    stem = re.sub(r"\.(?:tbz|tar\.bz2|tgz|tar\.gz)$", "", file_name(url))
    found = {}
    for field, pattern in _TOKENS.items():
        if match := pattern.search(stem):
            found[field] = match.group(1)
    if found.get("ofed") == "MLNX_OFED_LINUX":
        found["ofed"] = "mlnx_ofed"
    return found


def other_version(url: str, version: str) -> str:
    """Why the tarball at `url` is not HPC-X `version` by its name, or ""."""
    name = file_name(url)
    if f"v{version}-" in name or f"-{version}-" in name:
        return ""
    return f"hpcx_url {name!r} is not HPC-X {version} (its name does not say v{version})"


def url_mismatch(url: str, version: str, flavour: Flavour) -> str:
    """Why the tarball at `url` is not the build this node needs, or ""."""
    name = file_name(url)
    if wrong := other_version(url, version):
        return wrong
    claimed = url_flavour(url)
    missing = [field for field in _TOKENS if field not in claimed]
    if missing:
        return (
            f"hpcx_url {name!r} does not say which {', '.join(missing)} it is built for; "
            "keep NVIDIA's file name on a mirror"
        )
    wrong = []
    if claimed["distro"] != flavour.distro:
        wrong.append(f"{claimed['distro']} (this node takes {flavour.distro})")
    if (claimed["ofed"] in OFED_TOKENS) != (flavour.ofed in OFED_TOKENS):
        wrong.append(f"{claimed['ofed']} (this node has {_stack_words(flavour.ofed)})")
    if claimed["cuda"] != flavour.cuda:
        wrong.append(f"cuda{claimed['cuda']} (hpcx_cuda is {flavour.cuda})")
    if claimed["arch"] != flavour.arch:
        wrong.append(f"{claimed['arch']} (this node is {flavour.arch})")
    if wrong:
        return f"hpcx_url {name!r} is the build for {', '.join(wrong)}"
    return ""


def _stack_words(ofed: str) -> str:
    return "MLNX/DOCA OFED" if ofed in OFED_TOKENS else "the distribution's rdma-core"


def driver_too_old(cuda: str, driver: str) -> str:
    """Why HPC-X built for CUDA `cuda` cannot use the node's driver, or "" (no driver
    on the node, or one new enough)."""
    branch = re.match(r"^(\d+)", driver or "")
    minimum = CUDA_MIN_DRIVER.get(str(cuda))
    if not branch or minimum is None or int(branch.group(1)) >= minimum:
        return ""
    return f"HPC-X for CUDA {cuda} needs driver {minimum} or newer; the node's is {driver}"


def installed_packages(dpkg_query: str) -> set[str]:
    """The installed packages from `dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\n'`
    (a second status letter i: installed; c: only its configuration left)."""
    names = set()
    for line in dpkg_query.splitlines():
        status, _, name = line.partition("\t")
        if status[1:2] == "i" and name.strip():
            names.add(name.strip())
    return names


def plan(
    settings: dict[str, Any], facts: dict[str, Any], packages: str, driver: str = ""
) -> dict[str, Any]:
    """One node's HPC-X: its flavour, the URL and file to fetch, where it goes, and why
    it is refused ("" when it is not). `settings` are the hpcx_* variables without the
    prefix; `facts` the node's Ansible facts; `packages` dpkg-query's statuses and names
    (installed_packages); `driver` the NVIDIA driver the node has or is pinned to ("" for
    none)."""
    version = str(settings["version"])
    flavour = node_flavour(
        facts["distribution"],
        str(facts["distribution_major_version"]),
        facts["architecture"],
        hardware.rdma_stack(dict.fromkeys(installed_packages(packages), "")),
        str(settings["cuda"]),
        version,
    )
    url = settings.get("url") or default_url(settings["base_url"], version, flavour)
    refusal = url_mismatch(url, version, flavour) or driver_too_old(flavour.cuda, driver)
    home = f"{settings['root'].rstrip('/')}/{version}"
    return {
        "flavour": flavour.__dict__,
        "url": url,
        "tarball": file_name(url),
        "sha256": settings["sha256"],
        "home": home,
        "build_prefix_pattern": BUILD_PREFIX_PATTERN,
        "refusal": refusal,
    }


def module_files(home: str, version: str, rebuilt: bool, family: bool = True) -> dict[str, str]:
    """Kiln's mpi/hpcx (and mpi/hpcx-pmix where Open MPI was rebuilt against the
    system PMIx): each puts HPC-X's own module directory on the path and loads the
    module file HPC-X ships, inside the mpi family (`family`: kiln.roles.mpi.modulefile's)."""
    variants = [("hpcx", "hpcx", f"{home}/ompi", "NVIDIA HPC-X {v} (its own Open MPI)")]
    if rebuilt:
        variants.append(
            (
                "hpcx-pmix",
                REBUILD_DIR,
                f"{home}/{REBUILD_DIR}",
                "NVIDIA HPC-X {v}, Open MPI rebuilt against the system PMIx (srun --mpi=pmix)",
            )
        )
    return {
        f"{mpi.FAMILY}/{name}": mpi.modulefile(
            mpi.MpiModule(
                name=name,
                summary=summary.format(v=version),
                home=mpi_home,
                use=f"{home}/modulefiles",
                load=shipped,
            ),
            mark=MARK,
            family=family,
        )
        for name, shipped, mpi_home, summary in variants
    }


# --- inventory pre-flight ---------------------------------------------------------------


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's hpcx_* settings (given
    without the prefix), before any node is touched. The URL's flavour against the
    node's is checked once facts are read (the pre-flight play)."""
    version = str(settings.get("version") or "")
    if not version:
        return []
    problems = pinned.problems("hpcx", settings, "2.22.1", "the tarball's", _VERSION)
    cuda = str(settings.get("cuda", "12"))
    if cuda not in CUDA_MIN_DRIVER:
        problems.append(f"hpcx_cuda {cuda!r}: HPC-X is built for CUDA {', '.join(CUDA_MIN_DRIVER)}")
    url = str(settings.get("url") or "")
    if url:
        claimed = url_flavour(url)
        name = file_name(url)
        if wrong := other_version(url, version):
            problems.append(wrong)
        elif claimed.get("cuda", cuda) != cuda:
            problems.append(
                f"hpcx_url {name!r} is built for cuda{claimed['cuda']}; hpcx_cuda is {cuda}"
            )
    root = settings.get("root", DEFAULT_ROOT)
    try:
        mpi.check_module_path(root)
    except mpi.MpiError as exc:
        problems.append(str(exc).replace("mpi_module_path", "hpcx_root", 1))
    return problems
