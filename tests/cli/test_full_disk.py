"""A disk that fills while Kiln takes its lock or keeps a run's record: one line naming
the file, exit 1, and no run left "running" for ever in `kiln runs list`.

The full disk is injected where Kiln writes (os.pwrite for the lock, os.fsync for
records, ansible-runner's own writes), so each case is deterministic."""

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import ansible_runner

from kiln import lock
from kiln.run import record
from tests.cli.test_bad_input import inventory, kiln
from tests.conftest import REPO

FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_after(calls: int, real):
    """`real`, failing with ENOSPC from its call number `calls` + 1 on."""
    count = 0

    def write(*args):
        nonlocal count
        count += 1
        if count > calls:
            raise FULL
        return real(*args)

    return write


def runs(capsys) -> list[dict]:
    code, out, err = kiln(["runs", "list", "--json"], capsys)
    assert (code, err) == (0, "")
    return json.loads(out)["runs"]


def test_a_full_disk_when_taking_the_lock_names_the_lock_file(tmp_path, monkeypatch, capsys):
    inv = inventory(tmp_path)
    monkeypatch.setattr(os, "pwrite", full_after(0, os.pwrite))
    found = kiln(["run", "site", "-i", str(inv)], capsys)
    message = f"kiln: error: cannot write {lock.lock_file(inv)}: no space left on the device\n"
    assert found == (1, "", message)
    assert runs(capsys) == []


def test_a_run_cut_off_by_a_full_disk_is_marked_failed(tmp_path, monkeypatch, capsys):
    """The record says "running" before the run id reaches the lock file, which the
    full disk refuses: the record then says how it ended."""
    inv = inventory(tmp_path)
    monkeypatch.setattr(os, "pwrite", full_after(1, os.pwrite))
    found = kiln(["run", "site", "-i", str(inv)], capsys)
    message = f"kiln: error: cannot write {lock.lock_file(inv)}: no space left on the device\n"
    assert found == (1, "", message)
    (kept,) = runs(capsys)
    assert (kept["status"], kept["exit_code"], kept["finished"] is not None) == ("failed", 1, True)


def test_a_full_disk_under_ansible_runner_names_its_file(tmp_path, monkeypatch, capsys):
    written = []

    def full_runner(private_data_dir, **options):
        written.append(Path(private_data_dir) / "artifacts" / "ansible" / "stdout")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(written[0]))

    monkeypatch.setattr(ansible_runner, "run", full_runner)
    found = kiln(["run", "site", "-i", str(inventory(tmp_path))], capsys)
    assert found == (
        1,
        "",
        f"kiln: error: cannot write {written[0]}: no space left on the device\n",
    )
    (kept,) = runs(capsys)
    assert (kept["status"], kept["exit_code"]) == ("failed", 1)
    assert not list((Path(os.environ["KILN_STATE_DIR"]) / "tmp").iterdir()), "-e file removed"


# A kiln whose disk fills once its run's record says "running": the lock refuses the run
# id, and the record cannot be rewritten either.
FILLS_UP = """
import os, sys
from tests.cli.test_full_disk import full_after
os.pwrite = full_after(1, os.pwrite)
os.fsync = full_after(1, os.fsync)
sys.argv = ["kiln", *sys.argv[1:]]
from kiln.cli import main
main()
"""


def test_a_run_whose_process_ended_without_its_record_is_listed_as_lost(tmp_path, capsys):
    inv = inventory(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", FILLS_UP, "run", "site", "-i", str(inv)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = child.communicate()
    message = f"kiln: error: cannot write {lock.lock_file(inv)}: no space left on the device\n"
    assert (child.returncode, out, err) == (1, "", message)
    (kept,) = runs(capsys)
    assert (kept["status"], kept["exit_code"], kept["pid"]) == ("lost", None, child.pid)
    code, out, err = kiln(["runs", "show", kept["run"], "--json"], capsys)
    assert (code, err, json.loads(out)["status"]) == (0, "", "lost")


def test_a_running_record_is_lost_only_when_its_process_is_gone(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path))
    me, started = os.getpid(), record.process_start(os.getpid())
    gone = _ended_pid()
    here = socket.gethostname()
    cases = {
        "mine": (me, started, here),  # this process: still running
        "reused": (me, started - 1, here),  # the pid now belongs to another process
        "gone": (gone, 1, here),
        "elsewhere": (gone, 1, "other-" + here),  # another machine's: not seen from here
        "old": (None, None, None),  # written by a Kiln that kept no pid: left as written
    }
    for name, (pid, start, host) in cases.items():
        (tmp_path / "runs" / name).mkdir(parents=True)
        kept = record.RunRecord(
            run=name, playbook="site.yml", inventory="inv", kiln_version="0", started="x"
        )
        kept.pid, kept.pid_start, kept.control_host = pid, start, host
        record.save(tmp_path / "runs" / name, kept)
    found = {r.run: r.status for r in record.list_records()}
    assert found == {
        "mine": "running",
        "reused": "lost",
        "gone": "lost",
        "elsewhere": "running",
        "old": "running",
    }


def _ended_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
