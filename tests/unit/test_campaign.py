"""kiln.campaigns.campaign: the flow every campaign shares after its own rounds
(conclude, act and release, report, exit code), and the one verdict -> exit code
mapping every judging command exits by."""

import pytest

from kiln import health
from kiln.campaigns import campaign
from kiln.errors import ExitCode, KilnError
from kiln.validation import drain
from kiln.validation.verdicts import Judgement, Verdict, exit_code

NODES = ["gpu001", "gpu002"]


def test_one_mapping_from_a_verdict_to_the_exit_code():
    table = {
        (verdict.value, canceled): int(exit_code(verdict, canceled))
        for verdict in Verdict
        for canceled in (False, True)
    }
    assert table == {
        ("pass", False): 0,
        ("warn", False): 0,
        ("skip", False): 0,
        ("measured", False): 0,  # measured, not judged: it fails nothing
        ("unchecked", False): 3,  # not 4: a host that failed a run
        ("fail", False): 5,
        ("pass", True): 130,
        ("warn", True): 130,
        ("skip", True): 130,
        ("measured", True): 130,
        ("unchecked", True): 130,
        ("fail", True): 5,  # what was judged before the cancel stands
    }


def test_kiln_health_exits_by_the_same_mapping():
    ok = health.NodeHealth("gpu001", [health.CheckResult("gpu", "OK", "")])
    failing = health.NodeHealth("gpu002", [health.CheckResult("gpu", "FAIL", "xid 79")])
    unread = health.NodeHealth("gpu003", error="kiln-health printed no readable result")
    verdicts = [
        health.Health(nodes, summary=None).verdict  # type: ignore[arg-type]
        for nodes in ([ok], [ok, unread], [ok, unread, failing])
    ]
    assert verdicts == [Verdict.PASS, Verdict.UNCHECKED, Verdict.FAIL]


class Recorded(campaign.Campaign):
    """A campaign whose rounds are given: what a new campaign (a rollout's batch) fills in."""

    kind = "test"
    drain_prefix = "test: "

    def __init__(self, spec, outcome: campaign.Outcome, judgements: list[Judgement]):
        super().__init__(campaign.Request(inventory=spec), NODES, None, ["test"])
        self.outcome, self.given = outcome, judgements

    def execute(self) -> campaign.Outcome:
        self.report.judgements += self.given
        return self.outcome


@pytest.fixture
def acts(tmp_path, monkeypatch):
    """validate_drain.yml as asked for, by extra variables."""
    from kiln.run import execute
    from kiln.run.events import RunSummary

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    asked: list[dict] = []

    def fake_run(request):
        assert request.playbook == "validate_drain.yml"
        asked.append(request.extravars)
        return RunSummary(run=f"r{len(asked)}", playbook=request.playbook, status="successful")

    monkeypatch.setattr(execute, "run_playbook", fake_run)
    return asked


def fails(node: str, why: str) -> Judgement:
    return Judgement(node, "test.thing", "", None, "", Verdict.FAIL, why)


def passes(node: str) -> Judgement:
    return Judgement(node, "test.thing", "", None, "", Verdict.PASS, "fine")


def spec_of(write_inventory):
    from kiln import inventory

    return inventory.load(write_inventory())


def test_a_campaign_concludes_drains_releases_and_exits_5(write_inventory, acts):
    states = drain.parse_states("")
    outcome = campaign.Outcome(
        states=states,
        reasons={"gpu001": ["round 2: the first failure"]},
        release={"reservation": "kiln_test_x", "redrain": {}},
    )
    run = Recorded(spec_of(write_inventory), outcome, [fails("gpu001", "late"), passes("gpu002")])
    report, code = run.run()
    assert code == ExitCode.VALIDATION_FAILED
    assert report.node_verdicts == {
        "gpu001": {"verdict": "fail", "reasons": ["round 2: the first failure"]},
        "gpu002": {"verdict": "pass", "reasons": []},
    }
    assert acts == [
        {
            "validate_drain": {"gpu001": drain.reason("test: round 2: the first failure")},
            "validate_resume": [],
            "validate_release": {"reservation": "kiln_test_x", "redrain": {}},
        }
    ]
    assert report.actions == {
        "drain": {"gpu001": drain.reason("test: round 2: the first failure")},
        "resume": [],
        "left": {},
    }
    assert run.reservation == f"kiln_test_{report.id}"
    assert report.finished is not None


def test_nothing_judged_and_nothing_to_release_asks_slurm_for_nothing(write_inventory, acts):
    run = Recorded(spec_of(write_inventory), campaign.Outcome(judged=False, canceled=True), [])
    report, code = run.run()
    assert (code, acts, report.node_verdicts, report.actions) == (
        ExitCode.INTERRUPTED,
        [],
        {},
        {},
    )


def test_an_error_is_raised_after_the_nodes_are_let_go(write_inventory, acts):
    release = {"reservation": "kiln_test_x", "redrain": {"gpu002": "kiln: old"}}
    error = KilnError("validation could not run on ctl1: gone")
    outcome = campaign.Outcome(release=release, error=error)
    run = Recorded(spec_of(write_inventory), outcome, [passes("gpu001"), passes("gpu002")])
    with pytest.raises(KilnError) as raised:
        run.run()
    assert raised.value is error
    assert acts == [{"validate_drain": {}, "validate_resume": [], "validate_release": release}]
    assert run.report.node_verdicts == {
        "gpu001": {"verdict": "pass", "reasons": []},
        "gpu002": {"verdict": "pass", "reasons": []},
    }


def test_a_campaign_acted_on_by_another_flow_judges_only(write_inventory, acts):
    """A rollout's batch check: the suites' verdicts, and no drain or resume of the
    nodes (the rollout's batch alone acts on them), even of a failing node or of a
    passing one Kiln drained; what the hold held is still let go."""
    states = drain.parse_states(
        "NodeName=gpu002 Arch=x86_64 State=IDLE+DRAIN Reason=kiln: rollout r1: applying"
    )
    release = {"reservation": "kiln_test_x", "redrain": {}}
    run = Recorded(
        spec_of(write_inventory),
        campaign.Outcome(states=states, release=release),
        [fails("gpu001", "late"), passes("gpu002")],
    )
    run.acted_by = "rollout r1"
    report, code = run.run()
    assert code == ExitCode.VALIDATION_FAILED
    assert report.node_verdicts == {
        "gpu001": {"verdict": "fail", "reasons": ["late"]},
        "gpu002": {"verdict": "pass", "reasons": []},
    }
    assert acts == [{"validate_drain": {}, "validate_resume": [], "validate_release": release}]
    assert report.actions == {}
    assert report.notes == ["judged only: rollout r1 drains and resumes"]


class PerRound(Recorded):
    """A campaign that acted in each of its rounds (a rollout): its end only judges."""

    acts = campaign.PER_ROUND


def test_a_campaign_that_acts_per_round_asks_slurm_for_nothing_at_the_end(write_inventory, acts):
    run = PerRound(spec_of(write_inventory), campaign.Outcome(), [fails("gpu001", "late")])
    report, code = run.run()
    assert (code, acts, report.actions) == (ExitCode.VALIDATION_FAILED, [], {})
    assert report.node_verdicts == {
        "gpu001": {"verdict": "fail", "reasons": ["late"]},
        "gpu002": {"verdict": "unchecked", "reasons": ["nothing was checked on the node"]},
    }
