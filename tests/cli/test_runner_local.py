"""Real ansible-runner runs through the `kiln` process, against this machine.

The inventory's hosts are local connections (and one host that does not exist), so
the runner, its events, the summary, the record and the exit codes are all real.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from kiln.errors import ExitCode
from tests.conftest import run_kiln

LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}

PLAYBOOK = """
- name: Local checks
  hosts: all
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.debug:
        msg: hello
    - name: Make a change
      ansible.builtin.command: "true"
      changed_when: true
    - name: Fail on the broken node
      ansible.builtin.fail:
        msg: "disk on fire: /dev/nvme0n1 is read-only"
      when: inventory_hostname == 'local-broken'
    - name: Loop with a failing item
      ansible.builtin.command: "test {{ item }} -lt 2"
      loop: [1, 2]
      when: inventory_hostname == 'local-loop'
    - name: Last task
      ansible.builtin.debug:
        msg: done
"""


@pytest.fixture
def local_inventory(write_inventory):
    def make(compute: dict) -> str:
        hosts = {
            "all": {
                "children": {
                    "slurm_controller": {"hosts": {"local-ctl": LOCAL}},
                    "slurm_compute": {"hosts": compute},
                }
            }
        }
        return str(write_inventory(hosts))

    return make


@pytest.fixture
def playbook(tmp_path):
    path = tmp_path / "checks.yml"
    path.write_text(PLAYBOOK)
    return str(path)


def test_success_json_and_kept_record(local_inventory, playbook):
    inv = local_inventory({"local-a": LOCAL})
    result = run_kiln("run", playbook, "-i", inv, "--json")
    assert result.returncode == ExitCode.OK, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "successful"
    assert report["playbook"] == "checks.yml"
    assert report["failures"] == []
    assert report["hosts"]["local-a"] == {
        "ok": 3,
        "changed": 1,
        "failed": 0,
        "unreachable": 0,
        "skipped": 2,
    }
    listed = json.loads(run_kiln("runs", "list", "--json").stdout)["runs"]
    assert [r["run"] for r in listed] == [report["run"]]
    assert listed[0]["exit_code"] == 0
    shown = run_kiln("runs", "show", report["run"][:15], "--json")
    assert json.loads(shown.stdout) == report


def test_a_failed_host_is_summarized_and_the_others_continue(local_inventory, playbook):
    inv = local_inventory({"local-a": LOCAL, "local-broken": LOCAL, "local-loop": LOCAL})
    result = run_kiln("run", playbook, "-i", inv, "--json")
    assert result.returncode == ExitCode.HOSTS_FAILED
    report = json.loads(result.stdout)
    assert report["status"] == "failed"
    assert report["hosts"]["local-broken"]["failed"] == 1
    assert report["hosts"]["local-a"]["failed"] == 0
    assert report["hosts"]["local-a"]["ok"] == 3  # ran to the last task
    assert {
        "host": "local-broken",
        "task": "Fail on the broken node",
        "message": "disk on fire: /dev/nvme0n1 is read-only",
    } in report["failures"]
    loop = next(f for f in report["failures"] if f["host"] == "local-loop")
    assert loop["task"] == "Loop with a failing item"
    assert "non-zero return code" in loop["message"]


def test_unreachable_host_is_named_and_exit_4(local_inventory, playbook):
    ghost = {
        "ansible_host": "127.0.0.1",
        "ansible_port": 1,
        "ansible_user": "root",
        "ansible_ssh_common_args": "-o ConnectTimeout=3",
    }
    inv = local_inventory({"local-a": LOCAL, "ghost01": ghost})
    result = run_kiln("run", playbook, "-i", inv)
    assert result.returncode == ExitCode.HOSTS_FAILED
    # Plain output without a terminal: one line per event, then the summary.
    assert "changed     local-a  Make a change" in result.stdout
    assert (
        "unreachable ghost01: Make a change: Failed to connect to the host via ssh" in result.stdout
    )
    assert "exit=4" in result.stdout
    shown = json.loads(run_kiln("runs", "show", "latest", "--json").stdout)
    assert shown["hosts"]["ghost01"]["unreachable"] == 1
    assert shown["hosts"]["local-a"]["ok"] == 3


def test_playbook_error_outside_hosts_exits_1(local_inventory, tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("- hosts: all\n  tasks:\n    - name: x\n      no.such.module: {}\n")
    result = run_kiln("run", str(broken), "-i", local_inventory({"local-a": LOCAL}), "--json")
    assert result.returncode == ExitCode.FAILED
    report = json.loads(result.stdout)
    assert "no.such.module" in report["error"]


def test_ctrl_c_exits_130_and_keeps_the_record(local_inventory, tmp_path, state_dir):
    slow = tmp_path / "slow.yml"
    slow.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Slow",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [{"name": "Wait", "ansible.builtin.command": "sleep 60"}],
                }
            ]
        )
    )
    inv = local_inventory({"local-a": LOCAL})
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiln", "run", str(slow), "-i", inv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 60
    events = lambda: list(state_dir.glob("runs/*/artifacts/ansible/job_events/*.json"))  # noqa: E731
    while time.monotonic() < deadline and not any("runner_on_start" in p.name for p in events()):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED
    record = json.loads(next(state_dir.glob("runs/*/kiln.json")).read_text())
    assert record["status"] == "canceled"
    assert record["exit_code"] == 130
    assert events(), "the run's events are kept"
