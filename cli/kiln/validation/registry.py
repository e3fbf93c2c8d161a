"""The validate suites, one entry each: what a suite is called, the
builder of its command lines (kiln.validation.suites), what it needs on the nodes
(kiln_node.prerequisites looks for it), the result files it writes
(kiln.validation.results), its collector (a function of kiln.validation.collect, named
here so that the role's filters load no parser) and the profile
section that sizes it (kiln.validation.profiles).

Everything that lists the suites derives from SUITES: `kiln validate --suite` (its help
and its choices), the campaign's default, `kiln burn-in`'s suites between its stress
rounds, and, through tests/unit/test_validate_registry.py, the validate role's argument
spec, defaults and task files. The role runs the suites asked for in this order
(roles/validate/tasks/controller.yml includes `tasks/<name>.yml` for each).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kiln.validation import results as layout
from kiln.validation import suites
from kiln.validation.suites import Found, Settings


@dataclass(frozen=True)
class Suite:
    name: str
    commands: Callable[[Settings, Mapping], dict[str, Any]]  # name -> argv
    needs: tuple[str, ...]  # what kiln_node.prerequisites looks for on each node
    records: tuple[str, ...]  # its result files (results.py's names; per node: a kind)
    collector: str  # its function in kiln.validation.collect: (found, results, tested)
    section: str = ""  # its sizes in a profile (profiles.SECTIONS); "" for none
    burn_in: bool = False  # it runs between a burn-in's stress rounds


SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            "slurm",
            suites.slurm_commands,
            needs=("mpi_check",),
            records=(layout.SRUN, layout.MPI, layout.MUNGE),
            collector="slurm_suite",
        ),
        Suite(
            "storage",
            suites.storage_commands,
            needs=(),
            records=(layout.STORAGE_STEPS, "storage", "cold_import"),
            collector="storage_suite",
            section="storage",
            burn_in=True,
        ),
        Suite(
            "collectives",
            suites.collectives_commands,
            needs=("torch", "nccl_tests"),
            records=(
                layout.COLLECTIVES_STEPS,
                layout.NCCL_TESTS,
                "collectives_node",
                "collectives_all",
            ),
            collector="collectives_suite",
            section="collectives",
            burn_in=True,
        ),
    )
}
NAMES = tuple(SUITES)
# Between a burn-in's stress rounds (roles/validate/tasks/burn_in.yml runs them).
BURN_IN = tuple(s.name for s in SUITES.values() if s.burn_in)
# What a burn-in's stress needs on every node, besides its suites' needs.
STRESS_NEEDS = ("torch",)


def help_text() -> str:
    """`--suite`'s help."""
    return f"Comma-separated: {', '.join(NAMES)} (default all)."


def chosen(names: list[str]) -> list[Suite]:
    """The suites named, in the registry's order (unknown names are the CLI's to refuse)."""
    return [suite for name, suite in SUITES.items() if name in names]


def look(settings: Settings) -> list[str]:
    """What a node under test is looked at for (kiln_node.prerequisites' argv): the
    needs of the suites asked for, and torch for a burn-in's stress."""
    needs = {need for suite in chosen(settings.suites) for need in suite.needs}
    if settings.burn_in_step:
        needs.update(STRESS_NEEDS)
    return suites.look(settings, needs)


def commands(settings: Settings, shared: Mapping) -> dict[str, Any]:
    """Every suite's command lines that are known once the nodes are chosen, each one
    argv, by name (each suite's builder: the slurm suite's srun_time, mpi and the
    mpi_nodes it runs on; the storage benchmarks; the collectives suite's
    collectives_node, collectives_all, nccl_tests and the pairwise runs), and a
    burn-in round's stress (burn_stress). Every suite's, asked for or not: the pairwise
    runs and a burn-in round use the collectives' without naming it."""
    built: dict[str, Any] = {}
    for suite in SUITES.values():
        built.update(suite.commands(settings, shared))
    return {**built, **suites.stress_commands(settings, shared)}


def prepare(hostvars: Mapping, nodes: list[str], settings: Settings) -> dict[str, Any]:
    """Everything the suites share once the nodes under test are chosen: the srun step
    (kiln_node.slurm_jobs.Srun's settings, which each suite names its job in), the
    launcher's --time, the probe's and launcher's command lines, what the nodes lack
    (from each node's look, suites.FOUND), what stops the run, the collectives suite's
    notes and every suite's argv (`commands`)."""
    nodes = list(nodes)
    found = {node: Found.on(hostvars, node) for node in nodes}
    lack = suites.lacking(found, nodes, settings.nccl_tests_image)
    notes = (
        suites.collectives_notes(settings, lack, suites.unmeasured(found, nodes, settings, lack))
        if settings.collectives
        else {}
    )
    shared = {
        "probe": suites.probe(settings),
        "launcher": ["/usr/bin/python3", f"{settings.libexec_dir}/kiln-probe-launcher"],
        # One task per node, all nodes at once; a node that cannot start fails the
        # step within a minute instead of queueing.
        "step": {
            "nodes": nodes,
            "job_name": "kiln-validate",
            "reservation": settings.reservation,
            "minutes": suites.step_minutes(settings.storage, settings.burn_in),
            "immediate_s": 60,
            "kill_on_bad_exit": False,
            "tasks_per_node": 1,
        },
        "launcher_minutes": suites.launcher_minutes(settings.collectives)
        if settings.collectives
        else None,
        "lacking": lack,
        "missing": suites.missing(settings, lack),
        "collectives_notes": notes,
        "records": suites.first_records(notes),
        # One rank per node crosses no link within the node: those runs are not scheduled.
        "within_node": bool(notes) and not notes["single_node_skipped"],
    }
    return {**shared, "commands": commands(settings, shared)}
