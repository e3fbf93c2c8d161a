"""`kiln runs show --slowest`: each task's wall time from the kept job events, read
through their typed record, whatever the hosts are named."""

import json
import os

from tests.cli.test_bad_input import kiln, with_run


def result(counter: int, host: str, task: str, uuid: str, start: str, end: str, duration):
    return {
        "counter": counter,
        "event": "runner_on_ok",
        "uuid": f"e{counter}",
        "event_data": {
            "host": host,
            "remote_addr": host,
            "task": task,
            "task_uuid": uuid,
            "role": "slurm",
            "start": start,
            "end": end,
            "duration": duration,
            "res": {"changed": False},
        },
    }


# One task on a host named with Rich markup (aware times) and on one whose times an older
# ansible-runner wrote without a zone (UTC all the same); a shorter second task.
EVENTS = [
    result(
        1,
        "[red]gpu[/x]",
        "Install slurmd",
        "u-1",
        "2026-11-23T12:00:00+00:00",
        "2026-11-23T12:00:04+00:00",
        4.0,
    ),
    result(2, "gpu002", "Install slurmd", "u-1", "2026-11-23T12:00:01", "2026-11-23T12:00:10", 9),
    result(
        3,
        "gpu002",
        "Write slurm.conf",
        "u-2",
        "2026-11-23T12:00:10+00:00",
        "2026-11-23T12:00:11.500000+00:00",
        1.5,
    ),
]


def kept_run(tmp_path, monkeypatch, events: list[dict]) -> list[str]:
    """`kiln runs show RUN` of a kept run with these job events."""
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    return with_run(events=events)(tmp_path)


def test_slowest_reads_naive_times_as_utc(tmp_path, monkeypatch, capsys):
    show = kept_run(tmp_path, monkeypatch, EVENTS)
    code, out, err = kiln([*show, "--slowest", "2", "--json"], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["slowest"] == [
        {
            "task": "slurm : Install slurmd",
            "seconds": 10.0,
            "hosts": 2,
            "slowest_host": "gpu002",
            "slowest_seconds": 9.0,
        },
        {
            "task": "slurm : Write slurm.conf",
            "seconds": 1.5,
            "hosts": 1,
            "slowest_host": "gpu002",
            "slowest_seconds": 1.5,
        },
    ]


def test_a_host_name_with_markup_is_printed_as_written(tmp_path, monkeypatch, capsys):
    show = kept_run(tmp_path, monkeypatch, [EVENTS[0]])
    code, out, err = kiln([*show, "--slowest", "1"], capsys)
    assert (code, err) == (0, "")
    table = out[out.index("slowest 1 tasks") :].splitlines()
    assert [line.rstrip() for line in table] == [
        "slowest 1 tasks",
        " seconds  task                    hosts  slowest host",
        " 4.0      slurm : Install slurmd  1      [red]gpu[/x] (4.0s)",
    ]


def test_an_event_file_cut_short_is_skipped_and_said_in_one_line(tmp_path, monkeypatch, capsys):
    """A kept run whose last event file a kill or a full disk cut short: the summary
    of the rest, and one warning line naming the file."""
    show = kept_run(tmp_path, monkeypatch, EVENTS)
    events = tmp_path / "state" / "runs" / show[2] / "artifacts" / "ansible" / "job_events"
    cut = events / "3-x.json"
    whole = cut.read_text()
    column = whole.index('"task"')
    cut.write_text(whole[:column])
    code, out, err = kiln([*show, "--json"], capsys)
    assert code == 0
    assert err == (
        f"kiln: warning: {cut}: cut short, not whole JSON (Expecting property name enclosed "
        f"in double quotes: line 1 column {column + 1} (char {column})); skipped\n"
    )
    counts = {"ok": 1, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 0}
    assert json.loads(out) == {
        "run": show[2],
        "playbook": "site.yml",
        "status": "successful",
        "hosts": {"[red]gpu[/x]": counts, "gpu002": counts},  # gpu002's second task cut
        "failures": [],
        "notes": {},
        "reboots": {},
    }


# What a node (or anyone who names one) can put in its output and names.
CLEAR_SCREEN = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;owned\x07"


def test_control_characters_from_the_nodes_are_printed_escaped(tmp_path, monkeypatch, capsys):
    """A host name, a task name and a module's message holding escape sequences and a
    forged line: shown as their escapes, so they clear no screen, set no window title
    and print no line of Kiln's own ("kiln: all clear")."""
    start, end = "2026-11-23T12:00:00+00:00", "2026-11-23T12:00:04+00:00"
    task = f"Install{TITLE}\rkiln: all clear"
    failed = result(1, f"gpu{CLEAR_SCREEN}9", task, "u-1", start, end, 4.0)
    failed["event"] = "runner_on_failed"
    failed["event_data"]["res"] = {"failed": True, "msg": "disk full\r\nkiln: all clear\rok"}
    show = kept_run(tmp_path, monkeypatch, [failed])
    code, out, err = kiln([*show, "--slowest", "1"], capsys)
    assert (code, err) == (0, "")
    for raw in ("\x1b", "\x07", "\r"):
        assert raw not in out
    assert not any(line.startswith("kiln: all clear") for line in out.splitlines())
    lines = out.splitlines()
    assert lines[3] == (
        "failed gpu\\x1b[2J\\x1b[H9: Install\\x1b]0;owned\\x07\\rkiln: all clear: disk full "
        "kiln: all clear ok"  # Ansible's message, its white space made one line
    )
    assert lines[-1].split() == [
        "4.0", "slurm", ":", "Install\\x1b]0;owned\\x07\\rkiln:", "all", "clear", "1",
        "gpu\\x1b[2J\\x1b[H9", "(4.0s)",
    ]  # fmt: skip


def test_a_record_that_is_no_file_or_no_record_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    """`kiln runs list` in an incident: a FIFO, a link to /dev/zero or a record nested past
    Python's limit among the records is one warning line each, never a hang or a crash;
    the other runs are listed."""
    kept_run(tmp_path, monkeypatch, EVENTS)
    runs = tmp_path / "state" / "runs"
    for name in ("20261124-000000-site-fifo", "20261124-000000-site-zero", "20261124-deep"):
        (runs / name).mkdir()
    os.mkfifo(runs / "20261124-000000-site-fifo" / "kiln.json")
    (runs / "20261124-000000-site-zero" / "kiln.json").symlink_to("/dev/zero")
    (runs / "20261124-deep" / "kiln.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    code, out, err = kiln(["runs", "list", "--json"], capsys)
    assert code == 0
    assert sorted(err.splitlines()) == [
        f"kiln: warning: {runs}/20261124-000000-site-fifo/kiln.json: cannot read: a FIFO, not "
        "a regular file; skipped",
        f"kiln: warning: {runs}/20261124-000000-site-zero/kiln.json: cannot read: a character "
        "device, not a regular file; skipped",
        f"kiln: warning: {runs}/20261124-deep/kiln.json: not a Kiln run record (nested too "
        "deeply); skipped",
    ]
    assert [r["run"] for r in json.loads(out)["runs"]] == ["20261123-120000-site-abcd"]
