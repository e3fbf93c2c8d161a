"""One `kiln burn-in`: hold the nodes (burn_in.yml, step hold), load them round after
round until the duration is spent or the rounds asked for have run (step round: the
stress, then the collectives and storage suites, then the passive check), judge every
round as it ends, then let go, drain the failing nodes and write the report. The CLI
only parses options and renders."""

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kiln import files, health, hostlist
from kiln.campaigns import campaign, validate
from kiln.campaigns.campaign import Outcome
from kiln.errors import ExitCode, InputError, KilnError
from kiln.report import document
from kiln.run import ids
from kiln.run.events import RunSummary
from kiln.validation import assess, collect, drain, pairs, profiles, registry
from kiln.validation import results as layout
from kiln.validation.burn_in_judge import Limits, device_label, first_failures, judge_round
from kiln.validation.burn_in_samples import NodeRound, read_node
from kiln.validation.verdicts import Judgement, Verdict, fmt

SUITE = "burn-in"
SUITES = list(registry.BURN_IN)  # between stress rounds, judged like kiln validate
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LONGEST = 14 * 86400
SHORTEST = 30
# A multi-node figure that falls this far below its first round starts the pairwise
# search (with the profile's drop_percent) for the node that slows the rest.
MULTI_NODE = pairs.MULTI_NODE


@dataclass(kw_only=True)
class Request(campaign.Request):
    duration_s: int | None  # None: no limit of time, only of rounds
    rounds: int | None = None  # None: rounds until the duration is spent


def parse_duration(text: str) -> int:
    """'4h', '90m', '1h30m', '2d', '45s' -> seconds; anything else is a one-line error."""
    given = text.strip().lower()
    parts = re.findall(r"([0-9]+)([smhd])", given)  # ASCII: \d and int() take "٣" too
    if not given or "".join(n + u for n, u in parts) != given:
        raise InputError(
            f"{text!r}: expected a length such as 4h, 90m, 1h30m or 2d (units s, m, h, d)"
        )
    # Past 14d in any unit; and Python's int() refuses over 4,300 digits (a ValueError).
    too_long = any(len(n.lstrip("0")) > len(str(LONGEST)) for n, _ in parts)
    seconds = 0 if too_long else sum(int(n) * UNITS[u] for n, u in parts)
    if too_long or not SHORTEST <= seconds <= LONGEST:
        raise InputError(f"{text!r}: must be between 30s and 14d")
    return seconds


class NoProfile(InputError):
    """No profile named and none in the inventory: the command names its option."""


def choose_profile(request: Request, controller: str) -> profiles.Profile:
    chosen = campaign.choose_profile(request.inventory, controller, request.profile)
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


class BurnIn(campaign.Campaign):
    """The burn-in's state: the report as it grows, and the first figure of each GPU
    and of the multi-node collectives."""

    kind = "burn_in"
    results_metrics = True
    drain_prefix = f"{SUITE}: "

    def __init__(self, request: Request) -> None:
        spec = request.inventory
        nodes = validate.select_nodes(spec, request.nodes)
        profile = choose_profile(request, spec.group("slurm_controller")[0])
        super().__init__(request, nodes, profile, [SUITE], ids.new_id(SUITE))
        self.request = request
        self.profile: profiles.Profile = profile
        self.settings = dict(profile.burn_in or {})
        self.limits = Limits.from_profile(self.settings)
        self.began = time.time()
        self.first: dict[tuple[str, str], tuple[int, float]] = {}
        self.first_multi: float | None = None

    def step(self, step: str, results: Path, run: str, **extra) -> RunSummary:
        """burn_in.yml's step `hold` or `round` on the controller and the nodes."""
        tested = extra.pop("nodes", self.report.nodes)
        return self.playbook(
            "burn_in.yml",
            tested,
            {
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

    def _reservation_minutes(self) -> int:
        # Rounds overrun the duration by their suites: the hold outlasts the burn-in,
        # and the end releases it; an abandoned run's hold still ends by itself. Rounds
        # alone are given their stress and ten minutes of suites each.
        round_s = int(self.settings["round_s"])
        length = self.request.duration_s
        if length is None:
            length = int(self.request.rounds or 1) * (round_s + 600)
        return (length + 3 * round_s) // 60 + 60

    def _spent(self, index: int) -> bool:
        """The rounds asked for have run, or the duration is spent."""
        if self.request.rounds is not None and index >= self.request.rounds:
            return True
        duration = self.request.duration_s
        return duration is not None and time.time() - self.began >= duration

    def execute(self) -> Outcome:
        hold = layout.make(self.raw / "hold").root
        summary = self.step("hold", hold, self.report.id)
        if summary.status != "canceled":
            campaign.stop_on_controller_failure(summary, self.controller, hold)
        state = layout.SlurmState.from_json(layout.Layout(hold).load(layout.SLURM_STATE))
        states = drain.parse_states(state.scontrol)
        plan = collect.plan(hold)
        tested = [str(n) for n in plan.get("test", [])]
        self.report.judgements += campaign.skipped_judgements(plan.get("skipped", {}))
        canceled = summary.status == "canceled"
        index, error = 0, None
        try:
            while tested and not canceled:
                index += 1
                canceled = not _round(self, index, hold, tested)
                if self._spent(index):
                    break
        except KeyboardInterrupt:  # between two playbook runs, while a round is judged
            canceled = True
        except KilnError as exc:  # the controller failed: let go of the nodes, then say so
            error = exc
            self.report.notes.append(f"stopped in round {index}: {exc.message}")
        if canceled and not error:
            self.report.notes.append(
                f"canceled in round {index}: judged the rounds that had ended"
                if index
                else "canceled before the first round: nothing was judged"
            )
        elif not error:
            self.report.notes.append(
                f"{index} round{'' if index == 1 else 's'} in {_length(time.time() - self.began)}"
            )
        return Outcome(
            canceled=canceled,
            states=states,
            reasons=first_failures(self.report.judgements, self.nodes),
            release=self.release({n: states[n].reason for n in plan.get("resume_to_test", [])}),
            error=error,
        )


def burn_in(request: Request) -> tuple[document.Report, ExitCode]:
    return BurnIn(request).run()


def _round(run: BurnIn, index: int, hold: Path, tested: list[str]) -> bool:
    """One round, judged; False when it was canceled (nothing of it is judged)."""
    seconds = float(run.settings["round_s"])
    if run.request.duration_s is not None:  # the last round's stress: what is left
        seconds = max(10, min(seconds, run.request.duration_s - (time.time() - run.began)))
    seconds = int(seconds)
    results = layout.make(run.raw / f"round{index}").root
    shutil.copy(hold / layout.SLURM_STATE, results / layout.SLURM_STATE)
    name = f"{run.report.id}-r{index}"
    summary = run.step("round", results, name, nodes=tested, validate_burn_in_seconds=seconds)
    if summary.status == "canceled":
        return False
    campaign.stop_on_controller_failure(summary, run.controller, results)
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
    """kiln-health's failures, warnings and nodes that could not report after the round
    (health.judgements; its passes are not news), as burn_in.health."""
    checked = []
    for node in tested:
        path = store.node_path(layout.HEALTH, node)
        if not path.is_file():
            continue  # the health role is not on this node: nothing to read
        try:
            checked.append(health.read_node(node, files.read_text(path, errors="replace")))
        except InputError as exc:  # not a regular file, too large
            checked.append(health.NodeHealth(node, error=exc.message))
    out = []
    for j in health.judgements(checked):
        if j.verdict is Verdict.PASS:
            continue
        check = "" if j.test == health.RUN else j.test.removeprefix(f"{health.TEST}.")
        why = f"{check}: {j.reason}" if check else j.reason
        out.append(
            _in_round(Judgement(j.node, "burn_in.health", check, None, "", j.verdict, why), index)
        )
    return out


def _multi_node(run: BurnIn, suites: list[Judgement], index: int, tested: list[str]) -> list:
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

    def run_pairs(step: int, chosen: list[tuple[str, str]]) -> Path:
        results = layout.make(folder / str(step)).root
        run.step(
            "round",
            results,
            f"{run.report.id}-r{index}p{step}",
            nodes=tested,
            validate_pairs=[list(p) for p in chosen],
        )
        return results

    findings = run.find_slow(tested, limit, run_pairs)
    if findings.note:
        run.report.notes.append(f"round {index}: pairwise runs: {findings.note}")
    where = f"round {index}"
    return out + pairs.slow_judgements(
        findings, limit, f"all_reduce, {where}", f"{where}: ", "drop"
    )


def _series(run: BurnIn, stress: dict[str, NodeRound | None]) -> None:
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


def _extend(report: document.Report, node: str, device: str, metric: str, points: list) -> None:
    for series in report.series:
        if (series["node"], series["device"], series["metric"]) == (node, device, metric):
            series["points"] += points
            return
    report.series.append(document.Series(node=node, device=device, metric=metric, points=points))


def _length(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes >= 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes}m{int(seconds % 60):02d}s"
