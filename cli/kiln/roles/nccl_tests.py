"""nccl-tests, NVIDIA's NCCL benchmarks (all_reduce_perf, ...), built by Kiln from a
release pinned by version and sha256: the make command, where the build goes and when it
is stale. The nccl_tests role builds with it on the GPU nodes, and `make gpu-check`
builds the same way on a GPU test machine.

A build is made against the node's CUDA toolkit, NCCL and MPI (kiln_node.cuda_toolchain
finds them) and records their versions beside it; when one changes, it is rebuilt.
"""

import json
import re
from typing import Any

from kiln import cuda_toolkit, pinned
from kiln_node import cuda_toolchain

DEFAULT_BASE_URL = "https://github.com/NVIDIA/nccl-tests/archive/refs/tags"
INSTALL_ROOT = "/opt/nccl-tests"
# Where the role keeps the tarball and unpacks it.
SOURCE_DIR = "/usr/local/src/kiln-nccl-tests"
# In the build directory: what the build was made from (stamp()).
STAMP = "kiln-build.json"
# Where the validate role looks for the programs when no nccl-tests release is pinned
# (a build made by hand, or none).
UNPINNED_BIN_DIR = f"{INSTALL_ROOT}/build"
# nccl-tests releases are numbered as NCCL's own (2.19.6).
RELEASE = pinned.RELEASE
# The programs a build makes (src/Makefile's BIN_FILES_LIST), each <name>_perf.
PROGRAMS = (
    "all_reduce",
    "all_gather",
    "broadcast",
    "reduce_scatter",
    "reduce",
    "alltoall",
    "alltoallv",
    "scatter",
    "gather",
    "sendrecv",
    "hypercube",
)
_ARCH = re.compile(r"[0-9]{2,3}[a-z]?")


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's nccl_tests_* settings
    (without the prefix), one line each, before any node is touched; nothing when no
    release is asked for."""
    if not settings.get("version"):
        return []
    found = pinned.problems("nccl_tests", settings, "2.19.6", "the source tarball's")
    found += cuda_toolkit.settings_problems(settings)
    archs = settings.get("cuda_archs") or []
    if not isinstance(archs, list) or not all(_ARCH.fullmatch(str(a)) for a in archs):
        found.append(
            f"nccl_tests_cuda_archs {archs!r}: expected a list of compute capabilities "
            "such as ['90', '100']"
        )
    return found


def source(version: str, sha256: str, base_url: str) -> dict[str, str]:
    return pinned.tag_archive("nccl-tests", version, sha256, base_url)


def build_dir(version: str) -> str:
    return f"{INSTALL_ROOT}/{version}"


def bin_dir(version: str) -> str:
    """Where the programs are: the pinned release's build, else UNPINNED_BIN_DIR (the
    validate role's validate_nccl_tests_dir defaults to this)."""
    return f"{build_dir(version)}/bin" if version else UNPINNED_BIN_DIR


def _arch_order(arch: str) -> tuple[int, str]:
    digits = arch.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits), arch[len(digits) :]


def archs(configured: list[str], compute_caps: list[str]) -> list[str]:
    """The GPU architectures to compile for: the configured ones, else the node's own
    GPUs' (nvidia-smi's compute_cap, "9.0" -> "90"); none means nccl-tests' own list
    (every architecture its CUDA supports: slow, but runs anywhere)."""
    if configured:
        return sorted({str(a) for a in configured}, key=_arch_order)
    found = {cap.strip().replace(".", "") for cap in compute_caps}
    return sorted((a for a in found if _ARCH.fullmatch(a)), key=_arch_order)


def gencode(arch_list: list[str]) -> str:
    return " ".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in arch_list)


def stamp(version: str, toolchain: dict[str, Any], arch_list: list[str]) -> dict[str, Any]:
    """What a build was made from: a build whose stamp differs is rebuilt."""
    parts = {name: (toolchain.get(name) or {}) for name in ("cuda", "nccl", "mpi")}
    return {
        "nccl_tests": version,
        **{
            name: {"home": p.get("home", ""), "version": p.get("version", "")}
            for name, p in parts.items()
        },
        "archs": arch_list,
    }


def make_command(
    source_top: str, build: str, toolchain: dict[str, Any], arch_list: list[str], jobs: int
) -> dict[str, Any]:
    """{argv, env, nccl_link}: the make command line for this toolchain.

    MPI=1 where the node has MPI (multi-node runs under srun need it). LD_RUN_PATH gives
    the programs the run path of NCCL, MPI and the CUDA runtime, so they start without
    LD_LIBRARY_PATH (nccl-tests' Makefile sets no run path of its own). NCCL from a wheel
    has only libnccl.so.2, and the Makefile links -lnccl: nccl_link then lists the links
    ({path, src}) that make NCCL_HOME in the build directory (include/, lib/libnccl.so)."""
    cuda, nccl, mpi = toolchain["cuda"], toolchain["nccl"], toolchain.get("mpi")
    nccl_home, nccl_link = nccl["home"], []
    if nccl.get("library") != "libnccl.so":
        nccl_home = f"{build}/nccl"
        nccl_link = [
            {"path": f"{nccl_home}/include", "src": f"{nccl['home']}/include"},
            {"path": f"{nccl_home}/lib/libnccl.so", "src": f"{nccl['lib']}/{nccl['library']}"},
        ]
    argv = [
        "make",
        "-C",
        source_top,
        f"-j{max(1, int(jobs))}",
        f"BUILDDIR={build}/bin",
        f"CUDA_HOME={cuda['home']}",
        f"NCCL_HOME={nccl_home}",
    ]
    if mpi:
        argv += ["MPI=1", f"MPI_HOME={mpi['home']}"]
    if arch_list:
        argv.append(f"NVCC_GENCODE={gencode(arch_list)}")
    run_path = [nccl["lib"], *([mpi["lib"]] if mpi else []), cuda.get("lib") or ""]
    return {
        "argv": argv,
        "env": {"LD_RUN_PATH": ":".join(p for p in run_path if p)},
        "nccl_link": nccl_link,
    }


def stamp_text(stamp_data: dict[str, Any]) -> str:
    """The stamp file's content: one form, so a build is rebuilt only when what it was
    made from changed."""
    return json.dumps(stamp_data, indent=2, sort_keys=True) + "\n"


def programs(build: str) -> list[str]:
    return [f"{build}/bin/{name}_perf" for name in PROGRAMS]


def skip_reason(toolchain: dict[str, Any]) -> str:
    """Why a node cannot build nccl-tests (no CUDA compiler, no NCCL), or ""."""
    missing = cuda_toolchain.missing(toolchain)
    return f"{missing} on this node: nccl-tests not built" if missing else ""


def plan(
    settings: dict[str, Any], toolchain: dict[str, Any], compute_caps: list[str], jobs: int
) -> dict[str, Any]:
    """What the nccl_tests role does on one node, from its settings (without the
    prefix), kiln_node.cuda_toolchain's report and nvidia-smi's compute_cap lines:
    {skip} where it cannot build, else the source, the build, its stamp and make."""
    reason = skip_reason(toolchain)
    if reason:
        return {"skip": reason}
    version = settings["version"]
    build = build_dir(version)
    arch_list = archs(list(settings.get("cuda_archs") or []), compute_caps)
    tarball = source(version, settings["sha256"], settings["base_url"])
    top = f"{SOURCE_DIR}/{tarball['top']}"
    return {
        "skip": "",
        "source": tarball,
        "source_dir": SOURCE_DIR,
        "build_dir": build,
        "bin_dir": bin_dir(version),
        "stamp_path": f"{build}/{STAMP}",
        "stamp": stamp_text(stamp(version, toolchain, arch_list)),
        "make": make_command(top, build, toolchain, arch_list, jobs),
        "programs": programs(build),
    }
