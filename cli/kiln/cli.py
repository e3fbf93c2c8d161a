"""The `kiln` command line: a lazily loaded command table over the library.

Subcommands are imported only when used so `kiln --help` stays fast; errors of the
KilnError family are caught here, once, and printed as one line each.
"""

import importlib
import signal
import sys
import traceback

import click

from kiln import __version__, redact
from kiln.errors import ExitCode, KilnError
from kiln.printable import printable

COMMANDS = {
    "accounting": ("kiln.commands.accounting", "accounting", "Move Slurm accounting to a cluster."),
    "awx": (
        "kiln.commands.awx",
        "awx",
        "AWX / Automation Controller: the provision as a workflow.",
    ),
    "burn-in": ("kiln.commands.burn_in", "burn_in", "Load new nodes for hours; drain bad ones."),
    "provision": ("kiln.commands.playbook", "provision", "Provision the cluster (site.yml)."),
    "run": ("kiln.commands.playbook", "run", "Run one of Kiln's playbooks."),
    "drift": ("kiln.commands.drift", "drift", "Show what differs from the declared cluster."),
    "evidence": ("kiln.commands.evidence", "evidence", "Collect a node's evidence bundle."),
    "health": ("kiln.commands.health", "health", "Run the node health check on every node now."),
    "image": ("kiln.commands.images", "image", "Build a compute node image from the roles."),
    "inventory": ("kiln.commands.inventory", "inventory", "Check an inventory."),
    "judge": ("kiln.commands.judge", "judge", "Judge benchmark output Kiln did not run."),
    "lab": ("kiln.commands.lab", "lab", "The local podman lab cluster."),
    "nccl": ("kiln.commands.nccl", "nccl", "Show the NCCL settings in effect on each node."),
    "monitoring": (
        "kiln.commands.monitoring",
        "monitoring",
        "Show the alerts firing now, node by node.",
    ),
    "repair": ("kiln.commands.repair", "repair", "The repair loop: breaker, nodes, history."),
    "report": ("kiln.commands.report", "report", "Show and compare validation reports."),
    "rollout": ("kiln.commands.rollout", "rollout", "Apply a change to a live cluster in batches."),
    "runs": ("kiln.commands.runs", "runs", "List and show past runs."),
    "topology": ("kiln.commands.topology", "topology", "Generate Slurm topology."),
    "validate": ("kiln.commands.validate", "validate", "Validate the cluster; drain bad nodes."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        from kiln.commands import refuse_empty

        return refuse_empty(getattr(importlib.import_module(module), attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help text comes from the table so --help imports no subcommand module.
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kiln")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Kiln: provision GPU clusters with Ansible and validate them."""
    ctx.obj = {"debug": debug}


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (systemd, CI) ends Kiln as Ctrl-C does


def main() -> None:
    debug = "--debug" in sys.argv[1:]
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(prog_name="kiln", standalone_mode=False)
    except KilnError as exc:
        if debug:
            traceback.print_exc()
        # Messages quote what nodes, Slurm and files said: no secret, no control character.
        for line in exc.message.split("\n"):
            click.echo(f"kiln: error: {printable(redact.text(line))}", err=True)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("kiln: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.ClickException as exc:
        exc.show()
        sys.exit(int(ExitCode.BAD_INPUT))
    except KeyboardInterrupt:
        click.echo("kiln: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception as exc:  # a bug, not the operator's mistake: still one line
        if debug:
            traceback.print_exc()
        said = printable(redact.text(str(exc)))
        click.echo(
            f"kiln: internal error: {type(exc).__name__}: {said} (--debug shows where)", err=True
        )
        sys.exit(int(ExitCode.FAILED))
