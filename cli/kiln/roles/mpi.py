"""MPI on the nodes: the environment-module files for the MPIs Kiln installs, and the
module system that finds them. The mpi role writes what this module renders, and
`kiln inventory check` refuses what it would refuse."""

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kiln import formats

# Each module system's file of initial MODULEPATH entries, one path a line, read by
# the login scripts both install in /etc/profile.d.
MODULESPATH = {
    "lmod": "/etc/lmod/modulespath",
    "environment-modules": "/etc/environment-modules/modulespath",
}
# Every MPI module is mpi/<name> in one family: Lmod swaps one for another, Modules
# (environment-modules) refuses to load a second one until the first is unloaded.
FAMILY = "mpi"
DEFAULT_MPI = "openmpi"
# Debian's Open MPI lives under the multiarch library directory; its commands are
# /usr/bin alternatives (mpicc, mpirun), on every PATH already.
DEBIAN_OPENMPI_HOME = "/usr/lib/x86_64-linux-gnu/openmpi"
# Kiln's MPI check, built on each node by the mpi role (its source beside it) and
# started by `kiln validate`.
CHECK_PROGRAM = "/usr/local/libexec/kiln/kiln-mpi-check"
# Paths go into Tcl unquoted and into shells: no spaces, quotes, braces or '$'.


class MpiError(ValueError):
    """An MPI setting that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class MpiModule:
    name: str  # mpi/<name>
    summary: str  # module-whatis, one line
    home: str  # MPI_HOME
    prepend: tuple[tuple[str, str], ...] = ()  # (variable, directory) for prepend-path
    setenv: tuple[tuple[str, str], ...] = ()
    # A module the MPI ships itself (HPC-X's hpcx), loaded from its own directory: Lmod
    # loads no module by file path, both systems load one by name from a used path.
    use: str = ""
    load: str = ""


MARK = "## Written by Kiln (role mpi)"  # how the role tells its files from the site's


def modulefile(module: MpiModule, mark: str = MARK, family: bool = True) -> str:
    """A Tcl module file: Lmod reads it as well as Modules does, so one file serves
    both systems. `mark` names the role that writes it. `family`: whether the module
    system knows the family command (Modules 5.1 and later, every Lmod; Ubuntu 22.04's
    Modules 5.0 stops at it): without it, `conflict` alone keeps a second MPI out."""
    lines = [
        "#%Module1.0",
        f"{mark}: {module.summary}",
        f"module-whatis {{{module.summary}}}",
        *([f"family {FAMILY}"] if family else []),
        f"conflict {FAMILY}",
        f"setenv MPI_HOME {module.home}",
    ]
    lines += [f"setenv {name} {value}" for name, value in module.setenv]
    lines += [f"prepend-path {name} {path}" for name, path in module.prepend]
    if module.use:
        lines += [f"module use {module.use}", f"module load {module.load}"]
    return "\n".join(lines) + "\n"


def upstream_version(debian_version: str) -> str:
    """4.1.4 from Debian's 4.1.4-3+b1 (an epoch, 1:, dropped too)."""
    return debian_version.split(":", 1)[-1].rsplit("-", 1)[0]


def openmpi(debian_version: str) -> MpiModule:
    version = upstream_version(debian_version)
    return MpiModule(
        name=DEFAULT_MPI,
        summary=f"Open MPI {version} from the distribution; start ranks with srun (PMIx)",
        home=DEBIAN_OPENMPI_HOME,
    )


def module_files(
    modules: list[MpiModule], default: str = DEFAULT_MPI, family: bool = True
) -> dict[str, str]:
    """Every file under the site module path, by path relative to it: one per MPI and
    the family's .modulerc naming the default (`module load mpi`)."""
    files = {f"{FAMILY}/{m.name}": modulefile(m, family=family) for m in modules}
    if any(m.name == default for m in modules):
        files[f"{FAMILY}/.modulerc"] = (
            f"#%Module1.0\n{MARK}: `module load {FAMILY}` loads "
            f"{FAMILY}/{default}\nmodule-version {FAMILY}/{default} default\n"
        )
    return files


def check_module_path(path: Any, _groups: Any = None) -> None:
    if not isinstance(path, str) or formats.absolute_path(path):
        raise MpiError(f"mpi_module_path {path!r}: {formats.PATH_RULE}")
    if PurePosixPath(path) in (PurePosixPath("/"), PurePosixPath("/etc"), PurePosixPath("/usr")):
        raise MpiError(f"mpi_module_path {path!r}: give Kiln a directory of its own")


INVENTORY_CHECKS = {"mpi_module_path": (str, check_module_path)}
