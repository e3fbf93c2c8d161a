"""Filters that hand the mpi role's settings to kiln.roles.mpi: the role and `kiln inventory
check` judge them the same way, and one place renders the module files."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles import mpi


def kiln_mpi_module_files(openmpi_version, module_path, family=True):
    """The module files under module_path, as kiln.cluster.write_files entries (their
    text shown in a diff); openmpi_version is Debian's version of openmpi-bin, or ""
    where Open MPI is not installed; family: whether the module system knows Tcl's
    family command (the role's vars per release)."""
    modules = [mpi.openmpi(openmpi_version)] if openmpi_version else []
    return [
        {"path": f"{module_path}/{name}", "content": text, "diff": True}
        for name, text in mpi.module_files(modules, family=bool(family)).items()
    ]


def kiln_mpi_layout(name, module_path):
    """Where things go: the module system's search-path file, the systems not chosen,
    and Kiln's MPI check; after checking the module path."""
    try:
        mpi.check_module_path(module_path)
    except mpi.MpiError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return {
        "modulespath": mpi.MODULESPATH[name],
        "others": sorted(set(mpi.MODULESPATH) - {name}),
        "check_program": mpi.CHECK_PROGRAM,
    }


class FilterModule:
    def filters(self):
        return {
            "kiln_mpi_module_files": kiln_mpi_module_files,
            "kiln_mpi_layout": kiln_mpi_layout,
        }
