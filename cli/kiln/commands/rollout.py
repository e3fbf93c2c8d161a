"""`kiln rollout`: apply the inventory's declared state to a live cluster in batches."""

from pathlib import Path

import click

from kiln import hostlist, inventory, lock
from kiln.commands import end_campaign, inventory_option, parse_nodes
from kiln.errors import InputError, KilnError
from kiln.printable import printable
from kiln.rollout.plan import BadValue
from kiln.rollout.progress import Resumable
from kiln.run import display
from kiln.validation import registry


@click.command()
@inventory_option
@click.option("--nodes", help="Only these compute nodes (a Slurm hostlist, e.g. gpu[001-004]).")
@click.option(
    "--max-unavailable",
    help="Compute nodes out of service at once, counting those already out: a count (2) or "
    "a share (10%%). Default: the inventory's rollout_max_unavailable, else 10%%.",
)
@click.option(
    "--max-failures",
    type=int,
    default=1,
    show_default=True,
    help="Stop before the next batch once this many nodes have failed.",
)
@click.option("--wait-for-jobs", help="How long a batch waits for its jobs: 2h, 45m, 1h30m.")
@click.option(
    "--deadline", help="When a batch stops waiting for its jobs: 18:00, 2026-11-28T06:00."
)
@click.option(
    "--at-deadline",
    type=click.Choice(["skip", "requeue"]),
    default="skip",
    show_default=True,
    help="At the deadline: leave the busy nodes out of this rollout, or requeue their jobs.",
)
@click.option("-t", "--tags", help="Apply only these roles or tasks (comma-separated tags).")
@click.option(
    "--suite",
    "suites",
    help=f"The validation suites each batch runs: {', '.join(registry.NAMES)} (default all).",
)
@click.option("--profile", help="Reference numbers for the validation (as kiln validate).")
@click.option("--dry-run", is_flag=True, help="Print the plan and the batches; change nothing.")
@click.option(
    "--resume", "resume", metavar="ID", help="Carry on with a rollout cut short or stopped."
)
@click.option("--json", "json_mode", is_flag=True, help="Print the report as one JSON object.")
def rollout(
    inventory_path: Path | None,
    nodes: str | None,
    max_unavailable: str | None,
    max_failures: int,
    wait_for_jobs: str | None,
    deadline: str | None,
    at_deadline: str,
    tags: str | None,
    suites: str | None,
    profile: str | None,
    dry_run: bool,
    resume: str | None,
    json_mode: bool,
) -> None:
    """Apply the declared state (site.yml, or --tags) to the compute nodes in batches,
    under running jobs: each batch is drained, waits for its jobs, is changed (and
    rebooted through Slurm where a driver changed), checked (kiln-health, kiln
    validate) and resumed. Controllers and login nodes go first, one at a time.

    Exit 0 when every node passed, 5 when a node failed (it stays drained; the rollout
    stops at --max-failures), 3 when a node was left out (not checked), 4 when a change
    failed outside the batch (resumable), 7 when another Kiln command
    holds the inventory, 130 when interrupted (--resume ID carries on)."""
    from kiln.campaigns import rollout as rolling
    from kiln.commands.validate import _suites

    given = [nodes, max_unavailable, wait_for_jobs, deadline, tags, suites, profile, dry_run,
             max_failures != 1, at_deadline != "skip"]  # fmt: skip
    if resume and any(given):
        raise InputError("--resume ID carries on with the rollout's own options: give no other")
    spec = inventory.load(inventory_path)
    say = (
        (lambda line: None)
        if json_mode
        else (lambda line: click.echo(printable(f"rollout: {line}"), err=True))
    )
    request = rolling.Request(
        inventory=spec,
        nodes=parse_nodes(nodes),
        max_unavailable=max_unavailable,
        max_failures=max_failures,
        wait_for_jobs=wait_for_jobs,
        deadline=deadline,
        at_deadline=at_deadline,
        tags=tags,
        suites=_suites(suites),
        profile=profile,
        resume=resume,
        display=display.for_output(json_mode),
        say=say,
    )
    if tags:
        from kiln import selection
        from kiln.run.execute import resolve_playbook

        selection.check(resolve_playbook("site.yml"), spec, None, tags, None)
    try:
        with lock.held(spec.path, "kiln rollout") as request.lock:
            campaign = rolling.Rollout(request)
            if not resume:
                plan = campaign.make_plan()
                if dry_run:
                    _show_plan(campaign, plan, json_mode)
                    return
                for line in plan.lines():
                    say(line)
                campaign.start(plan)
            say(f"id {campaign.record.id}")
            report, code = campaign.run()
    except BadValue as exc:  # a value of an option: named as the operator gave it
        given = " and ".join(OPTIONS[s] for s in exc.setting.split("+"))
        raise InputError(f"{given}{': ' if '+' in exc.setting else ' '}{exc.message}") from None
    except Resumable as exc:
        raise KilnError(
            f"{exc.message}: `kiln rollout --resume {exc.rollout}` carries on", exc.exit_code
        ) from None
    end_campaign(report, code, json_mode)


OPTIONS = {
    "max_unavailable": "--max-unavailable",
    "max_failures": "--max-failures",
    "wait_for_jobs": "--wait-for-jobs",
    "deadline": "--deadline",
}


def _show_plan(campaign, plan, json_mode: bool) -> None:
    if json_mode:
        display.emit_json(
            {"plan": plan.to_dict(), "max_unavailable": campaign.options.max_unavailable}
        )
        return
    click.echo(
        f"rollout plan for {hostlist.compress(campaign.compute)} "
        f"(at most {campaign.options.max_unavailable} out of service at once):"
    )
    for line in plan.lines():  # hosts' reasons, as Slurm and the nodes gave them
        click.echo(printable(f"  {line}"))
