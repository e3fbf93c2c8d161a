"""Run summaries from ansible-runner events recorded from a real run (tests/fixtures)."""

import json
from pathlib import Path

from kiln.errors import ExitCode
from kiln.run.events import EventAccumulator, Failure, HostCounts, RunSummary, failure_message

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
    # ansible-core 2.19's words around a Kiln filter's error (the autofs role on a kernel
    # without autofs); another filter's name stays, with its error.
    wrapped = (
        "Task failed: Finalization of task args for 'ansible.builtin.set_fact' failed: Error "
        "while resolving value for '_autofs_plan': The filter plugin "
        "'kiln.cluster.kiln_storage_plan' failed: autofs: this node's kernel (6.18) has no autofs"
    )
    assert failure_message({"msg": wrapped}) == "autofs: this node's kernel (6.18) has no autofs"
    other = wrapped.replace("kiln.cluster.kiln_storage_plan", "ansible.builtin.from_json")
    assert failure_message({"msg": other}) == other.removeprefix("Task failed: ")
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
    # apt's words for a proxy that refused, as every run shows and keeps them
    fetch = {
        "msg": "Failed to update apt cache: W:Failed to fetch "
        "http://deb.debian.org/debian/dists/trixie/InRelease  Could not connect to "
        "proxy http://kiln:hunter2@proxy:3142"
    }
    assert failure_message(fetch) == (
        "Failed to update apt cache: W:Failed to fetch "
        "http://deb.debian.org/debian/dists/trixie/InRelease Could not connect to "
        "proxy http://(secret)@proxy:3142"
    )


def test_mitogens_unreachable_messages_read_as_ansibles():
    refused = "ssh: connect to host 10.0.0.7 port 22: Connection refused"
    mitogen = {"msg": f"Task failed: EOF on stream; last 100 lines received:\n{refused}"}
    assert failure_message(mitogen) == f"Failed to connect to the host via ssh: {refused}"
    other = {"msg": "EOF on stream; last 3 lines received: sudo: a password is required"}
    assert failure_message(other) == "Failed to connect to the host: sudo: a password is required"


def test_exit_codes():
    ok = RunSummary("r", "p", "successful", {"a": HostCounts(ok=3)})
    assert ok.exit_code == ExitCode.OK
    unreachable = RunSummary("r", "p", "failed", {"a": HostCounts(unreachable=1)})
    assert unreachable.exit_code == ExitCode.HOSTS_FAILED
    assert RunSummary("r", "p", "canceled").exit_code == ExitCode.INTERRUPTED
    assert RunSummary("r", "p", "failed").exit_code == ExitCode.FAILED


def test_summaries_print_ansibles_words_as_text_not_markup():
    """Failure messages and task names come from Ansible and the nodes: '[/path]' or
    '[Errno 2]' in one is printed as it is (it used to crash the summary after a run)."""
    import io

    from rich.console import Console

    from kiln.run import display
    from kiln.run.events import Failure

    summary = RunSummary("r", "p", "failed", {"a": HostCounts(failed=1)})
    summary.failures.append(Failure("a", "Copy [bold]x", "[Errno 2] No such file: [/path]", False))
    summary.error = "[/oops]"
    out = io.StringIO()
    display.run_summary(summary, Console(file=out, width=200))
    text = out.getvalue()
    assert "failed a: Copy [bold]x: [Errno 2] No such file: [/path]" in text
    assert "error: [/oops]" in text


def test_the_plain_display_and_the_counts_read_events_alike():
    """One classifier (events.outcome) serves both: the lines a log shows add up to the
    summary's counts, for a recorded run with every kind of result."""
    import io
    from collections import Counter

    from kiln.run.display import PlainDisplay

    out = io.StringIO()
    acc = EventAccumulator("r", "checks.yml")
    shown = PlainDisplay(out)
    for event in recorded_events():
        if event["event"] == "playbook_on_stats":
            continue  # the recap: counted its own way
        acc.feed(event)
        shown.update(event, acc)
    labels = Counter(line.split()[0] for line in out.getvalue().splitlines())
    hosts = acc.summary.hosts.values()
    assert labels["changed"] == sum(h.changed for h in hosts)
    assert labels["ok"] + labels["changed"] + labels["ignored"] == sum(h.ok for h in hosts)
    assert labels["skipping"] == sum(h.skipped for h in hosts)
    assert labels["FAILED"] == sum(h.failed for h in hosts)
    assert labels["UNREACHABLE"] == sum(h.unreachable for h in hosts)
    assert labels["FAILED"] + labels["UNREACHABLE"] == len(acc.summary.failures)


def test_a_run_stopped_by_its_pre_flight_before_any_change_is_bad_input():
    refusal = Failure("gpu001", "Pre-flight: refuse an HPC-X build the nodes cannot run", "no")
    refused = RunSummary(
        "r",
        "p",
        "failed",
        {"gpu001": HostCounts(ok=2, failed=1), "gpu002": HostCounts(ok=2)},
        [refusal],
    )
    assert refused.exit_code == ExitCode.BAD_INPUT
    # A role's own pre-flight, named with its role.
    in_role = Failure("gpu001", "hpcx : Pre-flight: work out the node's HPC-X build", "no")
    assert RunSummary("r", "p", "failed", {}, [in_role]).exit_code == ExitCode.BAD_INPUT
    # Once a node changed, or failed elsewhere, or could not be reached: hosts failed.
    changed = RunSummary("r", "p", "failed", {"gpu001": HostCounts(changed=1, failed=1)}, [refusal])
    assert changed.exit_code == ExitCode.HOSTS_FAILED
    other = Failure("gpu002", "Install HPC-X", "boom")
    counts = {"gpu002": HostCounts(failed=1)}
    assert RunSummary("r", "p", "failed", counts, [refusal, other]).exit_code == (
        ExitCode.HOSTS_FAILED
    )
    unreachable = Failure("gpu003", "Pre-flight: read the node's OS", "ssh", unreachable=True)
    counts = {"gpu003": HostCounts(unreachable=1)}
    assert RunSummary("r", "p", "failed", counts, [unreachable]).exit_code == (
        ExitCode.HOSTS_FAILED
    )


def test_a_censored_change_counts_as_changed():
    """A no_log result hides `changed` with the rest; Ansible's line still says it
    (recorded from the lab: the munge role's check-mode report, tests/fixtures/drift)."""
    from kiln.run.events import outcome

    fixture = FIXTURES / "drift" / "lab-check-mode-events.jsonl"
    events = [json.loads(line) for line in fixture.read_text().splitlines()]
    [censored] = [e for e in events if "censored" in (e["event_data"].get("res") or {})]
    found = outcome(censored)
    assert found is not None
    assert (found.label, found.host) == ("changed", "kiln-compute01")
    accumulator = EventAccumulator("r", "drift.yml")
    accumulator.feed(censored)
    assert accumulator.summary.hosts["kiln-compute01"].changed == 1


def stats_with(artifact_data: object) -> dict:
    """The recorded run's playbook_on_stats event, carrying set_stats' data."""
    stats = next(e for e in recorded_events() if e["event"] == "playbook_on_stats")
    return {**stats, "event_data": {**stats["event_data"], "artifact_data": artifact_data}}


def test_nodes_left_to_kiln_rollouts_reboot_reach_the_summary():
    """The nvidia_driver role's set_stats kiln_reboots (node -> Slurm's reason), beside
    its note; a reason that is not one line of text is dropped."""
    acc = EventAccumulator("r", "site.yml")
    acc.feed(
        stats_with(
            {
                "kiln_notes": {
                    "gpu002": [
                        "nvidia_driver: driver 580.95.05 is installed, 580.65.06 is loaded: "
                        "slurmd runs here: kiln rollout reboots it through Slurm"
                    ]
                },
                "kiln_reboots": {
                    "gpu002": "kiln: driver 580.95.05",
                    "gpu001": "kiln: driver 580.95.05",
                    "gpu003": ["kiln: driver 580.95.05"],
                    "gpu004": "kiln: driver\nreason=x",
                    "gpu005": "",
                    "gpu006": None,
                },
            }
        )
    )
    found = acc.summary.to_json()
    assert (found["notes"], found["reboots"]) == (
        {
            "gpu002": [
                "nvidia_driver: driver 580.95.05 is installed, 580.65.06 is loaded: "
                "slurmd runs here: kiln rollout reboots it through Slurm"
            ]
        },
        {"gpu001": "kiln: driver 580.95.05", "gpu002": "kiln: driver 580.95.05"},
    )
    assert list(found["reboots"]) == ["gpu001", "gpu002"]  # sorted
    assert acc.summary.exit_code == ExitCode.HOSTS_FAILED  # the recorded run's failures


def test_junk_where_the_reboots_belong_is_ignored():
    for junk in ({"kiln_reboots": ["gpu001"]}, {"kiln_reboots": "gpu001"}, [], "x", None):
        acc = EventAccumulator("r", "site.yml")
        acc.feed(stats_with(junk))
        assert (acc.summary.reboots, acc.summary.notes) == ({}, {})
