"""Click commands: each parses options, calls the library and renders the result."""

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from kiln import hostlist, redact
from kiln.errors import ExitCode, InputError
from kiln.printable import printable

if TYPE_CHECKING:
    from kiln.report.document import Report

# Every command that reads an inventory takes it the same way.
inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory_path",
    type=click.Path(path_type=Path),
    help="Inventory directory or hosts.yml (default: $KILN_INVENTORY, else the lab).",
)


def parse_nodes(text: str | None) -> list[str] | None:
    """--nodes as a Slurm hostlist (gpu[001-004]); None when not given. A list that
    names no node (",") is refused: it never means "every node"."""
    if text is None:
        return None
    try:
        found = hostlist.expand(text)
    except ValueError as exc:
        raise InputError(f"--nodes {text!r}: {exc}") from None
    if not found:
        raise InputError(f"--nodes {text!r}: names no node")
    return found


def refuse_empty(command: click.Command) -> click.Command:
    """Refuse a blank value for every option and argument of COMMAND and its
    subcommands (exit 2, one line), before any is used: read as "not given", a
    script's unset variable (`--nodes "$NEW"`, `--resume "$ID"`) would mean every node
    or a new rollout. kiln.cli applies it to each command it loads, so a new option
    cannot forget it. Flags take no value; a command line passed on (`lab ssh HOST --
    ARGS`) is not Kiln's."""
    for param in command.params:
        if (
            getattr(param, "is_flag", False)
            or getattr(param, "count", False)
            or isinstance(param.type, click.types.UnprocessedParamType)
            or getattr(param, "_kiln_refuses_empty", False)
        ):
            continue
        param.process_value = _non_blank(param, param.process_value)  # type: ignore[method-assign]
        param._kiln_refuses_empty = True  # type: ignore[attr-defined]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            refuse_empty(sub)
    return command


def _non_blank(param: click.Parameter, process: Callable[..., Any]) -> Callable[..., Any]:
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)

    def checked(ctx: click.Context, value: Any) -> Any:
        values = value if isinstance(value, tuple | list) else (value,)
        blank = [v for v in values if isinstance(v, str) and not v.strip()]
        if blank and ctx.get_parameter_source(param.name or "") in given:
            if isinstance(param, click.Option):
                name = max(param.opts, key=len)
                raise InputError(
                    f"{name} {blank[0]!r}: an empty value is refused: give one, or leave {name} out"
                )
            raise InputError(
                f"{param.human_readable_name} {blank[0]!r}: an empty value is refused: give one"
            )
        return process(ctx, value)

    return checked


class Whole(click.IntRange):
    """A whole number written in ASCII digits, in a range: Click's own int() also takes
    "٣" (an Arabic-Indic three), " 3 " and "3_0"."""

    name = "integer"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value):
            self.fail(f"{value!r} is not a whole number (digits 0-9)", param, ctx)
        return super().convert(value, param, ctx)


def warn(message: str) -> None:
    """`kiln: warning: MESSAGE` on stderr: one line, whatever the file or node it quotes
    holds (no control character, no URL's password)."""
    click.echo(f"kiln: warning: {printable(redact.text(message))}", err=True)


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
