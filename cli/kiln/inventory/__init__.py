"""Kiln inventories: read as Ansible reads them (kiln.inventory.reader), then checked
(kiln.inventory.checks) before anything runs; every problem is one line naming the file
or host, the variable and what was expected."""

from pathlib import Path

from kiln.inventory import checks, reader
from kiln.inventory.model import KILN_GROUPS, ClusterSpec, Host, InventoryError

__all__ = ["KILN_GROUPS", "ClusterSpec", "Host", "InventoryError", "load"]


def load(path: Path | str | None = None) -> ClusterSpec:
    """Read and check; raise InventoryError listing every problem found."""
    spec, definitions = reader.read(path)
    problems = checks.run(spec, definitions)
    if problems:
        raise InventoryError(problems)
    return spec
