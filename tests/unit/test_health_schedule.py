"""kiln.health.schedule: the active check's timer as `systemctl show` prints it, the run
records kiln-health-active writes, and each run as a report in the history."""

import json

import pytest

from kiln.campaigns import health_active
from kiln.health import schedule
from kiln.report import document, terminal
from kiln.validation.verdicts import Judgement, Verdict

# systemd 252 (Debian 12) prints the properties in its own order, not the one asked.
SHOWN = (
    "TimersCalendar={ OnCalendar=Sun *-*-* 03:00:00 ; next_elapse=Sun 2026-11-29 03:00:00 UTC }\n"
    "NextElapseUSecRealtime=Sun 2026-11-29 03:00:00 UTC\n"
    "LastTriggerUSec=Sun 2026-11-22 03:00:00 UTC\n"
    "LoadState=loaded\n"
    "ActiveState=active\n"
)


def test_the_timer_is_read_whole():
    assert schedule.parse_timer(SHOWN) == schedule.Timer(
        load_state="loaded",
        active_state="active",
        calendar="Sun *-*-* 03:00:00",
        next_run="Sun 2026-11-29 03:00:00 UTC",
        last_run="Sun 2026-11-22 03:00:00 UTC",
    )


def test_a_timer_never_run_and_one_not_installed():
    never = SHOWN.replace("LastTriggerUSec=Sun 2026-11-22 03:00:00 UTC", "LastTriggerUSec=n/a")
    assert schedule.parse_timer(never).last_run == ""
    missing = schedule.parse_timer(
        "NextElapseUSecRealtime=\nLastTriggerUSec=n/a\nLoadState=not-found\nActiveState=inactive\n"
    )
    assert missing == schedule.Timer(load_state="not-found", active_state="inactive")
    assert not missing.installed


RECORD = {
    "started": "2026-11-22T03:00:04+00:00",
    "finished": "2026-11-22T03:04:41+00:00",
    "dcgm_diag_level": 2,
    "nodes": {
        "gpu001": {
            "results": [
                {"check": "munge", "status": "OK", "reason": "munge answers"},
                {"check": "dcgm_diag", "status": "FAIL", "reason": "level 2 pcie GPU 0: replays"},
            ],
            "error": "",
            "action": "drained: kiln-active: dcgm_diag: level 2 pcie GPU 0: replays",
            "status": "FAIL",
        },
        "gpu004": {
            "results": [
                {"check": "munge", "status": "OK", "reason": "munge answers"},
                {"check": "free_space", "status": "WARN", "reason": "/tmp not found"},
            ],
            "error": "",
            "action": "resumed",
            "status": "WARN",
        },
        "gpu005": {"results": [], "error": "no result", "action": "", "status": "ERROR"},
    },
    "skipped": {"gpu002": "allocated: not idle"},
    "error": "",
}


def test_a_run_becomes_a_report():
    [run], unreadable = health_active.read_records([json.dumps(RECORD)])
    assert unreadable == []
    assert run.report_id == "20261122-030004-health-active"
    report = health_active.to_report(run, "/inv")
    assert report == document.Report(
        id="20261122-030004-health-active",
        started="2026-11-22T03:00:04+00:00",
        inventory="/inv",
        profile=None,
        suites=["health-active"],
        nodes=["gpu001", "gpu004", "gpu005"],
        judgements=[
            Judgement("gpu001", "health.munge", "", None, "", Verdict.PASS, "munge answers"),
            Judgement(
                "gpu001",
                "health.dcgm_diag",
                "",
                None,
                "",
                Verdict.FAIL,
                "level 2 pcie GPU 0: replays",
            ),
            Judgement("gpu004", "health.munge", "", None, "", Verdict.PASS, "munge answers"),
            Judgement("gpu004", "health.free_space", "", None, "", Verdict.WARN, "/tmp not found"),
            # kiln.health.judgements' rule: a node that could not report is not checked
            Judgement("gpu005", "health.run", "", None, "", Verdict.UNCHECKED, "no result"),
        ],
        node_verdicts={
            "gpu001": {
                "verdict": Verdict.FAIL,
                "reasons": ["dcgm_diag: level 2 pcie GPU 0: replays"],
            },
            "gpu004": {"verdict": Verdict.WARN, "reasons": ["free_space: /tmp not found"]},
            # its srun step did not run there: not checked, not failed
            "gpu005": {"verdict": Verdict.UNCHECKED, "reasons": ["no result"]},
        },
        notes=["DCGM diagnostic level 2"],
        actions={
            "drain": {"gpu001": "kiln-active: dcgm_diag: level 2 pcie GPU 0: replays"},
            "resume": ["gpu004"],
            "left": {"gpu002": "allocated: not idle"},
        },
        finished="2026-11-22T03:04:41+00:00",
    )
    assert report.verdict == Verdict.FAIL
    # It reads back as any report does, and renders.
    assert document.Report.from_json(json.loads(json.dumps(report.to_json()))) == report
    terminal.show(report)


def test_an_error_beside_results_leaves_the_node_unchecked_and_says_so():
    """A node whose checks ran but whose run also reported an error could not report
    all of them: not checked (kiln.health.judgements' one rule, as kiln-health-active
    itself drains no node for it), by a judgement of its own (health.run), so its
    verdict is its judgements'."""
    node = {
        "results": [{"check": "munge", "status": "OK", "reason": "munge answers"}],
        "error": "srun: step cancelled",
        "action": "",
        "status": "ERROR",
    }
    [run], _ = health_active.read_records([json.dumps(RECORD | {"nodes": {"gpu003": node}})])
    report = health_active.to_report(run, "/inv")
    assert (report.judgements, report.node_verdicts) == (
        [
            Judgement("gpu003", "health.munge", "", None, "", Verdict.PASS, "munge answers"),
            Judgement(
                "gpu003", "health.run", "", None, "", Verdict.UNCHECKED, "srun: step cancelled"
            ),
        ],
        {"gpu003": {"verdict": Verdict.UNCHECKED, "reasons": ["srun: step cancelled"]}},
    )


def test_runs_enter_the_history_once(state_dir, capsys):
    runs, _ = health_active.read_records([json.dumps(RECORD)])
    assert health_active.import_runs(runs, "/inv") == ["20261122-030004-health-active"]
    assert health_active.import_runs(runs, "/inv") == []
    assert document.load("latest").id == "20261122-030004-health-active"
    assert sorted(p.name for p in document.directory(runs[0].report_id).iterdir()) == [
        "junit.xml",
        "report.html",
        "report.json",
        "report.md",
    ]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("{}", "a run record is not kiln-health-active's: Field required"),
        ("not json", "a run record is not kiln-health-active's: Invalid JSON"),
    ],
)
def test_a_record_that_cannot_be_read_is_named(text, line):
    runs, unreadable = health_active.read_records([text, json.dumps(RECORD)])
    assert [r.started for r in runs] == [RECORD["started"]]
    assert unreadable[0].startswith(line)
