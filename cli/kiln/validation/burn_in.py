"""One `kiln burn-in`: hold the nodes (burn-in.yml, step hold), load them round after
round until the duration is spent (step round: the stress, then the collectives and
storage suites, then the passive check), judge every round as it ends, then let go,
drain the failing nodes and write the report. The CLI only parses options and renders."""

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kiln import health, hostlist
from kiln.errors import ExitCode, InputError, KilnError
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.report import model, write
from kiln.run import ids
from kiln.run.display import Displays, for_people
from kiln.run.events import RunSummary
from kiln.validation import assess, collect, drain, profiles, session
from kiln.validation import results as layout
from kiln.validation.burn_in_judge import Limits, device_label, first_failures, judge_round
from kiln.validation.burn_in_samples import NodeRound, read_node
from kiln.validation.verdicts import Judgement, Verdict, fmt

SUITE = "burn-in"
SUITES = ["collectives", "storage"]  # between stress rounds, judged like kiln validate
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LONGEST = 14 * 86400
SHORTEST = 30
# A multi-node figure that falls this far below its first round starts the pairwise
# search (with the profile's drop_percent) for the node that slows the rest.
MULTI_NODE = session.PAIR_TEST


@dataclass
class Request:
    inventory: ClusterSpec
    duration_s: int
    profile: str | None = None
    nodes: list[str] | None = None
    no_drain: bool = False
    display: Displays = for_people
    lock: Lock | None = None


def parse_duration(text: str) -> int:
    """'4h', '90m', '1h30m', '2d', '45s' -> seconds; anything else is a one-line error."""
    given = text.strip().lower()
    parts = re.findall(r"([0-9]+)([smhd])", given)  # ASCII: \d and int() take "٣" too
    if not given or "".join(n + u for n, u in parts) != given:
        raise InputError(
            f"{text!r}: expected a length such as 4h, 90m, 1h30m or 2d (units s, m, h, d)"
        )
    seconds = sum(int(n) * UNITS[u] for n, u in parts)
    if not SHORTEST <= seconds <= LONGEST:
        raise InputError(f"{text!r}: must be between 30s and 14d")
    return seconds


class NoProfile(InputError):
    """No profile named and none in the inventory: the command names its option."""


def choose_profile(request: Request, controller: str) -> profiles.Profile:
    chosen = session.choose_profile(
        session.Request(inventory=request.inventory, profile=request.profile), controller
    )
    if chosen is None:
        raise NoProfile(
            "burn-in needs a profile with a burn_in: section: none was named and the "
            f"inventory sets no validate_profile (shipped: {', '.join(profiles.shipped())})"
        )
    if chosen.burn_in is None:
        with_one = [n for n in profiles.shipped() if profiles.load(n).burn_in is not None]
        raise profiles.ProfileError(
            f"profile {chosen.name} has no burn_in: section (the load and its limits depend "
            f"on the hardware); shipped with one: {', '.join(with_one)}"
        )
    return chosen


class _Run:
    """The burn-in's state: the report as it grows, and the first figure of each GPU
    and of the multi-node collectives."""

    def __init__(self, request: Request, profile: profiles.Profile, nodes: list[str]):
        self.request = request
        self.profile = profile
        self.settings = dict(profile.burn_in or {})
        self.limits = Limits.from_profile(self.settings)
        self.controller = request.inventory.group("slurm_controller")[0]
        self.report = model.Report(
            id=ids.new_id(SUITE),
            started=model.now(),
            inventory=str(request.inventory.path),
            profile=profile.name,
            suites=[SUITE],
            nodes=nodes,
            positions=request.inventory.positions(nodes),
        )
        self.raw = layout.make(model.directory(self.report.id) / "raw").root
        self.began = time.time()
        self.first: dict[tuple[str, str], tuple[int, float]] = {}
        self.first_multi: float | None = None

    @property
    def reservation(self) -> str:
        return f"kiln_burn_in_{self.report.id}"

    def playbook(self, step: str, results: Path, run: str, **extra) -> RunSummary:
        from kiln.run.execute import RunRequest, run_playbook

        tested = extra.pop("nodes", self.report.nodes)
        summary = run_playbook(
            RunRequest(
                playbook="burn-in.yml",
                inventory=self.request.inventory,
                limit=",".join([self.controller, *tested]),
                display=self.request.display,
                lock=self.request.lock,
                extravars={
                    "validate_burn_in_step": step,
                    "validate_reservation": self.reservation,
                    "validate_reservation_minutes": self._reservation_minutes(),
                    "validate_nodes": tested,
                    "validate_suites": SUITES,
                    "validate_results_dir": str(results),
                    "validate_run": run,
                    "validate_storage_params": self.profile.storage,
                    "validate_collectives_params": self.profile.collectives,
                    "validate_burn_in_params": self.settings,
                    "validate_pairs": [],
                    **extra,
                },
            )
        )
        self.report.runs.append(summary.run)
        return summary

    def _reservation_minutes(self) -> int:
        # Rounds overrun the duration by their suites: the hold outlasts the burn-in,
        # and the end releases it; an abandoned run's hold still ends by itself.
        round_s = int(self.settings["round_s"])
        return (self.request.duration_s + 3 * round_s) // 60 + 60


def burn_in(request: Request) -> tuple[model.Report, ExitCode]:
    spec = request.inventory
    nodes = session.select_nodes(spec, request.nodes)
    controller = spec.group("slurm_controller")[0]
    run = _Run(request, choose_profile(request, controller), nodes)
    hold = layout.make(run.raw / "hold").root
    summary = run.playbook("hold", hold, run.report.id)
    if summary.status != "canceled":
        session.stop_on_controller_failure(summary, controller, hold)
    found = collect.Collected(nodes)
    state = layout.SlurmState.from_json(layout.Layout(hold).load(layout.SLURM_STATE))
    found.states = drain.parse_states(state.scontrol)
    plan = collect.plan(hold)
    tested = [str(n) for n in plan.get("test", [])]
    for node, why in plan.get("skipped", {}).items():
        verdict = drain.skipped_verdict(why)
        run.report.judgements.append(
            Judgement(node, "slurm.state", "", None, "", verdict, f"not tested: {why}")
        )
    canceled = summary.status == "canceled"
    index, error = 0, None
    try:
        while tested and not canceled:
            index += 1
            canceled = not _round(run, index, hold, tested)
            if time.time() - run.began >= request.duration_s:
                break
    except KeyboardInterrupt:  # between two playbook runs, while a round is judged
        canceled = True
    except KilnError as exc:  # the controller failed: let go of the nodes, then say so
        error = exc
        run.report.notes.append(f"stopped in round {index}: {exc.message}")
    if canceled and not error:
        run.report.notes.append(
            f"canceled in round {index}: judged the rounds that had ended"
            if index
            else "canceled before the first round: nothing was judged"
        )
    elif not error:
        run.report.notes.append(
            f"{index} round{'' if index == 1 else 's'} in {_length(time.time() - run.began)}"
        )
    actions = _conclude(run, found, nodes)
    release = {
        "reservation": run.reservation,
        "redrain": {n: found.states[n].reason for n in plan.get("resume_to_test", [])},
    }
    session.act(
        run.report,
        session.Request(inventory=spec, display=request.display, lock=request.lock),
        controller,
        {"drain": actions.drain, "resume": actions.resume, "release": release},
    )
    run.report.finished = model.now()
    write.write_all(run.report)
    if error:
        raise error
    if run.report.verdict is Verdict.FAIL:
        return run.report, ExitCode.VALIDATION_FAILED
    return run.report, ExitCode.INTERRUPTED if canceled else run.report.exit_code


def _round(run: _Run, index: int, hold: Path, tested: list[str]) -> bool:
    """One round, judged; False when it was canceled (nothing of it is judged)."""
    left = run.request.duration_s - (time.time() - run.began)
    seconds = max(10, int(min(float(run.settings["round_s"]), left)))
    results = layout.make(run.raw / f"round{index}").root
    shutil.copy(hold / layout.SLURM_STATE, results / layout.SLURM_STATE)
    name = f"{run.report.id}-r{index}"
    summary = run.playbook("round", results, name, nodes=tested, validate_burn_in_seconds=seconds)
    if summary.status == "canceled":
        return False
    session.stop_on_controller_failure(summary, run.controller, results)
    store = layout.Layout(results)
    stress: dict[str, NodeRound | None] = {}
    for node in tested:
        data = store.load_node("burn_stress", node)
        stress[node] = read_node(node, data) if isinstance(data, dict) else None
    for failure in summary.failures:  # a node Ansible could not reach in this round
        if failure.host in tested:
            stress[failure.host] = NodeRound(failure.host, {}, [], error=failure.message)
    judgements = judge_round(index, stress, run.first, run.limits)
    _series(run, stress)
    found = collect.collect(results, tested, SUITES)
    suites = assess.judge(found, run.profile)
    judgements += [_in_round(j, index) for j in suites if j.test != "slurm.state"]
    judgements += _health(store, tested, index)
    judgements += _multi_node(run, suites, index, tested)
    run.report.judgements += judgements
    # The same note every round (nccl-tests absent) is said once.
    run.report.notes += [n for n in dict.fromkeys(found.notes) if n not in run.report.notes]
    return True


def _in_round(j: Judgement, index: int) -> Judgement:
    subject = f"{j.subject}, round {index}" if j.subject else f"round {index}"
    return Judgement(
        j.node,
        j.test,
        subject,
        j.value,
        j.unit,
        j.verdict,
        f"round {index}: {j.reason}",
        j.threshold,
    )


def _health(store: layout.Layout, tested: list[str], index: int) -> list[Judgement]:
    """kiln-health's failures and warnings after the round (its passes are not news)."""
    out = []
    for node in tested:
        path = store.node_path(layout.HEALTH, node)
        if not path.is_file():
            continue  # the health role is not on this node: nothing to read
        checked = health.read_node(node, path.read_text())
        where = f"round {index}"
        if checked.error:
            out.append(
                Judgement(
                    node,
                    "burn_in.health",
                    where,
                    None,
                    "",
                    Verdict.FAIL,
                    f"{where}: {checked.error}",
                )
            )
        for result in checked.results:
            if result.status in ("WARN", "FAIL"):
                verdict = Verdict.FAIL if result.status == "FAIL" else Verdict.WARN
                out.append(
                    Judgement(
                        node,
                        "burn_in.health",
                        f"{result.check}, {where}",
                        None,
                        "",
                        verdict,
                        f"{where}: {result.check}: {result.reason}",
                    )
                )
    return out


def _multi_node(run: _Run, suites: list[Judgement], index: int, tested: list[str]) -> list:
    """The multi-node all_reduce against its first round: a drop names the slow node
    by the pairwise search where there are nodes enough to pair (three or more)."""
    figure = next((j.value for j in suites if j.test == MULTI_NODE and j.value), None)
    if figure is None:
        return []
    point = [round(time.time() - run.began, 1), figure]
    _extend(run.report, hostlist.compress(tested), "all_reduce", "busbw_gbps", [point])
    if run.first_multi is None:
        run.first_multi = figure
        return []
    limit = run.first_multi * (1 - run.limits.drop_percent / 100)
    if figure >= limit:
        return []
    group = hostlist.compress(tested)
    drop = (1 - figure / run.first_multi) * 100
    out = [
        Judgement(
            group,
            "burn_in.collectives_drop",
            f"all_reduce, round {index}",
            figure,
            "GB/s",
            Verdict.FAIL,
            f"round {index}: multi-node all_reduce {fmt(figure)} GB/s, "
            f"{drop:.0f}% below round 1 ({fmt(run.first_multi)})",
            limit,
        )
    ]
    if len(tested) < 3:
        run.report.notes.append(
            f"round {index}: the multi-node drop is not pinned on a node (pairs need 3 nodes)"
        )
        return out
    folder = run.raw / f"round{index}-pairs"

    def pair_round(step: int, chosen: list[tuple[str, str]]) -> dict:
        results = layout.make(folder / str(step)).root
        run.playbook(
            "round",
            results,
            f"{run.report.id}-r{index}p{step}",
            nodes=tested,
            validate_pairs=[list(p) for p in chosen],
        )
        return collect.pair_results(results, chosen, limit)

    findings = session.bisect(tested, pair_round)
    if findings.note:
        run.report.notes.append(f"round {index}: pairwise runs: {findings.note}")
    return out + [
        Judgement(
            node,
            "collectives.pairwise",
            f"all_reduce, round {index}",
            None,
            "",
            Verdict.FAIL,
            f"round {index}: the slow node of the multi-node drop: all_reduce "
            f"with a healthy partner stays under {fmt(limit)} GB/s",
        )
        for node in findings.slow
    ]


def _series(run: _Run, stress: dict[str, NodeRound | None]) -> None:
    """Each device's figures over the whole burn-in (seconds since it began)."""
    for node, result in sorted(stress.items()):
        if result is None:
            continue
        offset = result.started - run.began
        for index, device in sorted(result.devices.items()):
            label = device_label(index).replace(" ", "")
            points = {
                "tflops": [[t, v] for t, v in device.intervals],
                "temperature_c": [[s.t, s.temperature_c] for s in device.samples],
                "power_w": [[s.t, s.power_w] for s in device.samples],
                "sm_clock_mhz": [[s.t, s.sm_clock_mhz] for s in device.samples],
            }
            for metric, values in points.items():
                kept = [[round(t + offset, 1), v] for t, v in values if v is not None]
                if kept:
                    _extend(run.report, node, label, metric, kept)


def _extend(report: model.Report, node: str, device: str, metric: str, points: list) -> None:
    for series in report.series:
        if (series["node"], series["device"], series["metric"]) == (node, device, metric):
            series["points"] += points
            return
    report.series.append(model.Series(node=node, device=device, metric=metric, points=points))


def _conclude(run: _Run, found: collect.Collected, nodes: list[str]) -> drain.Actions:
    report = run.report
    failures = first_failures(report.judgements, nodes)
    verdicts = assess.per_node(report.judgements, nodes)
    report.node_verdicts = {}
    for node in nodes:
        verdict = verdicts[node]
        reasons = failures[node] or verdict.reasons
        report.node_verdicts[node] = {"verdict": verdict.verdict.value, "reasons": reasons}
    failing = {
        n: f"{SUITE}: {failures[n][0] if failures[n] else verdicts[n].reasons[0]}"
        for n in nodes
        if verdicts[n].verdict is Verdict.FAIL
    }
    passing = [n for n in nodes if verdicts[n].verdict in drain.PASSING]
    actions = drain.decide(failing, passing, found.states, run.request.no_drain)
    report.actions = actions.to_dict()
    return actions


def _length(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes >= 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes}m{int(seconds % 60):02d}s"


def report_path(report: model.Report) -> Path:
    return session.report_path(report)
