"""HPC-X from the scenario's STAND-IN tarball (its layout, not NVIDIA's software):
unpacked whole where the role puts it, its pkg-config files pointing there, its own
module file loaded through Kiln's mpi/hpcx under Lmod (hpcx-lmod) and Tcl Modules
(hpcx-modules), and on hpcx-modules the Open MPI rebuild against the system PMIx."""

import pytest

testinfra_hosts = ["podman://hpcx-lmod", "podman://hpcx-modules"]
VERSION = "2.22.1"
HOME = f"/opt/hpcx/{VERSION}"
# Debian 13 and 12 by default; Ubuntu 24.04 and 22.04 (scripts/molecule.sh --os ubuntu).
BUILD = {"hpcx-lmod": "ubuntu24.04", "hpcx-modules": "ubuntu22.04"}
PMIX_PREFIX = "/usr/lib/x86_64-linux-gnu/pmix2"


def login(host, script: str):
    """A user's login shell: /etc/profile.d sets up `module` and its search path."""
    return host.run(f"bash -lc '{script}'")


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


# HPC-X's top level (docs/mpi.md), and Kiln's record of what it unpacked.
TOP = ["clusterkit", "hcoll", "hpcx-init-ompi.sh", "hpcx-init.sh", "modulefiles"]
TOP += ["nccl_rdma_sharp_plugin", "ompi", "sharp", "sources", "ucc", "ucx", "utils"]


def test_the_flavour_of_the_node_is_unpacked_whole_in_place(host, name):
    stand_in = host.file(f"{HOME}/sources/STAND-IN")
    flavour = f"gcc-inbox-{BUILD[name]}-cuda12-x86_64"
    assert stand_in.content_string == (
        f"Kiln's stand-in for NVIDIA HPC-X {VERSION} ({flavour}): the layout, not the software.\n"
    )
    # Beside it: Kiln's record, and hpcx_rebuild.sh's build where it ran.
    added = [".kiln-hpcx"] + (["hpcx-rebuild"] if name == "hpcx-modules" else [])
    assert sorted(host.run(f"ls -A {HOME}").stdout.split()) == sorted(TOP + added)
    assert host.file(HOME).user == "root"
    # Nothing beside it: no unpack directory, no downloaded tarball.
    assert host.run("ls -A /opt/hpcx").stdout.split() == [VERSION]
    record = host.file(f"{HOME}/.kiln-hpcx").content_string.strip()
    assert len(record) == 64


@pytest.mark.parametrize("part", ["ompi", "ucx", "hcoll", "sharp"])
def test_pkg_config_files_point_at_the_installed_tree(host, part):
    pc = host.file(f"{HOME}/{part}/lib/pkgconfig/{part}.pc").content_string
    assert pc.splitlines() == [
        f"prefix={HOME}/{part}",
        "exec_prefix=${prefix}",
        "libdir=${exec_prefix}/lib",
        "includedir=${prefix}/include",
        "",
        f"Name: {part}",
        f"Description: stand-in for HPC-X's {part}",
        f"Version: {VERSION}",
        f"Libs: -L${{libdir}} -l{part}",
        "Cflags: -I${includedir}",
    ]


def test_the_module_files_kiln_writes(host, name):
    files = host.run("ls -A /opt/kiln/modulefiles/mpi").stdout.split()
    expected = {
        "hpcx-lmod": [".modulerc", "hpcx", "openmpi"],
        "hpcx-modules": ["hpcx", "hpcx-pmix"],
    }
    assert sorted(files) == expected[name]
    hpcx = host.file("/opt/kiln/modulefiles/mpi/hpcx")
    assert hpcx.mode == 0o644
    # Ubuntu 22.04's Modules (hpcx-modules) has no family command: conflict alone.
    release = host.check_output(". /etc/os-release && echo $VERSION_CODENAME")
    family = [] if (name, release) == ("hpcx-modules", "jammy") else ["family mpi"]
    assert hpcx.content_string.splitlines() == [
        "#%Module1.0",
        f"## Written by Kiln (role hpcx): NVIDIA HPC-X {VERSION} (its own Open MPI)",
        f"module-whatis {{NVIDIA HPC-X {VERSION} (its own Open MPI)}}",
        *family,
        "conflict mpi",
        f"setenv MPI_HOME {HOME}/ompi",
        f"module use {HOME}/modulefiles",
        "module load hpcx",
    ]


def test_module_avail_lists_the_mpis(host, name):
    listed = login(host, "module -t avail 2>&1").stdout.split()
    wanted = {
        "hpcx-lmod": {"mpi/hpcx", "mpi/openmpi"},
        "hpcx-modules": {"mpi/hpcx", "mpi/hpcx-pmix"},
    }
    assert wanted[name] <= {entry.removesuffix("(default)") for entry in listed}


def test_mpi_hpcx_loads_the_module_file_hpcx_ships(host):
    loaded = login(
        host, "module load mpi/hpcx && echo $HPCX_DIR $MPI_HOME $OPAL_PREFIX && ompi_info"
    )
    assert loaded.rc == 0, loaded.stderr
    assert loaded.stdout.splitlines() == [
        f"{HOME} {HOME}/ompi {HOME}/ompi",
        f"ompi: Kiln stand-in for HPC-X {VERSION}",
    ]


def test_lmod_swaps_hpcx_for_openmpi(host, name):
    if name != "hpcx-lmod":
        pytest.skip("Lmod runs on hpcx-lmod")
    swapped = login(
        host,
        "module load mpi/hpcx; module load mpi/openmpi;"
        " echo ${HPCX_DIR:-none} $MPI_HOME; module -t list 2>&1",
    )
    assert swapped.rc == 0, swapped.stderr
    assert swapped.stdout.split() == ["none", "/usr/lib/x86_64-linux-gnu/openmpi", "mpi/openmpi"]


def test_the_pmix_rebuild_and_its_module(host, name):
    if name != "hpcx-modules":
        pytest.skip("HPC-X is rebuilt on hpcx-modules")
    config = host.file(f"{HOME}/hpcx-rebuild/ompi-extra-config").content_string
    assert config == f"--with-pmix={PMIX_PREFIX} --enable-orterun-prefix-by-default\n"
    assert host.file(f"{HOME}/hpcx-rebuild/.kiln-pmix").content_string == f"{PMIX_PREFIX}\n"
    loaded = login(host, "module load mpi/hpcx-pmix && echo $MPI_HOME && ompi_info")
    assert loaded.rc == 0, loaded.stderr
    assert loaded.stdout.splitlines() == [
        f"{HOME}/hpcx-rebuild",
        f"Open MPI (Kiln stand-in, rebuilt): PMIx {PMIX_PREFIX}",
    ]
    # Tcl Modules refuses a second MPI of the family until the first is unloaded.
    both = login(host, "module load mpi/hpcx-pmix; module load mpi/hpcx")
    assert both.rc != 0
    assert "Module cannot be loaded due to a conflict" in both.stderr
