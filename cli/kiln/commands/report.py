"""`kiln report list | show | compare`: validation reports kept by `kiln validate`."""

import sys
from pathlib import Path

import click

from kiln import files
from kiln.commands import warn
from kiln.printable import printable
from kiln.report import compare as comparing
from kiln.report import document, terminal
from kiln.run import display
from kiln_node import counted


@click.group()
def report() -> None:
    """Validation reports: list, show (re-render), compare two runs."""


@report.command("list")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def list_(json_mode: bool) -> None:
    """Every kept validation run, newest first."""
    found, problems = document.list_reports()
    for problem in problems:
        warn(f"{problem}; skipped")
    if json_mode:
        display.emit_json(
            [
                {
                    "id": r.id,
                    "started": r.started,
                    "verdict": r.verdict.value,
                    "nodes": len(r.nodes),
                    "profile": r.profile,
                }
                for r in found
            ]
        )
        return
    for r in found:
        nodes = counted(len(r.nodes), "node")
        line = f"{r.id}  {r.verdict.value:<9}  {nodes:>10}  {r.profile or '-'}"
        click.echo(printable(line))


@report.command()
@click.argument("run")
@click.option(
    "--format",
    "kind",
    type=click.Choice(["terminal", "json", "markdown", "html", "junit"]),
    default="terminal",
    show_default=True,
)
@click.option("-o", "--output", type=click.Path(), help="Write to this file instead.")
def show(run: str, kind: str, output: str | None) -> None:
    """Re-render one run (an id, a unique prefix, `latest`, or a report.json).

    Exit as the run did: 0 when every node passed, 5 when one failed, 3 when a node was
    not checked and none failed."""
    from kiln.report import html, junit, markdown

    if output:
        files.output_path(Path(output))
    found = document.load(run)
    if kind == "terminal" and not output:
        terminal.show(found)
    else:
        renderers = {
            "json": lambda r: _json(r),
            "markdown": markdown.render,
            "html": html.render,
            "junit": junit.render,
            "terminal": markdown.render,
        }
        text = renderers[kind](found)
        if output:
            files.write_output(Path(output), text)
        else:
            click.echo(text, nl=False)
    sys.exit(int(found.exit_code))


def _json(found: document.Report) -> str:
    return files.json_text(found.to_json()) + "\n"


@report.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--all", "show_all", is_flag=True, help="Also list tests that did not change.")
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON object.")
def compare(run_a: str, run_b: str, show_all: bool, json_mode: bool) -> None:
    """What got better or worse from RUN_A to RUN_B, per node and test (nodes that
    RUN_B names differently, after a migration, matched by role and place)."""
    changes = comparing.compare(document.load(run_a), document.load(run_b))
    if not show_all:
        changes = [c for c in changes if c.direction != "same"]
    if json_mode:
        display.emit_json(
            [
                {
                    "node": c.node,
                    "node_before": c.node_before,
                    "test": c.test,
                    "subject": c.subject,
                    "before": c.before,
                    "after": c.after,
                    "unit": c.unit,
                    "verdict_before": c.verdict_before,
                    "verdict_after": c.verdict_after,
                    "percent": c.percent,
                    "direction": c.direction,
                }
                for c in changes
            ]
        )
    else:
        terminal.show_changes(changes)
