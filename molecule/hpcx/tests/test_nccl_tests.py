"""nccl-tests built by the nccl_tests role on hpcx-lmod (a compute node without a GPU)
from the STAND-IN source (tests/standins.py: nccl-tests' build interface, programs that
call NCCL, the CUDA runtime and MPI) against CUDA 13 and NCCL from NVIDIA's PyPI wheels
and the distribution's Open MPI: every program built and linked, started without
LD_LIBRARY_PATH, and the stamp that decides a rebuild. hpcx-modules is a login node:
nothing built there."""

import json

import pytest

testinfra_hosts = ["podman://hpcx-lmod"]
VERSION = "2.19.6"
BUILD = f"/opt/nccl-tests/{VERSION}"
OPENMPI = "/usr/lib/x86_64-linux-gnu/openmpi"
# The node's python3 (whose site directory, as pip as root has it, holds the wheels) and
# Open MPI, by the release hpcx-lmod runs (scripts/molecule.sh: KILN_MOLECULE_DISTRO).
RELEASES = {
    "trixie": ("3.13", "5.0.7"),
    "bookworm": ("3.11", "4.1.4"),
    "noble": ("3.12", "4.1.6"),
    "jammy": ("3.10", "4.1.2"),
}


@pytest.fixture
def release(host) -> tuple[str, str]:
    return RELEASES[host.check_output(". /etc/os-release && echo $VERSION_CODENAME")]


@pytest.fixture
def site(release) -> str:
    return f"/usr/local/lib/python{release[0]}/dist-packages"


PROGRAMS = ["all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall"]
PROGRAMS += ["alltoallv", "scatter", "gather", "sendrecv", "hypercube"]


def test_every_program_is_built_and_nothing_else_is_left_in_bin(host):
    listed = host.run(f"ls -A {BUILD}/bin").stdout.split()
    assert listed == sorted(f"{name}_perf" for name in PROGRAMS)
    for name in PROGRAMS:
        program = host.file(f"{BUILD}/bin/{name}_perf")
        assert (program.is_file, program.user, program.mode) == (True, "root", 0o755)


def test_the_stamp_names_what_the_build_was_made_from(host, site, release):
    stamp = {
        "archs": [],  # no GPU: nccl-tests' own list
        "cuda": {"home": "/usr/local/cuda", "version": "13.0.88"},
        "mpi": {"home": OPENMPI, "version": release[1]},
        "nccl": {"home": f"{site}/nvidia/nccl", "version": "2.27.7"},
        "nccl_tests": VERSION,
    }
    text = host.file(f"{BUILD}/kiln-build.json").content_string
    assert text == json.dumps(stamp, indent=2, sort_keys=True) + "\n"


def test_the_programs_find_nccl_mpi_and_cuda_without_ld_library_path(host, site):
    nccl = f"{site}/nvidia/nccl"
    program = f"{BUILD}/bin/all_reduce_perf"
    runpath = host.run(f"readelf -d {program} | grep -E 'RPATH|RUNPATH'").stdout.strip()
    assert runpath.split(None, 1)[1] == (
        f"(RUNPATH)            Library runpath: [{nccl}/lib:{OPENMPI}/lib:/usr/local/cuda/lib64]"
    )
    linked = host.run(f"env -u LD_LIBRARY_PATH ldd {program}")
    assert linked.rc == 0 and "not found" not in linked.stdout
    resolved = {
        words[0]: host.run(f"realpath {words[2]}").stdout.strip()
        for words in (line.split() for line in linked.stdout.splitlines())
        if words[0] in ("libnccl.so.2", "libmpi.so.40", "libcudart.so.13")
    }
    assert resolved == {
        "libnccl.so.2": f"{nccl}/lib/libnccl.so.2",
        "libmpi.so.40": host.run("realpath /usr/lib/x86_64-linux-gnu/libmpi.so.40").stdout.strip(),
        "libcudart.so.13": f"{site}/nvidia/cu13/lib/libcudart.so.13",
    }
    # The build's own NCCL_HOME for -lnccl: links to the wheel (only libnccl.so.2 there).
    assert host.file(f"{BUILD}/nccl/lib/libnccl.so").linked_to == f"{nccl}/lib/libnccl.so.2"
    assert host.file(f"{BUILD}/nccl/include").linked_to == f"{nccl}/include"


def test_a_program_runs_its_calls_and_fails_without_a_gpu(host):
    done = host.run(f"env -u LD_LIBRARY_PATH {BUILD}/bin/sendrecv_perf")
    assert (done.rc, done.stdout) == (
        1,
        f"# sendrecv_perf: nccl-tests {VERSION} STAND-IN built by Kiln's tests, not NVIDIA's; "
        "NCCL 2.27.7, MPI yes, CUDA devices 0 (cudaErrorInsufficientDriver)\n",
    )
