"""Click commands: each parses options, calls the library and renders the result."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

# Every command that reads an inventory takes it the same way.
inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory_path",
    type=click.Path(path_type=Path),
    help="Inventory directory or hosts.yml (default: $KILN_INVENTORY, else the lab).",
)


def stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Apply a group of Click options (listed top to bottom) as one decorator."""

    def apply(func: Any) -> Any:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply
