"""kiln.drift on events recorded from a real `kiln drift` of the lab (see
tests/fixtures/drift/README.md): what drifted, per host, with its diff."""

import json
from pathlib import Path

from kiln import drift
from kiln.inventory.model import ClusterSpec
from kiln.validation.verdicts import Verdict

EVENTS = Path(__file__).parent.parent / "fixtures" / "drift" / "lab-check-mode-events.jsonl"
NCCL_DIFF = (
    "--- /etc/nccl.conf\n"
    "+++ /etc/nccl.conf\n"
    "@@ -2,4 +2,3 @@\n"
    " # socket: no RDMA device: NCCL over TCP sockets\n"
    " NCCL_IB_DISABLE=1\n"
    " NCCL_SOCKET_IFNAME==eth0\n"
    "-NCCL_DEBUG=INFO\n"
)


def recorded() -> list[dict]:
    return [json.loads(line) for line in EVENTS.read_text().splitlines()]


def test_the_recorded_run_drifts_on_one_host_with_a_diff_and_a_hidden_secret():
    found = drift.task_drift(recorded())
    assert found == {
        "kiln-compute01": [
            drift.TaskDrift(
                "munge : Report that the munge key would be replaced",
                "ansible.builtin.debug",
                drift.HIDDEN,
            ),
            drift.TaskDrift(
                "nccl_env : Write the NCCL site settings", "ansible.builtin.copy", NCCL_DIFF
            ),
        ]
    }


def test_diffs_of_every_shape_modules_give():
    # file: dicts before and after; lineinfile/template: text, with headers; apt:
    # `prepared`; a loop: one per item.
    assert drift.rendered_diff(
        {
            "diff": {
                "before": {"path": "/x", "state": "absent"},
                "after": {"path": "/x", "state": "directory"},
            }
        }
    ) == (
        '--- before\n+++ after\n@@ -1,4 +1,4 @@\n {\n   "path": "/x",\n'
        '-  "state": "absent"\n+  "state": "directory"\n }\n'
    )
    assert (
        drift.rendered_diff(
            {
                "diff": [
                    {
                        "before": "a\n",
                        "after": "b\n",
                        "before_header": "/etc/f",
                        "after_header": "/etc/f",
                    }
                ]
            }
        )
        == "--- /etc/f\n+++ /etc/f\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert drift.rendered_diff({"diff": {"prepared": "The following NEW packages: jq"}}) == (
        "The following NEW packages: jq\n"
    )
    looped = {
        "results": [
            {"diff": {"before": "1\n", "after": "2\n"}},
            {"diff": {"before": "x\n", "after": "x\n"}},
        ]
    }
    assert drift.rendered_diff(looped) == "--- before\n+++ after\n@@ -1 +1 @@\n-1\n+2\n"
    assert drift.rendered_diff({"changed": True}) == ""
    long = {"diff": {"before": "", "after": "".join(f"{i}\n" for i in range(500))}}
    lines = drift.rendered_diff(long).splitlines()
    assert len(lines) == 201 and lines[-1] == "... (303 more lines)"


def test_drift_as_a_report_for_the_history(tmp_path):
    spec = ClusterSpec(path=tmp_path, source=tmp_path, hosts={}, groups={})
    hosts = ["kiln-compute01", "kiln-compute02"]
    report = drift.to_report(
        "r1", "2026-11-25T06:00:00+00:00", spec, hosts, drift.task_drift(recorded())
    )
    assert [j.to_dict() for j in report.judgements] == [
        {
            "node": "kiln-compute01",
            "test": "drift.task",
            "subject": "munge : Report that the munge key would be replaced",
            "value": None,
            "unit": "",
            "verdict": "fail",
            "reason": "would change (no_log)",
            "threshold": None,
        },
        {
            "node": "kiln-compute01",
            "test": "drift.task",
            "subject": "nccl_env : Write the NCCL site settings",
            "value": None,
            "unit": "",
            "verdict": "fail",
            "reason": "would change",
            "threshold": None,
        },
    ]
    assert report.node_verdicts == {
        "kiln-compute01": {
            "verdict": Verdict.FAIL,
            "reasons": [
                "would change: munge : Report that the munge key would be replaced",
                "would change: nccl_env : Write the NCCL site settings",
            ],
        },
        "kiln-compute02": {"verdict": Verdict.PASS, "reasons": []},
    }
    assert (report.suites, report.nodes, report.verdict) == (["drift"], hosts, Verdict.FAIL)
