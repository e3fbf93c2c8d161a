"""Kiln inventories: read as Ansible reads them (kiln.inventory.reader), then checked
(kiln.inventory.checks) before anything runs; every problem is one line naming the file
or host, the variable and what was expected."""

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

from kiln.inventory.model import KILN_GROUPS, ClusterSpec, Host, InventoryError

__all__ = ["KILN_GROUPS", "ClusterSpec", "Host", "InventoryError", "load"]


def load(path: Path | str | None = None) -> ClusterSpec:
    """Read and check; raise InventoryError listing every problem found."""
    # Imported here: the checks import every module that owns a variable, and the model
    # alone (ClusterSpec, for the library and the roles' filters) needs none of them.
    from kiln.inventory import checks, reader

    with _collector_paused():
        spec, definitions = reader.read(path)
        problems = checks.run(spec, definitions)
    if problems:
        raise InventoryError(problems)
    return spec


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading a large inventory makes millions of objects (YAML nodes, values, hosts),
    none of them in a reference cycle; Python's cycle collector would walk them again
    and again as they pile up: 100,000 hosts took 2.5 times as long with it on.
    Reference counting still frees what is dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
