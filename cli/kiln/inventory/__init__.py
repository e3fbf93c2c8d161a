"""Kiln inventories: read as Ansible reads them (kiln.inventory.reader), then checked
(kiln.inventory.checks) before anything runs; every problem is one line naming the file
or host, the variable and what was expected."""

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

from kiln.inventory.spec import KILN_GROUPS, ClusterSpec, Host, InventoryError

__all__ = ["KILN_GROUPS", "ClusterSpec", "Host", "InventoryError", "load"]


def load(path: Path | str | None = None, unpinned_ok: bool = False) -> ClusterSpec:
    """Read and check; raise InventoryError listing every problem found. With
    `unpinned_ok`, a release whose sha256 is still to be filled in is a warning, not a
    problem: `kiln inventory discover` and `pins` run before the pins are there."""
    # Imported here: the checks import every module that owns a variable, and the model
    # alone (ClusterSpec, for the library and the roles' filters) needs none of them.
    from kiln import pinned
    from kiln.inventory import checks, reader

    with _collector_paused():
        spec, definitions = reader.read(path)
        problems = checks.run(spec, definitions)
    if unpinned_ok:
        spec.warnings += [p for p in problems if pinned.PINS_HINT in p]
        problems = [p for p in problems if pinned.PINS_HINT not in p]
    if path is not None:  # the command that fills a pin in, as the operator would type it
        problems = [p.replace("-i INVENTORY", f"-i {path}") for p in problems]
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
