"""What a node builds CUDA programs with: the CUDA toolkit (nvcc), NCCL and MPI, where
they are and at which version. Read from files only (and `nvcc --version`), so the
nccl_tests role can decide on every run whether its build is stale, and `make
gpu-check` finds the same things on a GPU test machine without apt.

`python3 -m kiln_node.cuda_toolchain [--cuda-home D] [--nccl-home D] [--mpi-home D]`
prints one JSON object: {"cuda": {...}|null, "nccl": {...}|null, "mpi": {...}|null},
each {"home", "version", "lib"} (nccl also "library": the file the linker needs).
"""

import argparse
import glob
import json
import os
import re
import sys

from kiln_node import commands, node_files

# /usr/local/cuda (the CUDA repository's alternative, a runfile's link), then each
# release the CUDA repository installed, the newest first.
CUDA_HOMES = ("/usr/local/cuda", "/usr/local/cuda-[0-9]*")
# NCCL: the CUDA repository's libnccl-dev (headers in /usr/include) or a tree with
# include/ and lib/ (a tarball install, or the nvidia-nccl-cu* wheels' nvidia/nccl).
NCCL_HOMES = ("/usr", "/usr/local", "/usr/local/nccl", "/opt/nccl")
# HPC-X's Open MPI first where HPC-X is installed (the hpcx role's
# /opt/hpcx/<version>/ompi, the newest first; NVIDIA's containers' /opt/hpcx/ompi), then
# the distribution's.
MPI_HOMES = (
    "/opt/hpcx/ompi",
    "/opt/hpcx/*/ompi",
    "/usr/lib/x86_64-linux-gnu/openmpi",
    "/usr/lib/aarch64-linux-gnu/openmpi",
)
LIB_DIRS = ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu")
NVCC_TIMEOUT_S = 30


def _defines(text: str, *names: str) -> list[str]:
    found = []
    for name in names:
        match = re.search(rf"^#define\s+{name}\s+(\d+)", text, re.M)
        if not match:
            return []
        found.append(match.group(1))
    return found


def _lib_dir(home: str, *patterns: str) -> tuple[str, str]:
    """(directory, file) of the first library matching a pattern under home's lib dirs."""
    for sub in LIB_DIRS:
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(home, sub, pattern)))
            if hits:
                return os.path.join(home, sub), os.path.basename(hits[0])
    return "", ""


def cuda(homes: list[str]) -> dict | None:
    """The first home with bin/nvcc, its release (`nvcc --version`) and lib64."""
    for home in homes:
        nvcc = os.path.join(home, "bin", "nvcc")
        if not os.access(nvcc, os.X_OK):
            continue
        done = commands.run([nvcc, "--version"], NVCC_TIMEOUT_S)
        if done.rc is None:
            continue
        out = done.stdout
        release = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
        lib, _ = _lib_dir(home, "libcudart.so*")
        return {
            "home": home,
            "version": release.group(2) if release else "",
            "lib": lib,
        }
    return None


def nccl(homes: list[str]) -> dict | None:
    """The first home with include/nccl.h and a libnccl.so*: the version from the
    header's NCCL_MAJOR/MINOR/PATCH."""
    for home in homes:
        version = _defines(
            node_files.read(os.path.join(home, "include", "nccl.h")) or "",
            "NCCL_MAJOR",
            "NCCL_MINOR",
            "NCCL_PATCH",
        )
        lib, library = _lib_dir(home, "libnccl.so", "libnccl.so.2*")
        if version and lib:
            return {"home": home, "version": ".".join(version), "lib": lib, "library": library}
    return None


def _release_order(path: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", path)]


def _expanded(homes: list[str]) -> list[str]:
    """Each home, a pattern replaced by what it matches, the highest release first."""
    found = []
    for home in homes:
        if glob.has_magic(home):
            found += sorted(glob.glob(home), key=_release_order, reverse=True)
        else:
            found.append(home)
    return found


def mpi(homes: list[str]) -> dict | None:
    """The first home with include/mpi.h (Open MPI's, whose header names its version)
    and a libmpi.so."""
    for home in _expanded(homes):
        header = node_files.read(os.path.join(home, "include", "mpi.h")) or ""
        version = _defines(
            header, "OMPI_MAJOR_VERSION", "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION"
        )
        lib, _ = _lib_dir(home, "libmpi.so")
        if header and lib:
            return {"home": home, "version": ".".join(version), "lib": lib}
    return None


def wheel_homes(package: str) -> list[str]:
    """NVIDIA's PyPI wheels of this package (nvidia/<package>/ in a site directory of
    the python3 running this), for machines that have NCCL only from pip."""
    return sorted(
        {
            os.path.dirname(os.path.dirname(hit))
            for site in sys.path
            if site
            for depth in ("*", "*/*")  # nvidia/nccl (cu12), or one level more
            for hit in glob.glob(os.path.join(site, "nvidia", depth, "include", f"{package}.h"))
        }
    )


def find(cuda_home: str = "", nccl_home: str = "", mpi_home: str = "") -> dict:
    """A home named by the caller is the only place looked at for that part."""
    return {
        "cuda": cuda([cuda_home] if cuda_home else _expanded(list(CUDA_HOMES))),
        "nccl": nccl([nccl_home] if nccl_home else [*NCCL_HOMES, *wheel_homes("nccl")]),
        "mpi": mpi([mpi_home] if mpi_home else list(MPI_HOMES)),
    }


def missing(report: dict) -> str:
    """What of building nccl-tests a report of find() lacks ("no CUDA toolkit
    (bin/nvcc) and no NCCL (nccl.h)"), or "": the nccl_tests role's note and the
    validate role's reason for a node it could not measure say the same."""
    lacking = [
        what
        for name, what in (("cuda", "CUDA toolkit (bin/nvcc)"), ("nccl", "NCCL (nccl.h)"))
        if not report.get(name)
    ]
    return f"no {' and no '.join(lacking)}" if lacking else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda-home", default="")
    parser.add_argument("--nccl-home", default="")
    parser.add_argument("--mpi-home", default="")
    args = parser.parse_args(argv)
    print(json.dumps(find(args.cuda_home, args.nccl_home, args.mpi_home)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
