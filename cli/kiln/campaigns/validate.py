"""One `kiln validate`: a campaign (kiln.campaigns.campaign) whose hold, run and
collect are one validate.yml run, with the pairwise search when the multi-node run
fails; then judge, act in Slurm (validate_drain.yml) and write the report. The CLI only
parses options and renders."""

from dataclasses import dataclass, field
from pathlib import Path

from kiln.campaigns import campaign
from kiln.campaigns.campaign import Outcome
from kiln.errors import ExitCode
from kiln.inventory import ClusterSpec
from kiln.report import document
from kiln.run.events import RunSummary
from kiln.validation import assess, collect, drain, pairs, profiles, registry
from kiln.validation import results as layout
from kiln.validation.verdicts import Judgement, Verdict

SUITES = registry.NAMES
PAIR_TEST = pairs.MULTI_NODE


@dataclass(kw_only=True)
class Request(campaign.Request):
    suites: list[str] = field(default_factory=lambda: list(SUITES))
    suites_named: bool = False
    idle_only: bool = False  # test idle nodes only, never waiting for or beside a job


def select_nodes(spec: ClusterSpec, nodes: list[str] | None) -> list[str]:
    """The nodes to validate: those asked for (compute nodes of the inventory), or all."""
    return campaign.select_nodes(spec, nodes, "validate")


class Validation(campaign.Campaign):
    kind = "validate"
    results_metrics = True

    def __init__(self, request: Request) -> None:
        spec = request.inventory
        nodes = select_nodes(spec, request.nodes)
        controller = spec.group("slurm_controller")[0]
        # A bad profile stops before any run.
        profile = campaign.choose_profile(spec, controller, request.profile)
        super().__init__(request, nodes, profile, request.suites)
        self.request = request

    def suites(self, results: Path, names: list[str], chosen: list[tuple[str, str]]) -> RunSummary:
        params = self.profile or profiles.Profile(name="")
        summary = self.playbook(
            "validate.yml",
            self.nodes,
            {
                "validate_reservation": self.reservation,
                "validate_nodes": self.nodes,
                "validate_suites": names,
                "validate_suites_named": self.request.suites_named,
                "validate_idle_only": self.request.idle_only,
                "validate_results_dir": str(results),
                "validate_run": self.report.id,
                "validate_storage_params": params.storage,
                "validate_collectives_params": params.collectives,
                "validate_pairs": [list(pair) for pair in chosen],
            },
        )
        campaign.stop_on_controller_failure(summary, self.controller, results)
        return summary

    def execute(self) -> Outcome:
        raw, report, profile = self.raw, self.report, self.profile
        summary = self.suites(raw, self.request.suites, [])
        if summary.status == "canceled":
            return self._canceled()
        found = collect.collect(raw, self.nodes, self.request.suites)
        for failure in summary.failures:  # a node Ansible could not reach or use
            if failure.host in self.nodes:
                found.fail(failure.host, "ansible", "", f"{failure.task}: {failure.message}")
        report.judgements = assess.judge(found, profile)
        tested = [n for n in self.nodes if n not in collect.skipped(raw)]
        bisectable = collect.benchmark_ran(raw) and profile is not None and len(tested) >= 3
        if _multi_node_failed(report.judgements) and bisectable:
            assert profile is not None
            limit = profile.thresholds.get(PAIR_TEST)
            if limit is not None:

                def run_pairs(index: int, chosen: list[tuple[str, str]]) -> Path:
                    results = layout.make(raw / f"pairs{index}").root
                    self.suites(results, [], chosen)
                    return results

                found_pairs = self.find_slow(tested, limit, run_pairs)
                report.judgements += pairs.slow_judgements(
                    found_pairs,
                    limit,
                    "all_reduce",
                    "collectives.pairwise: ",
                    "run",
                    f" (profile {profile.name})",
                )
                if found_pairs.note:
                    found.notes.append(f"pairwise runs: {found_pairs.note}")
        _curves_and_notes(report, found)
        return Outcome(states=found.states)

    def _canceled(self) -> Outcome:
        """Ctrl-C or SIGTERM during the suites: nothing is judged (half a run would pass
        or drain nodes on what did not run) and nothing drained; what the run held in
        Slurm, the reservation and the nodes it resumed to test, is put back."""
        plan = collect.plan(self.raw)
        states = plan.get("states") or {}
        redrain = {n: states.get(n, {}).get("reason", "") for n in plan.get("resume_to_test", [])}
        self.report.notes.append("canceled: nothing was judged and no node drained")
        return Outcome(judged=False, canceled=True, release=self.release(redrain))


def _curves_and_notes(report: document.Report, found: collect.Collected) -> None:
    """The collected curves and notes into the report (before the verdicts)."""
    report.curves = [
        {"node": c.node, "collective": c.collective, "points": [list(p) for p in c.points]}
        for c in found.curves
    ]
    report.notes = found.notes


def validate(request: Request) -> tuple[document.Report, ExitCode]:
    return Validation(request).run()


def conclude(
    report: document.Report, found: collect.Collected, nodes: list[str], no_drain: bool
) -> drain.Actions:
    """From the judgements to the rest of the report, as `kiln validate` concludes:
    curves, notes, each node's verdict, and what to do in Slurm."""
    _curves_and_notes(report, found)
    return campaign.conclude(report, nodes, Outcome(states=found.states), no_drain)


def _multi_node_failed(judgements: list[Judgement]) -> bool:
    return any(j.test == PAIR_TEST and j.verdict is Verdict.FAIL for j in judgements)
