"""bench/events.py's pieces, on small streams: the synthetic stream's shape, the record
replayed through ansible-runner's own event callback, where a run's time goes, and
Kiln's share of Ansible's CPU. Timing values are the bench's to print, not tested."""

import collections
import importlib.util
import json

from kiln.run.events import EventAccumulator, HostCounts
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("bench_events", REPO / "bench/events.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_synthetic_stream_is_a_no_op_provision_that_kiln_counts_as_ansible_does():
    events = bench.synthetic_events(tasks=5, hosts=2)
    assert collections.Counter(e["event"] for e in events) == {
        "playbook_on_start": 1,
        "playbook_on_play_start": 1,
        "playbook_on_task_start": 5,
        "runner_on_start": 10,
        "runner_on_ok": 6,  # tasks 0, 2 and 4 on each host
        "runner_on_skipped": 4,  # tasks 1 and 3
        "playbook_on_stats": 1,
    }
    assert [e["counter"] for e in events] == list(range(1, len(events) + 1))
    acc = EventAccumulator("bench", "site.yml")
    before_stats = events[:-1]
    for event in before_stats:
        acc.feed(event)
    counted = dict(acc.summary.hosts)
    acc.feed(events[-1])
    expected = {h: HostCounts(ok=3, skipped=2) for h in ("node01", "node02")}
    assert counted == expected
    assert acc.summary.hosts == expected
    assert acc.tasks_started == 5


def test_the_record_part_keeps_each_event_whole_through_ansible_runners_callback(tmp_path):
    events = bench.synthetic_events(tasks=3, hosts=2)
    arriving = bench._partials(events, tmp_path)
    runner = bench._runner(tmp_path, lambda event: True)
    for event in arriving:
        runner.event_callback(event)
    kept = {f.name: json.loads(f.read_text()) for f in (tmp_path / "job_events").iterdir()}
    assert kept == {f"{e['counter']}-{e['uuid']}.json": e for e in events}


def test_costs_name_every_part_per_event():
    figures = bench.costs(bench.synthetic_events(tasks=2, hosts=2), repeats=1)
    assert figures["events"] == 13
    assert sorted(figures["per_event_us"]) == sorted(
        ["handler", "plain", "live", "runner_merge", "record", "total_plain", "total_live"]
    )
    assert sorted(figures["events_per_s"]) == ["total_live", "total_plain"]
    assert sorted(figures) == sorted(
        ["events", "per_event_us", "events_per_s", "live_redraw_us", "live_redraw_cpu_per_s"]
    )


def _result(counter, host, role, module, task, start, end, kind="runner_on_ok"):
    return {
        "counter": counter,
        "event": kind,
        "event_data": {
            "host": host,
            "role": role,
            "task": task,
            "task_uuid": f"{role}-{task}",
            "task_action": module.rsplit(".", 1)[-1],
            "resolved_action": module,
            "start": f"2026-11-27T00:00:{start:06.3f}+00:00",
            "end": f"2026-11-27T00:00:{end:06.3f}+00:00",
            "duration": end - start,
            "res": {"changed": False},
        },
    }


def test_where_time_goes_sums_task_time_by_role_and_by_module():
    copy, command = "ansible.builtin.copy", "ansible.builtin.command"
    events = [
        {"counter": 1, "event": "playbook_on_task_start", "event_data": {}},
        _result(2, "a", "base", copy, "Install the library", 0.0, 2.0),
        _result(3, "b", "base", copy, "Install the library", 0.5, 3.0),
        {"counter": 4, "event": "playbook_on_task_start", "event_data": {}},
        _result(5, "a", "base", command, "Read the version", 3.0, 3.5),
        _result(6, "b", "base", command, "Read the version", 3.0, 3.25, "runner_on_skipped"),
        {"counter": 7, "event": "playbook_on_task_start", "event_data": {}},
        _result(8, "a", "slurm", copy, "Write slurm.conf", 4.0, 5.0),
        {"counter": 9, "event": "playbook_on_task_start", "event_data": {}},  # no host
    ]
    assert bench.where_time_goes(events, top=10) == {
        "tasks_started": 4,
        "steps": 3,
        "results": 5,
        "seconds": 4.5,
        "host_seconds": 6.25,
        "by_role": [
            {"name": "base", "steps": 2, "results": 4, "seconds": 3.5, "host_seconds": 5.25},
            {"name": "slurm", "steps": 1, "results": 1, "seconds": 1.0, "host_seconds": 1.0},
        ],
        "by_module": [
            {"name": copy, "steps": 2, "results": 3, "seconds": 4.0, "host_seconds": 5.5},
            {"name": command, "steps": 1, "results": 2, "seconds": 0.5, "host_seconds": 0.75},
        ],
    }
    assert bench.where_time_goes(events, top=1)["by_module"] == [
        {"name": copy, "steps": 2, "results": 3, "seconds": 4.0, "host_seconds": 5.5}
    ]


def test_kilns_share_is_its_cpu_per_event_over_ansibles_with_redraws_over_the_wall_time():
    figures = {
        "per_event_us": {"total_plain": 200.0, "total_live": 300.0},
        "live_redraw_cpu_per_s": 0.02,
    }
    # Ansible: 40 CPU s for 2,000 events = 20,000 us each; redraws: 0.02 s/s x 50 s.
    assert bench.share(figures, 40.0, 2000, 50.0) == {
        "ansible_per_event_us": 20000.0,
        "plain": 0.01,
        "live": 0.015,
        "live_with_redraws": 0.04,
    }
    assert bench.share(figures, 40.0, 2000, None) == {
        "ansible_per_event_us": 20000.0,
        "plain": 0.01,
        "live": 0.015,
    }
