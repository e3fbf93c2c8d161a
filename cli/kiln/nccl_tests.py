"""nccl-tests, NVIDIA's NCCL benchmarks (all_reduce_perf, ...), built by Kiln from a
release pinned by version and sha256: the make command, where the build goes and when it
is stale. The nccl_tests role builds with it on the GPU nodes, and `make gpu-check`
builds the same way on a GPU test machine.

A build is made against the node's CUDA toolkit, NCCL and MPI (kiln.node.cuda_toolchain
finds them) and records their versions beside it; when one changes, it is rebuilt.
"""

import re
from typing import Any

from kiln import pinned

DEFAULT_BASE_URL = "https://github.com/NVIDIA/nccl-tests/archive/refs/tags"
INSTALL_ROOT = "/opt/nccl-tests"
STAMP = "kiln-build.json"
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
    """nccl_tests_version, _sha256, _fetch and _cuda_archs, one line each."""
    found = pinned.problems("nccl_tests", settings, "2.19.6", "the source tarball's")
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


def archs(configured: list[str], compute_caps: list[str]) -> list[str]:
    """The GPU architectures to compile for: the configured ones, else the node's own
    GPUs' (nvidia-smi's compute_cap, "9.0" -> "90"); none means nccl-tests' own list
    (every architecture its CUDA supports: slow, but runs anywhere)."""
    if configured:
        return sorted({str(a) for a in configured})
    return sorted({cap.replace(".", "") for cap in compute_caps if cap.strip()})


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
    has only libnccl.so.2, and the Makefile links -lnccl: nccl_link then names the
    libnccl.so link to make in the build's own lib directory, used as NCCL_HOME's lib."""
    cuda, nccl, mpi = toolchain["cuda"], toolchain["nccl"], toolchain.get("mpi")
    nccl_home, nccl_link = nccl["home"], None
    if nccl.get("library") != "libnccl.so":
        nccl_home = f"{build}/nccl"
        nccl_link = {
            "include": {"path": f"{nccl_home}/include", "src": f"{nccl['home']}/include"},
            "lib": {
                "path": f"{nccl_home}/lib/libnccl.so",
                "src": f"{nccl['lib']}/{nccl['library']}",
            },
        }
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


def programs(build: str) -> list[str]:
    return [f"{build}/bin/{name}_perf" for name in PROGRAMS]
