"""One `kiln validate`: run the suites (validate.yml), judge, act in Slurm
(validate-drain.yml), write the report. The CLI only parses options and renders."""

from dataclasses import dataclass, field
from pathlib import Path

from kiln.errors import ExitCode, InputError, KilnError, PrerequisiteError
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.report import model, write
from kiln.run import ids
from kiln.run.display import Displays, for_people
from kiln.run.events import RunSummary
from kiln.validation import assess, collect, drain, pairs, profiles
from kiln.validation import results as layout
from kiln.validation.verdicts import Judgement, Verdict, fmt

SUITES = ("slurm", "storage", "collectives")


@dataclass
class Request:
    inventory: ClusterSpec
    suites: list[str] = field(default_factory=lambda: list(SUITES))
    suites_named: bool = False
    profile: str | None = None
    nodes: list[str] | None = None  # compute nodes by name; None: all
    no_drain: bool = False
    idle_only: bool = False  # test idle nodes only, never waiting for or beside a job
    display: Displays = for_people  # how each playbook run shows (silent for --json)
    lock: Lock | None = None  # the inventory's lock, held by the caller


def select_nodes(spec: ClusterSpec, nodes: list[str] | None) -> list[str]:
    """The nodes to validate: those asked for (compute nodes of the inventory), or all."""
    if not spec.group("slurm_controller"):
        raise InputError(f"{spec.path}: no host in slurm_controller: the suites run through Slurm")
    return spec.compute_nodes(nodes, "validate")


def choose_profile(request: Request, controller: str) -> profiles.Profile | None:
    name = request.profile
    if name is None:
        name = request.inventory.hosts[controller].vars.get("validate_profile")
    return profiles.load(str(name)) if name else None


def validate(request: Request) -> tuple[model.Report, ExitCode]:
    from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: only when running

    spec = request.inventory
    nodes = select_nodes(spec, request.nodes)
    controller = spec.group("slurm_controller")[0]
    profile = choose_profile(request, controller)  # a bad profile stops before any run
    report = model.Report(
        id=ids.new_id(),
        started=model.now(),
        inventory=str(spec.path),
        profile=profile.name if profile else None,
        suites=request.suites,
        nodes=nodes,
        positions=spec.positions(nodes),
    )
    raw = layout.make(model.directory(report.id) / "raw").root
    params = profile or profiles.Profile(name="")

    def suites(results: Path, names: list[str], chosen: list[tuple[str, str]]) -> RunSummary:
        summary = run_playbook(
            RunRequest(
                playbook="validate.yml",
                inventory=spec,
                limit=",".join([controller, *nodes]),
                display=request.display,
                lock=request.lock,
                extravars={
                    "validate_reservation": _reservation(report),
                    "validate_nodes": nodes,
                    "validate_suites": names,
                    "validate_suites_named": request.suites_named,
                    "validate_idle_only": request.idle_only,
                    "validate_results_dir": str(results),
                    "validate_run": report.id,
                    "validate_storage_params": params.storage,
                    "validate_collectives_params": params.collectives,
                    "validate_pairs": [list(pair) for pair in chosen],
                },
            )
        )
        report.runs.append(summary.run)
        stop_on_controller_failure(summary, controller, results)
        return summary

    summary = suites(raw, request.suites, [])
    if summary.status == "canceled":
        return _canceled(report, raw, controller, request)
    found = collect.collect(raw, nodes, request.suites)
    for failure in summary.failures:  # a node Ansible could not reach or use
        if failure.host in nodes:
            found.fail(failure.host, "ansible", "", f"{failure.task}: {failure.message}")
    report.judgements = assess.judge(found, profile)
    tested = [n for n in nodes if n not in collect.skipped(raw)]
    bisectable = collect.benchmark_ran(raw) and profile is not None and len(tested) >= 3
    if _multi_node_failed(report.judgements) and bisectable:
        assert profile is not None
        limit = profile.thresholds.get(PAIR_TEST)
        if limit is not None:

            def run_round(index: int, chosen: list[tuple[str, str]]) -> dict:
                results = layout.make(raw / f"pairs{index}").root
                suites(results, [], chosen)
                return collect.pair_results(results, chosen, limit)

            found_pairs = bisect(tested, run_round)
            report.judgements += _pair_judgements(found_pairs, limit, profile.name)
            if found_pairs.note:
                found.notes.append(f"pairwise runs: {found_pairs.note}")
    actions = conclude(report, found, nodes, request.no_drain)
    if actions.drain or actions.resume:
        act(report, request, controller, {"drain": actions.drain, "resume": actions.resume})
    report.finished = model.now()
    write.write_all(report)
    return report, report.exit_code


def conclude(
    report: model.Report, found: collect.Collected, nodes: list[str], no_drain: bool
) -> drain.Actions:
    """From the judgements to the rest of the report: curves, notes, each node's
    verdict, and what to do in Slurm (drain the failing, resume Kiln's that pass)."""
    report.curves = [
        {"node": c.node, "collective": c.collective, "points": [list(p) for p in c.points]}
        for c in found.curves
    ]
    report.notes = found.notes
    verdicts = assess.per_node(report.judgements, nodes)
    report.node_verdicts = {
        n: {"verdict": v.verdict.value, "reasons": v.reasons} for n, v in verdicts.items()
    }
    failing = {n: v.reasons[0] for n, v in verdicts.items() if v.verdict is Verdict.FAIL}
    passing = [n for n, v in verdicts.items() if v.verdict in drain.PASSING]
    actions = drain.decide(failing, passing, found.states, no_drain)
    report.actions = actions.to_dict()
    return actions


def _canceled(
    report: model.Report, raw: Path, controller: str, request: Request
) -> tuple[model.Report, ExitCode]:
    """Ctrl-C or SIGTERM during the suites: nothing is judged (half a run would pass or
    drain nodes on what did not run) and nothing drained; what the run held in Slurm,
    the reservation and the nodes it resumed to test, is put back."""
    plan = collect.plan(raw)
    states = plan.get("states") or {}
    redrain = {n: states.get(n, {}).get("reason", "") for n in plan.get("resume_to_test", [])}
    report.notes.append("canceled: nothing was judged and no node drained")
    release = {"reservation": _reservation(report), "redrain": redrain}
    act(report, request, controller, {"drain": {}, "resume": [], "release": release})
    report.finished = model.now()
    write.write_all(report)
    return report, ExitCode.INTERRUPTED


def act(report: model.Report, request: Request, controller: str, acts: dict) -> None:
    """validate-drain.yml on the controller with validate_<key> for each of `acts`."""
    from kiln.run.execute import RunRequest, run_playbook

    acted = run_playbook(
        RunRequest(
            playbook="validate-drain.yml",
            inventory=request.inventory,
            limit=controller,
            display=request.display,
            lock=request.lock,
            extravars={f"validate_{key}": value for key, value in acts.items()},
        )
    )
    report.runs.append(acted.run)
    if acted.status != "successful":
        report.notes.append(f"acting in Slurm failed: see `kiln runs show {acted.run}`")


def _reservation(report: model.Report) -> str:
    """Per run: two runs never delete each other's reservation."""
    return f"kiln_validate_{report.id}"


def report_path(report: model.Report, kind: str = "html") -> Path:
    return model.directory(report.id) / model.FORMATS[kind]


PAIR_TEST = "collectives.all_reduce.multi_node"


# What validate.yml brings back, one directory per kind (kiln.validation.collect).
def stop_on_controller_failure(summary: RunSummary, controller: str, results: Path) -> None:
    missing = collect.missing_prerequisites(results)
    if missing:
        raise PrerequisiteError("; ".join(missing))
    if summary.error or any(f.host == controller for f in summary.failures):
        first = summary.error or next(f for f in summary.failures if f.host == controller).message
        raise KilnError(
            f"validation could not run on {controller}: {first} (kiln runs show {summary.run})",
            summary.exit_code if summary.exit_code != ExitCode.OK else ExitCode.FAILED,
        )


def _multi_node_failed(judgements: list[Judgement]) -> bool:
    return any(j.test == PAIR_TEST and j.verdict is Verdict.FAIL for j in judgements)


def bisect(tested: list[str], run_round) -> pairs.Findings:
    """Two rounds of pairwise all_reduce (kiln.validation.pairs)."""
    first = run_round(1, pairs.first_round(tested))
    findings, second = pairs.after_first(first)
    if second:
        findings = pairs.after_second(findings, run_round(2, second))
    return findings


def _pair_judgements(found: pairs.Findings, limit: float, profile: str) -> list[Judgement]:
    return [
        Judgement(
            node,
            "collectives.pairwise",
            "all_reduce",
            None,
            "",
            Verdict.FAIL,
            f"collectives.pairwise: the slow node of the multi-node run: all_reduce with "
            f"a healthy partner stays under {fmt(limit)} GB/s (profile {profile})",
        )
        for node in found.slow
    ]
