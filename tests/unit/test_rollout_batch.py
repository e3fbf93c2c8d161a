"""kiln.rollout.batch: a batch's state machine, drained -> idle -> applied -> rebooted ->
checked -> resumed, each transition recorded before the next, and `--resume` carrying
on from whichever state the record holds; against the simulated controller of
tests/unit/test_rollout.py."""

import pytest

from kiln.errors import ExitCode
from kiln.report import document
from kiln.rollout import batch, waits
from kiln.rollout import progress as records
from kiln.rollout.batch import State
from kiln.rollout.progress import Record, Step
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation.verdicts import Verdict
from kiln_node import slurm_state
from tests.unit.test_rollout import Simulated, Slurm, simulated

ROLLOUT = "20261129-000000-rollout-abcd"
APPLYING = drain.reason(f"rollout {ROLLOUT}: applying the change")
CHECKING = drain.reason(f"rollout {ROLLOUT}: rebooted, checking")


class Actor:
    """The campaign's side of the machine: the controller simulated, the apply and the
    check recorded, and the batch's state at each save."""

    def __init__(self, slurm: Slurm, failing: dict[str, tuple[Verdict, str]] | None = None):
        self.slurm = slurm
        self.failing = failing or {}
        self.cluster = list(slurm.state)
        self.record = Record(
            id=ROLLOUT,
            inventory="/inv",
            started=document.now(),
            options=records.Options(max_unavailable=1),
        )
        self.did: list[str] = []  # what the batch asked for, in order
        self.saved: list[State] = []

    def say(self, line: str) -> None:
        pass

    def step(self, commands=None, wait=None, tries=None):
        for argv in [*(commands or []), *(tries or [])]:
            if argv[1] == "update":
                self.did.append(f"{argv[3].removeprefix('State=').lower()} {argv[2][9:]}")
            else:
                self.did.append(" ".join(argv[1:]))
            self.slurm.act(argv)
        text = self.slurm.look()
        return batch.View(slurm_state.parse(text), "", "Slurmctld(primary) at ctl1 is UP")

    def apply(self, hosts):
        self.did.append(f"apply {','.join(hosts)}")
        return RunSummary("run-apply", "site.yml", "successful")

    def check(self, nodes):
        self.did.append(f"check {','.join(nodes)}")
        return {n: self.failing[n] for n in nodes if n in self.failing}

    def save(self) -> None:
        self.saved.append(batch.state(self.record.batches[0]))


def test_the_states_in_order_and_where_each_goes_next():
    assert [s.value for s in State] == [
        "planned", "drained", "idle", "applied", "rebooted", "checked", "resumed",
    ]  # fmt: skip
    assert tuple(batch.ORDER) == records.STEPS  # the record's names are the states'
    step = Step(["gpu001"])
    seen = [(batch.state(step), batch.next_state(step))]
    for name in [*records.STEPS]:
        step.done[name] = document.now()
        step.done.setdefault("started", document.now())  # marks of their own, not states
        step.done.setdefault("reboot_asked", document.now())
        seen.append((batch.state(step), batch.next_state(step)))
    assert seen == [
        (State.PLANNED, State.DRAINED),
        (State.DRAINED, State.IDLE),
        (State.IDLE, State.APPLIED),
        (State.APPLIED, State.REBOOTED),
        (State.REBOOTED, State.CHECKED),
        (State.CHECKED, State.RESUMED),
        (State.RESUMED, None),
    ]
    assert step.finished


def recorded_at(state: State, asked_reboot: bool = False) -> tuple[Actor, Step]:
    """A one-node batch (its change loads at boot) whose record says `state`, with the
    controller as that state leaves it."""
    slurm = Slurm(["gpu001", "gpu002"])
    actor = Actor(slurm)
    step = Step(["gpu001"], reboot=["gpu001"])
    ended = batch.ORDER[: batch.ORDER.index(state) + 1] if state in batch.ORDER else ()
    if ended:
        step.done["started"] = document.now()
    for name in ended:
        step.done[name] = document.now()
    if asked_reboot or State.REBOOTED in ended:
        step.done["reboot_asked"] = document.now()
    if state is not State.PLANNED and state is not State.RESUMED:
        reason = CHECKING if State.REBOOTED in ended else APPLYING
        slurm.act(["scontrol", "update", "NodeName=gpu001", "State=DRAIN", f"Reason={reason}"])
    actor.record.batches = [step]
    return actor, step


EVERY = ["drain gpu001", "apply gpu001", "reboot gpu001", "drain gpu001", "check gpu001",
         "resume gpu001"]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "asked_reboot", "did"),
    [
        (State.PLANNED, False, EVERY),
        (State.DRAINED, False, EVERY[1:]),
        (State.IDLE, False, EVERY[1:]),
        (State.APPLIED, False, EVERY[2:]),
        # Cut short after Slurm was asked to reboot: waited for, never asked twice.
        (State.APPLIED, True, EVERY[3:]),
        (State.REBOOTED, False, EVERY[4:]),
        (State.CHECKED, False, EVERY[5:]),
        (State.RESUMED, False, []),
    ],
)
def test_resume_carries_on_from_each_recorded_state(state, asked_reboot, did):
    actor, step = recorded_at(state, asked_reboot)
    assert batch.Batch(actor, 1, step).run() is True
    assert actor.did == did
    # Each transition left is recorded (and saved) before the next begins.
    left = batch.ORDER[batch.ORDER.index(state) + 1 :] if state in batch.ORDER else batch.ORDER
    assert actor.saved == list(left)
    assert batch.state(step) is State.RESUMED
    assert (actor.slurm.state["gpu001"], actor.slurm.reason["gpu001"]) == ("IDLE", "")


def test_no_room_stops_before_the_drain_and_records_no_transition():
    slurm = Slurm(["gpu001", "gpu002"])
    slurm.act(["scontrol", "update", "NodeName=gpu002", "State=DRAIN", "Reason=RMA 7"])
    actor = Actor(slurm)
    step = Step(["gpu001"])
    actor.record.batches = [step]
    assert batch.Batch(actor, 1, step).run() is False
    assert (actor.did, actor.saved, batch.state(step)) == ([], [], State.PLANNED)
    assert actor.record.notes == [
        "stopped before batch 1: 1 compute node(s) out of service (gpu002), at most 1 may be"
    ]


@pytest.mark.parametrize(
    ("verdict", "unchecked"), [(Verdict.FAIL, []), (Verdict.UNCHECKED, ["gpu001"])]
)
def test_the_check_judges_and_the_batch_alone_acts(verdict, unchecked):
    """The check changes nothing in Slurm; the batch keeps a node that failed, or that
    could not be checked, drained with why (fail closed), and tells them apart."""
    actor, step = recorded_at(State.REBOOTED)
    actor.failing = {"gpu001": (verdict, "health.run: ssh: timed out")}
    batch.Batch(actor, 1, step).run()
    assert actor.did == [
        "check gpu001",
        "drain gpu001",  # the reason: why it failed, after the rollout's
    ]
    assert (step.failed, step.unchecked) == ({"gpu001": "health.run: ssh: timed out"}, unchecked)
    assert actor.slurm.reason["gpu001"] == drain.reason(
        f"rollout {ROLLOUT}: health.run: ssh: timed out"
    )


class Unreported(Simulated):
    """The whole rollout, with gpu002's check unable to report."""

    def check(self, nodes):
        return {n: (Verdict.UNCHECKED, "health.run: no result") for n in nodes if n == "gpu002"}


def test_a_node_whose_check_could_not_report_is_held_not_failed(tmp_path, monkeypatch):
    """Kiln's one rule (kiln.health.judgements): not checked is never a pass, so the
    node stays drained and the stop rule counts it; nor is it a failure: its verdict
    is unchecked, and the rollout exits 3, not 5."""
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    run = simulated(tmp_path, monkeypatch, slurm, max_unavailable="2")
    run.__class__ = Unreported
    report, code = run.run()
    assert code == ExitCode.NOT_CHECKED
    assert (slurm.state["gpu002"], slurm.reason["gpu002"]) == (
        "IDLE+DRAIN",
        drain.reason(f"rollout {run.record.id}: health.run: no result"),
    )
    verdicts = {n: (v["verdict"], v["reasons"]) for n, v in report.node_verdicts.items()}
    not_reached = ("unchecked", ["not rolled out (the rollout did not reach it)"])
    assert verdicts == {
        "gpu001": ("pass", []),
        "gpu002": ("unchecked", ["health.run: no result"]),
        **dict.fromkeys(["gpu003", "gpu004"], not_reached),
    }
    assert run.record.status == records.STOPPED
    assert run.record.batches[0].unchecked == ["gpu002"]
    assert waits.free(slurm_state.parse(slurm.look()), run.cluster) == 3


def test_the_rollouts_check_judges_health_then_validates_only_what_passed(tmp_path, monkeypatch):
    """kiln.campaigns.rollout's check: kiln-health's results through health.judgements,
    then a Validation of the nodes the health check passed that judges only (acted_by:
    the rollout acts); the nodes that did not pass, failed or not checked."""
    from kiln import health
    from kiln.campaigns import rollout as rolling
    from kiln.campaigns import validate
    from kiln.health import check as health_check
    from kiln.validation.verdicts import Judgement

    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    run = simulated(tmp_path, monkeypatch, slurm)
    ran: dict = {}

    def check(spec, nodes, display, no_slurm):
        ran["health"] = (nodes, no_slurm)
        found = [
            health.NodeHealth("gpu001", [health.CheckResult("munge", "OK", "munge answers")]),
            health.NodeHealth("gpu002", error="ssh: connect to host gpu002: timed out"),
            health.NodeHealth("gpu003", [health.CheckResult("gpu", "FAIL", "XID 79")]),
            health.NodeHealth("gpu004", [health.CheckResult("munge", "OK", "munge answers")]),
        ]
        return health.Health(found, RunSummary("run-health", "health_check.yml", "successful"))

    class Judged:
        def __init__(self, request):
            ran["validate"] = (request.nodes, request.acted_by, request.no_drain)

        def run(self):
            srun = "slurm.srun: srun on the node failed: exit 1"
            found = [
                Judgement("gpu001", "slurm.srun", "", None, "", Verdict.PASS, "1.2 s"),
                Judgement("gpu004", "slurm.srun", "", None, "", Verdict.FAIL, srun),
            ]
            report = document.Report(id="v1", started="", inventory="", profile=None,
                                  suites=["slurm"], nodes=["gpu001", "gpu004"],
                                  judgements=found, runs=["run-validate"])  # fmt: skip
            return report, ExitCode.VALIDATION_FAILED

    monkeypatch.setattr(health_check, "check", check)
    monkeypatch.setattr(validate, "Validation", Judged)
    failures = rolling.Rollout.check(run, ["gpu001", "gpu002", "gpu003", "gpu004"])
    assert failures == {
        "gpu002": (Verdict.UNCHECKED, "ssh: connect to host gpu002: timed out"),
        "gpu003": (Verdict.FAIL, "XID 79"),
        "gpu004": (Verdict.FAIL, "slurm.srun: srun on the node failed: exit 1"),
    }
    assert ran == {
        "health": (["gpu001", "gpu002", "gpu003", "gpu004"], False),  # its slurmd check
        "validate": (["gpu001", "gpu004"], f"rollout {run.record.id}", False),
    }
    assert [(j["node"], j["test"], j["verdict"]) for j in run.record.judgements] == [
        ("gpu001", "health.munge", "pass"),
        ("gpu002", "health.run", "unchecked"),
        ("gpu003", "health.gpu", "fail"),
        ("gpu004", "health.munge", "pass"),
        ("gpu001", "slurm.srun", "pass"),
        ("gpu004", "slurm.srun", "fail"),
    ]
    assert run.record.notes[-1] == "gpu[001,004]: validation report v1"
    assert run.record.runs[-2:] == ["run-health", "run-validate"]
