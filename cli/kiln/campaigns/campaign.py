"""A campaign: the one flow that `kiln validate` and `kiln burn-in` share.

    select ─▶ hold ─▶ rounds ─▶ collect ─▶ judge      (the campaign's own `execute`)
        ─▶ conclude ─▶ act / release ─▶ report ─▶ exit code          (`run`, here)

A campaign picks compute nodes, holds them in a Slurm reservation of its own, runs its
rounds through a playbook and judges what they bring back (its `execute`); then this
module concludes the same way for every campaign: each node's verdict, the drain plan
(kiln.validation.drain), validate_drain.yml to drain, resume and release, the report,
and the exit code (kiln.validation.verdicts.exit_code). A new campaign is a subclass
that fills in `execute`, and says where it acts in Slurm (`acts`): once at the end
(validate, burn-in) or in each of its rounds (a rollout's batches), where the end only
judges and reports.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kiln.errors import ExitCode, InputError, KilnError, PrerequisiteError
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.report import document, result_metrics, write
from kiln.run import ids
from kiln.run.display import Displays, for_people
from kiln.run.events import RunSummary
from kiln.validation import collect, drain, pairs, profiles
from kiln.validation import results as layout
from kiln.validation.verdicts import Judgement, Verdict, exit_code


def select_nodes(spec: ClusterSpec, nodes: list[str] | None, command: str) -> list[str]:
    """The nodes to test: those asked for (compute nodes of the inventory), or all."""
    if not spec.group("slurm_controller"):
        raise InputError(f"{spec.path}: no host in slurm_controller: the suites run through Slurm")
    return spec.compute_nodes(nodes, command)


def choose_profile(spec: ClusterSpec, controller: str, name: str | None) -> profiles.Profile | None:
    """--profile, else the inventory's validate_profile, else none."""
    if name is None:
        name = spec.hosts[controller].vars.get("validate_profile")
    return profiles.load(str(name)) if name else None


def skipped_judgements(skipped: dict[str, str]) -> list[Judgement]:
    """The nodes the hold left out, judged as kiln.validation.collect judges them."""
    return [
        Judgement(c.node, c.test, c.subject, None, "", c.verdict, c.reason)
        for c in collect.skipped_checks(skipped)
    ]


@dataclass(kw_only=True)
class Request:
    """What every campaign is asked: where, with which profile, on which nodes."""

    inventory: ClusterSpec
    profile: str | None = None  # a profile's name; None: the inventory's validate_profile
    nodes: list[str] | None = None  # compute nodes by name; None: all
    no_drain: bool = False
    display: Displays = for_people  # how each playbook run shows (silent for --json)
    lock: Lock | None = None  # the inventory's lock, held by the caller
    # Who acts on these verdicts instead (a rollout's batch check: the rollout drains
    # and resumes its nodes): this campaign judges only, and acts on no node.
    acted_by: str = ""


@dataclass
class Outcome:
    """How a campaign's rounds ended, for the steps every campaign shares."""

    judged: bool = True  # False: nothing is concluded (no verdict, no drain, no resume)
    canceled: bool = False  # Ctrl-C or SIGTERM: exit 130 unless a node failed
    states: dict[str, drain.NodeState] = field(default_factory=dict)  # before the hold
    # Per node, the reasons that name it (failures first); None: each node's judgements.
    reasons: dict[str, list[str]] | None = None
    release: dict | None = None  # what to release in Slurm: reservation, nodes to redrain
    error: KilnError | None = None  # raised once the nodes are let go


# Where a campaign acts in Slurm on its verdicts (Campaign.acts).
AT_END = "at the end"  # once judged: drain the failing, resume Kiln's that pass
PER_ROUND = "per round"  # each round drains and resumes its own nodes: the end reports


class Campaign:
    """A campaign's state: its nodes, controller, report (as it grows) and raw results."""

    kind = "campaign"  # the reservation's middle word: kiln_<kind>_<report id>
    acts = AT_END
    drain_prefix = ""  # before the first reason in a drain reason
    # The verdicts and figures of its last run become kiln_result_* metrics (label
    # campaign: the kind) on the controller (kiln.report.result_metrics).
    results_metrics = False

    def __init__(
        self,
        request: Request,
        nodes: list[str],
        profile: profiles.Profile | None,
        suites: list[str],
        report_id: str | None = None,
    ) -> None:
        spec = request.inventory
        self.spec = spec
        self.nodes = nodes
        self.profile = profile
        self.controller = spec.group("slurm_controller")[0]
        self.no_drain = request.no_drain
        self.acted_by = request.acted_by
        self.display = request.display
        self.lock = request.lock
        self.report = document.Report(
            id=report_id or ids.new_id(),
            started=document.now(),
            inventory=str(spec.path),
            profile=profile.name if profile else None,
            outlier_percent=profile.outlier_percent if profile else None,
            suites=suites,
            nodes=nodes,
            positions=spec.positions(nodes),
        )
        self.raw = layout.make(document.directory(self.report.id) / "raw").root

    @property
    def reservation(self) -> str:
        """Per run: two runs never delete each other's reservation."""
        return f"kiln_{self.kind}_{self.report.id}"

    def execute(self) -> Outcome:
        """Hold, rounds, collect and judge into self.report.judgements."""
        raise NotImplementedError

    def run(self) -> tuple[document.Report, ExitCode]:
        outcome = self.execute()
        actions = drain.Actions()
        if outcome.judged:
            self.judge(outcome)
            if self.acts == AT_END and not self.acted_by:
                actions = decide(self.report, outcome, self.no_drain, self.drain_prefix)
            elif self.acted_by:
                self.report.notes.append(f"judged only: {self.acted_by} drains and resumes")
        acts: dict = {"drain": actions.drain, "resume": actions.resume}
        if outcome.release is not None:
            acts["release"] = outcome.release
        if self.results_metrics and outcome.judged:
            acts["results"] = result_metrics.for_controller(self.report, self.kind, time.time())
        if "release" in acts or "results" in acts or actions.drain or actions.resume:
            self.act(acts)
        self.report.finished = document.now()
        write.write_all(self.report)
        if outcome.error:
            raise outcome.error
        return self.report, exit_code(self.report.verdict, outcome.canceled)

    def judge(self, outcome: Outcome) -> None:
        """Each node's verdict (Report.judge_nodes) into the report."""
        self.report.judge_nodes(outcome.reasons, nodes=self.nodes)

    def act(self, acts: dict) -> None:
        """validate_drain.yml on the controller with validate_<key> for each of `acts`:
        drain, resume, release, results (the metrics file to write)."""
        from kiln.run.execute import RunRequest, run_playbook

        acted = run_playbook(
            RunRequest(
                playbook="validate_drain.yml",
                inventory=self.spec,
                limit=self.controller,
                display=self.display,
                lock=self.lock,
                extravars={f"validate_{key}": value for key, value in acts.items()},
            )
        )
        self.report.runs.append(acted.run)
        if acted.status != "successful":
            self.report.notes.append(f"acting in Slurm failed: see `kiln runs show {acted.run}`")

    def release(self, redrain: dict[str, str]) -> dict:
        """Let go of the reservation, and drain again (with their own reasons) the
        nodes Kiln resumed to test."""
        return {"reservation": self.reservation, "redrain": redrain}

    def playbook(self, name: str, nodes: list[str], extravars: dict) -> RunSummary:
        """A playbook on the controller and `nodes`, kept in the report's runs."""
        from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: when running

        summary = run_playbook(
            RunRequest(
                playbook=name,
                inventory=self.spec,
                limit=",".join([self.controller, *nodes]),
                display=self.display,
                lock=self.lock,
                extravars=extravars,
            )
        )
        self.report.runs.append(summary.run)
        return summary

    def find_slow(
        self,
        tested: list[str],
        limit: float,
        run_pairs: Callable[[int, list[tuple[str, str]]], Path],
    ) -> pairs.Findings:
        """The pairwise search (kiln.validation.pairs): `run_pairs` runs one round of
        pairs and says where their results are."""

        def run_round(index: int, chosen: list[tuple[str, str]]) -> dict:
            return collect.pair_results(run_pairs(index, chosen), chosen, limit)

        return pairs.search(tested, run_round)


def conclude(
    report: document.Report, nodes: list[str], outcome: Outcome, no_drain: bool, prefix: str = ""
) -> drain.Actions:
    """Each node's verdict (Report.judge_nodes), and what to do in Slurm (`decide`)."""
    report.judge_nodes(outcome.reasons, nodes=nodes)
    return decide(report, outcome, no_drain, prefix)


def decide(
    report: document.Report, outcome: Outcome, no_drain: bool, prefix: str = ""
) -> drain.Actions:
    """From the judged nodes, what to do in Slurm: drain the failing (the first reason,
    after `prefix`), resume Kiln's that pass."""
    verdicts = report.node_verdicts
    failing = {
        n: f"{prefix}{v['reasons'][0]}" for n, v in verdicts.items() if v["verdict"] == Verdict.FAIL
    }
    passing = [n for n, v in verdicts.items() if v["verdict"] in drain.PASSING]
    actions = drain.decide(failing, passing, outcome.states, no_drain)
    report.actions = actions.to_dict()
    return actions


def stop_on_controller_failure(summary: RunSummary, controller: str, results: Path) -> None:
    """A missing prerequisite, or the controller's own failure, stops the campaign."""
    missing = collect.missing_prerequisites(results)
    if missing:
        raise PrerequisiteError("; ".join(missing))
    if summary.error or any(f.host == controller for f in summary.failures):
        first = summary.error or next(f for f in summary.failures if f.host == controller).message
        raise KilnError(
            f"validation could not run on {controller}: {first} (kiln runs show {summary.run})",
            summary.exit_code if summary.exit_code != ExitCode.OK else ExitCode.FAILED,
        )


def report_path(report: document.Report, kind: str = "html") -> Path:
    return document.directory(report.id) / document.FORMATS[kind]
