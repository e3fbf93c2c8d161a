"""Click commands: each parses options, calls the library and renders the result."""

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from kiln import hostlist
from kiln.errors import ExitCode, InputError

if TYPE_CHECKING:
    from kiln.report.model import Report

# Every command that reads an inventory takes it the same way.
inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory_path",
    type=click.Path(path_type=Path),
    help="Inventory directory or hosts.yml (default: $KILN_INVENTORY, else the lab).",
)


def parse_nodes(text: str | None) -> list[str] | None:
    """--nodes as a Slurm hostlist (gpu[001-004]); None when not given."""
    if not text:
        return None
    try:
        return hostlist.expand(text)
    except ValueError as exc:
        raise InputError(f"--nodes {text!r}: {exc}") from None


class Whole(click.IntRange):
    """A whole number written in ASCII digits, in a range: Click's own int() also takes
    "٣" (an Arabic-Indic three), " 3 " and "3_0"."""

    name = "integer"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value):
            self.fail(f"{value!r} is not a whole number (digits 0-9)", param, ctx)
        return super().convert(value, param, ctx)


def stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Apply a group of Click options (listed top to bottom) as one decorator."""

    def apply(func: Any) -> Any:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def end_campaign(report: "Report", code: ExitCode, json_mode: bool) -> NoReturn:
    """A campaign's last steps as `kiln validate` and `kiln burn-in` show them: the
    report (as JSON, or for people with where its HTML is), then its exit code."""
    import sys

    from kiln.campaigns import campaign
    from kiln.report import terminal
    from kiln.run import display

    if json_mode:
        display.emit_json(report.to_json())
    else:
        terminal.show(report)
        click.echo(f"report: {campaign.report_path(report)}")
    sys.exit(int(code))
