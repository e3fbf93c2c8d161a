"""Run summaries from ansible-runner events recorded from a real run (tests/fixtures)."""

import json
from pathlib import Path

from kiln.errors import ExitCode
from kiln.summary import EventAccumulator, HostCounts, RunSummary, failure_message

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def recorded_events() -> list[dict]:
    lines = (FIXTURES / "run_events_failed.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_recorded_run_gives_the_documented_json():
    expected = json.loads((FIXTURES / "run_events_failed.expected.json").read_text())
    acc = EventAccumulator(expected["run"], "checks.yml")
    for event in recorded_events():
        acc.feed(event)
    acc.summary.status = "failed"
    assert acc.summary.to_json() == expected
    assert acc.summary.exit_code == ExitCode.HOSTS_FAILED


def test_counts_without_the_final_stats_match_ansibles_recap():
    # An interrupted run has no playbook_on_stats event; counting events must agree.
    events = recorded_events()
    stats = next(e for e in events if e["event"] == "playbook_on_stats")
    acc = EventAccumulator("r", "p")
    for event in events:
        if event is not stats:
            acc.feed(event)
    recap = EventAccumulator("r", "p")
    recap.feed(stats)
    assert acc.summary.hosts == recap.summary.hosts


def test_tasks_started_and_current_task():
    acc = EventAccumulator("r", "p")
    for event in recorded_events():
        acc.feed(event)
    assert acc.tasks_started == 5
    assert acc.current_task["local-ctl"] == "Last task"


def test_failure_message_variants():
    assert failure_message({"msg": "Task failed: Module failed: boom\n  twice"}) == "boom twice"
    assert failure_message({"msg": "non-zero return code", "rc": 2, "stderr": "no such file"}) == (
        "non-zero return code (rc=2): no such file"
    )
    censored = {"censored": "the output has been hidden due to the fact that 'no_log: true'"}
    assert "hidden" in failure_message(censored)
    looped = {
        "msg": "One or more items failed",
        "results": [{"failed": False, "msg": "fine"}, {"failed": True, "msg": "item two broke"}],
    }
    assert failure_message(looped) == "item two broke"
    assert failure_message({}) == "failed without a message"
    assert len(failure_message({"msg": "x" * 1000})) == 400


def test_exit_codes():
    ok = RunSummary("r", "p", "successful", {"a": HostCounts(ok=3)})
    assert ok.exit_code == ExitCode.OK
    unreachable = RunSummary("r", "p", "failed", {"a": HostCounts(unreachable=1)})
    assert unreachable.exit_code == ExitCode.HOSTS_FAILED
    assert RunSummary("r", "p", "canceled").exit_code == ExitCode.INTERRUPTED
    assert RunSummary("r", "p", "failed").exit_code == ExitCode.FAILED
