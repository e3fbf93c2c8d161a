"""kiln.roles.mpi: the module files the mpi role writes, and the module path it accepts."""

import pytest

from kiln.roles import mpi


def test_debian_open_mpi_module_whole_file():
    files = mpi.module_files([mpi.openmpi("4.1.4-3+b1")])
    assert files == {
        "mpi/openmpi": (
            "#%Module1.0\n"
            "## Written by Kiln (role mpi): Open MPI 4.1.4 from the distribution; start ranks"
            " with srun (PMIx)\n"
            "module-whatis {Open MPI 4.1.4 from the distribution; start ranks with srun (PMIx)}\n"
            "family mpi\n"
            "conflict mpi\n"
            "setenv MPI_HOME /usr/lib/x86_64-linux-gnu/openmpi\n"
        ),
        "mpi/.modulerc": (
            "#%Module1.0\n"
            "## Written by Kiln (role mpi): `module load mpi` loads mpi/openmpi\n"
            "module-version mpi/openmpi default\n"
        ),
    }


def test_a_module_with_its_own_commands_and_variables():
    module = mpi.MpiModule(
        name="hpcx",
        summary="HPC-X 2.21",
        home="/opt/hpcx/2.21/ompi",
        prepend=(
            ("PATH", "/opt/hpcx/2.21/ompi/bin"),
            ("LD_LIBRARY_PATH", "/opt/hpcx/2.21/ompi/lib"),
        ),
        setenv=(("HPCX_HOME", "/opt/hpcx/2.21"),),
    )
    assert mpi.modulefile(module).splitlines()[5:] == [
        "setenv MPI_HOME /opt/hpcx/2.21/ompi",
        "setenv HPCX_HOME /opt/hpcx/2.21",
        "prepend-path PATH /opt/hpcx/2.21/ompi/bin",
        "prepend-path LD_LIBRARY_PATH /opt/hpcx/2.21/ompi/lib",
    ]
    # no default named among the modules: no .modulerc
    assert list(mpi.module_files([module])) == ["mpi/hpcx"]


def test_no_mpi_no_files():
    assert mpi.module_files([]) == {}


@pytest.mark.parametrize(
    ("debian", "upstream"),
    [
        ("4.1.4-3+b1", "4.1.4"),
        ("5.0.7-1", "5.0.7"),
        ("1:5.0.7-1~bpo12+1", "5.0.7"),
        ("4.1.6", "4.1.6"),
    ],
)
def test_upstream_version(debian, upstream):
    assert mpi.upstream_version(debian) == upstream


@pytest.mark.parametrize("path", ["/opt/kiln/modulefiles", "/shared/apps/modulefiles", "/opt/x+y"])
def test_module_paths_accepted(path):
    mpi.check_module_path(path)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("modulefiles", "expected an absolute path"),
        ("/opt/my modules", "expected an absolute path"),
        ("/opt/{x}", "expected an absolute path"),
        ("/opt/$HOME", "expected an absolute path"),
        ("/", "give Kiln a directory of its own"),
        ("/etc", "give Kiln a directory of its own"),
        ("/opt/kiln/../../etc", "with no '.' or '..' part"),
        ("/opt/kiln/", "no '/' at the end"),
        ("//opt/kiln", "no '//'"),
    ],
)
def test_module_paths_refused(path, why):
    with pytest.raises(mpi.MpiError, match=r"^mpi_module_path ") as caught:
        mpi.check_module_path(path)
    assert why in str(caught.value)


def test_module_systems_read_their_search_path_files():
    assert mpi.MODULESPATH == {
        "lmod": "/etc/lmod/modulespath",
        "environment-modules": "/etc/environment-modules/modulespath",
    }


def test_without_the_family_command_conflict_alone_keeps_a_second_mpi_out():
    """Ubuntu 22.04's Modules (5.0.1) has no `family` command and stops at the line: the
    mpi role's vars/Ubuntu-22.yml leaves it out there for environment-modules."""
    files = mpi.module_files([mpi.openmpi("4.1.2-2ubuntu1")], family=False)
    assert files["mpi/openmpi"] == (
        "#%Module1.0\n"
        "## Written by Kiln (role mpi): Open MPI 4.1.2 from the distribution; start ranks"
        " with srun (PMIx)\n"
        "module-whatis {Open MPI 4.1.2 from the distribution; start ranks with srun (PMIx)}\n"
        "conflict mpi\n"
        "setenv MPI_HOME /usr/lib/x86_64-linux-gnu/openmpi\n"
    )
