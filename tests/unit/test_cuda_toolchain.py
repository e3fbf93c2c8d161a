"""kiln_node.cuda_toolchain, what a node builds CUDA programs with: each part found in
trees laid out as the real ones are (a CUDA toolkit's bin/nvcc, NCCL's header and
library, Open MPI's mpi.h; NVIDIA's PyPI wheels' nvidia/<package>/), the whole report
compared."""

import json
import stat
import sys

import pytest

from kiln_node import cuda_toolchain

# `nvcc --version` of the nvidia-cuda-nvcc 13.0.88 wheel, as printed.
NVCC_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
# The lines of nccl.h (2.27.7) and Open MPI's mpi.h (Debian 13's 5.0.7) that name the
# release, among others of the same form.
NCCL_H = """#ifndef NCCL_H_
#define NCCL_H_
#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22707
"""
MPI_H = """#define OMPI_MAJOR_VERSION 5
#define OMPI_MINOR_VERSION 0
#define OMPI_RELEASE_VERSION 7
#define MPI_VERSION 3
"""


def put(path, text="", mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def cuda_home(root, libdir="lib64"):
    put(root / "bin" / "nvcc", f"#!/bin/sh\ncat <<'EOF'\n{NVCC_VERSION}EOF\n", 0o755)
    put(root / libdir / "libcudart.so.13")
    return root


def nccl_home(root, library="libnccl.so.2", libdir="lib"):
    put(root / "include" / "nccl.h", NCCL_H)
    put(root / libdir / library)
    return root


def mpi_home(root, header=MPI_H):
    put(root / "include" / "mpi.h", header)
    put(root / "lib" / "libmpi.so")
    return root


def test_each_part_found_where_named(tmp_path):
    cuda = cuda_home(tmp_path / "cuda")
    nccl = nccl_home(tmp_path / "nccl", library="libnccl.so")
    mpi = mpi_home(tmp_path / "ompi")
    assert cuda_toolchain.find(str(cuda), str(nccl), str(mpi)) == {
        "cuda": {"home": str(cuda), "version": "13.0.88", "lib": f"{cuda}/lib64"},
        "nccl": {
            "home": str(nccl),
            "version": "2.27.7",
            "lib": f"{nccl}/lib",
            "library": "libnccl.so",
        },
        "mpi": {"home": str(mpi), "version": "5.0.7", "lib": f"{mpi}/lib"},
    }


def test_a_named_home_is_the_only_place_looked_at(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_toolchain, "CUDA_HOMES", (str(cuda_home(tmp_path / "cuda")),))
    monkeypatch.setattr(cuda_toolchain, "MPI_HOMES", (str(mpi_home(tmp_path / "ompi")),))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cuda_toolchain.find(str(empty), str(empty), str(empty)) == {
        "cuda": None,
        "nccl": None,
        "mpi": None,
    }


def test_hpcx_open_mpi_before_the_distributions(tmp_path, monkeypatch):
    hpcx = mpi_home(tmp_path / "hpcx" / "ompi", MPI_H.replace("5\n", "4\n", 1))
    debian = mpi_home(tmp_path / "openmpi")
    monkeypatch.setattr(cuda_toolchain, "MPI_HOMES", (str(hpcx), str(debian)))
    assert cuda_toolchain.mpi(list(cuda_toolchain.MPI_HOMES)) == {
        "home": str(hpcx),
        "version": "4.0.7",
        "lib": f"{hpcx}/lib",
    }
    # HPC-X unpacked without its headers (no mpi.h): nothing to build against there.
    (hpcx / "include" / "mpi.h").unlink()
    assert cuda_toolchain.mpi(list(cuda_toolchain.MPI_HOMES))["home"] == str(debian)


def test_the_hpcx_roles_newest_release_first(tmp_path):
    older = mpi_home(tmp_path / "hpcx" / "2.9.0" / "ompi", MPI_H.replace("5\n", "4\n", 1))
    newer = mpi_home(tmp_path / "hpcx" / "2.22.1" / "ompi")
    pattern = str(tmp_path / "hpcx" / "*" / "ompi")
    assert cuda_toolchain.mpi([str(tmp_path / "hpcx" / "ompi"), pattern]) == {
        "home": str(newer),
        "version": "5.0.7",
        "lib": f"{newer}/lib",
    }
    assert older.exists()


def test_without_usr_local_cuda_the_newest_release_the_cuda_repository_installed(
    tmp_path, monkeypatch
):
    """NVIDIA's packages install each release in /usr/local/cuda-<release>; where no
    /usr/local/cuda link names one, the newest (12.10 after 12.9) is found."""
    for release in ("12.9", "12.10"):
        cuda_home(tmp_path / f"cuda-{release}")
    pattern = str(tmp_path / "cuda-[0-9]*")
    monkeypatch.setattr(cuda_toolchain, "CUDA_HOMES", (str(tmp_path / "cuda"), pattern))
    assert cuda_toolchain.find()["cuda"] == {
        "home": f"{tmp_path}/cuda-12.10",
        "version": "13.0.88",
        "lib": f"{tmp_path}/cuda-12.10/lib64",
    }
    cuda_home(tmp_path / "cuda")  # the alternative's link comes first
    assert cuda_toolchain.find()["cuda"]["home"] == f"{tmp_path}/cuda"


def test_the_default_cuda_search():
    assert cuda_toolchain.CUDA_HOMES == ("/usr/local/cuda", "/usr/local/cuda-[0-9]*")


def test_the_search_order_is_hpcx_then_debians_open_mpi():
    assert cuda_toolchain.MPI_HOMES == (
        "/opt/hpcx/ompi",
        "/opt/hpcx/*/ompi",
        "/usr/lib/x86_64-linux-gnu/openmpi",
        "/usr/lib/aarch64-linux-gnu/openmpi",
    )


def test_nccl_from_the_distribution_and_from_a_wheel(tmp_path, monkeypatch):
    # libnccl-dev: /usr/include/nccl.h, the library in lib/<triplet>.
    usr = nccl_home(tmp_path / "usr", library="libnccl.so", libdir="lib/x86_64-linux-gnu")
    assert cuda_toolchain.nccl([str(tmp_path / "nowhere"), str(usr)]) == {
        "home": str(usr),
        "version": "2.27.7",
        "lib": f"{usr}/lib/x86_64-linux-gnu",
        "library": "libnccl.so",
    }
    # The nvidia-nccl-cu13 wheel: site-packages/nvidia/nccl/{include,lib}, only .so.2.
    site = tmp_path / "site-packages"
    wheel = nccl_home(site / "nvidia" / "nccl")
    monkeypatch.setattr(sys, "path", ["", str(tmp_path / "other"), str(site)])
    monkeypatch.setattr(cuda_toolchain, "NCCL_HOMES", (str(tmp_path / "nowhere"),))
    assert cuda_toolchain.wheel_homes("nccl") == [str(wheel)]
    assert cuda_toolchain.find(nccl_home="")["nccl"] == {
        "home": str(wheel),
        "version": "2.27.7",
        "lib": f"{wheel}/lib",
        "library": "libnccl.so.2",
    }


def test_a_header_without_the_release_or_a_missing_library_is_no_nccl(tmp_path):
    no_version = nccl_home(tmp_path / "a")
    put(no_version / "include" / "nccl.h", "#define NCCL_MAJOR 2\n")
    no_library = tmp_path / "b"
    put(no_library / "include" / "nccl.h", NCCL_H)
    assert cuda_toolchain.nccl([str(no_version), str(no_library)]) is None


def test_nvcc_that_cannot_run_or_is_not_executable_is_no_toolkit(tmp_path):
    broken = cuda_home(tmp_path / "broken")
    put(broken / "bin" / "nvcc", "#!/nonexistent/interpreter\n", 0o755)
    plain = cuda_home(tmp_path / "plain")
    (plain / "bin" / "nvcc").chmod(stat.S_IRUSR)
    assert cuda_toolchain.cuda([str(broken), str(plain)]) is None


def test_the_command_prints_the_report_as_json(tmp_path, capsys):
    cuda = cuda_home(tmp_path / "cuda")
    nccl = nccl_home(tmp_path / "nccl")
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ["--cuda-home", str(cuda), "--nccl-home", str(nccl), "--mpi-home", str(empty)]
    assert cuda_toolchain.main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {
        "cuda": {"home": str(cuda), "version": "13.0.88", "lib": f"{cuda}/lib64"},
        "nccl": {
            "home": str(nccl),
            "version": "2.27.7",
            "lib": f"{nccl}/lib",
            "library": "libnccl.so.2",
        },
        "mpi": None,
    }


@pytest.mark.parametrize("text", ["", "nvcc: something else\n"])
def test_an_nvcc_that_names_no_release_has_no_version(tmp_path, text):
    cuda = cuda_home(tmp_path / "cuda")
    put(cuda / "bin" / "nvcc", f"#!/bin/sh\nprintf '%s' '{text}'\n", 0o755)
    assert cuda_toolchain.cuda([str(cuda)]) == {
        "home": str(cuda),
        "version": "",
        "lib": f"{cuda}/lib64",
    }
