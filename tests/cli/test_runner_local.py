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
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kiln.errors import ExitCode
from tests.conftest import LOCAL, REPO, run_kiln

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
    # Not a terminal (a log, a pipe): the whole id, to copy from.
    table = run_kiln("runs", "list").stdout
    assert report["run"] in table and "…" not in table
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


NOTES_PLAYBOOK = """
- name: Notes
  hosts: all
  gather_facts: false
  tasks:
    - name: Say why a node is left alone
      ansible.builtin.set_stats:
        data:
          kiln_notes: "{{ {inventory_hostname: [note ~ inventory_hostname]} }}"
      vars:
        note: "nvidia_driver: no NVIDIA GPU on "
      when: inventory_hostname != 'local-ctl'
"""


def test_roles_notes_reach_the_summary_per_host(local_inventory, tmp_path):
    """Notes travel as set_stats' kiln_notes, merged across hosts by Ansible."""
    playbook = tmp_path / "notes.yml"
    playbook.write_text(NOTES_PLAYBOOK)
    inv = local_inventory({"local-a": LOCAL, "local-b": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.OK, result.stderr
    assert json.loads(result.stdout)["notes"] == {
        "local-a": ["nvidia_driver: no NVIDIA GPU on local-a"],
        "local-b": ["nvidia_driver: no NVIDIA GPU on local-b"],
    }
    shown = run_kiln("runs", "show", "latest").stdout
    assert "note local-a: nvidia_driver: no NVIDIA GPU on local-a" in shown
    assert "note local-b: nvidia_driver: no NVIDIA GPU on local-b" in shown


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
        "unreachable ghost01: Make a change: Failed to connect to the host via ssh: "
        "ssh: connect to host 127.0.0.1 port 1: Connection refused\n" in result.stdout
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


@dataclass(frozen=True)
class Process:
    pid: int
    started: int  # clock ticks since boot: tells a reused pid from the one seen
    argv: list[str]

    def alive(self) -> bool:
        now = _read(self.pid)
        return now is not None and now.started == self.started


def _read(pid: int) -> Process | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)", which may hold spaces
    if fields[0] == "Z":  # exited, not yet reaped by its parent
        return None
    return Process(pid, int(fields[19]), [a.decode(errors="replace") for a in argv if a])


def descendants(root: int) -> dict[int, Process]:
    """The processes below `root` now, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if (process := _read(pid)) is not None:
            found[pid] = process
        todo += children.get(pid, [])
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_exits_130_and_keeps_the_record(local_inventory, tmp_path, state_dir, signum):
    """Ctrl-C, and SIGTERM as systemd or CI send it: Ansible is stopped (none left
    running), the record says canceled, exit 130."""
    slow = tmp_path / "slow.yml"
    slow.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Slow",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [{"name": "Wait", "ansible.builtin.command": "sleep 61"}],
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

    def read(event: Path) -> str:
        try:
            return event.read_text(errors="ignore")
        except FileNotFoundError:  # ansible-runner renamed it (-partial.json) meanwhile
            return ""

    def task_started() -> bool:
        # Event files are named <counter>-<uuid>.json: what happened is in their content.
        return any('"runner_on_start"' in read(p) for p in events())

    seen: dict[int, Process] = {}

    def sleeping() -> bool:  # the task's command runs, somewhere below this kiln
        seen.update(descendants(proc.pid))
        return any(p.argv == ["sleep", "61"] for p in seen.values())

    try:
        while time.monotonic() < deadline and not (task_started() and sleeping()):
            time.sleep(0.2)
        assert task_started(), "the task never started"
        assert sleeping(), "the task's sleep never ran under this kiln"
        seen.update(descendants(proc.pid))
        proc.send_signal(signum)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave the run (and its sleep) to the next test
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED
    record = json.loads(next(state_dir.glob("runs/*/kiln.json")).read_text())
    assert record["status"] == "canceled"
    assert record["exit_code"] == 130
    assert events(), "the run's events are kept"
    time.sleep(1)
    # Only this run's own processes (by pid and start time): none is left running.
    assert [p.argv for p in seen.values() if p.alive()] == []


MITOGEN_CHECK = """
- name: Which strategy runs the tasks
  hosts: all
  gather_facts: false
  tasks:
    - name: The module's interpreter is one Mitogen keeps
      ansible.builtin.shell: tr '\\0' ' ' < /proc/$PPID/cmdline | grep -q '(mitogen:'
      changed_when: false
"""


def test_kiln_runs_mitogens_strategy_unless_the_operator_names_another(local_inventory, tmp_path):
    playbook = tmp_path / "strategy.yml"
    playbook.write_text(MITOGEN_CHECK)
    inv = local_inventory({"local-a": LOCAL})
    mitogen = run_kiln("run", str(playbook), "-i", inv, "--json", env={"ANSIBLE_STRATEGY": ""})
    assert mitogen.returncode == ExitCode.OK, mitogen.stdout
    linear = run_kiln("run", str(playbook), "-i", inv, "--json", env={"ANSIBLE_STRATEGY": "linear"})
    assert linear.returncode == ExitCode.HOSTS_FAILED, linear.stdout
    failed = {f["host"] for f in json.loads(linear.stdout)["failures"]}
    assert failed == {"local-a", "local-ctl"}


KILN_TAGGED = """
- name: Steps Kiln leaves out by tag
  hosts: all
  gather_facts: false
  tasks:
    - name: Say what a real run would do
      ansible.builtin.debug:
        msg: would do it
      when: ansible_check_mode
      tags: [kiln_dry_run]
    - name: Stop here in an image
      ansible.builtin.meta: end_host
      when: kiln_image | default(false) | bool
      tags: [kiln_image]
    - name: Do it
      ansible.builtin.debug:
        msg: done
"""


def test_steps_a_run_never_takes_are_left_out_not_skipped(local_inventory, tmp_path):
    """kiln.run.skips: no result at all for a step Kiln leaves out (a step skipped by
    `when` would still count, and cost a worker); a dry run takes its own step."""
    playbook = tmp_path / "tagged.yml"
    playbook.write_text(KILN_TAGGED)
    inv = local_inventory({"local-a": LOCAL})
    counts = {"changed": 0, "failed": 0, "unreachable": 0, "skipped": 0}
    real = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert real.returncode == ExitCode.OK, real.stdout + real.stderr
    assert json.loads(real.stdout)["hosts"]["local-a"] == {"ok": 1, **counts}
    dry = run_kiln("run", str(playbook), "-i", inv, "--check", "--json")
    assert dry.returncode == ExitCode.OK, dry.stdout + dry.stderr
    assert json.loads(dry.stdout)["hosts"]["local-a"] == {"ok": 2, **counts}


def test_a_relative_inventory_path_targets_the_inventory_hosts(local_inventory, playbook):
    """`-i inventories/x` as the README writes it: the hosts of that inventory, not one
    host named after the path (ansible-runner reads an unresolvable string as content)."""
    inv = local_inventory({"local-a": LOCAL})
    parent, name = os.path.split(inv)
    result = run_kiln("run", playbook, "-i", name, "--json", cwd=parent)
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert sorted(report["hosts"]) == ["local-a", "local-ctl"]


def test_a_secret_passed_with_e_is_in_no_argv_and_no_artifact(local_inventory, playbook, tmp_path):
    secret = "c2VjcmV0LW11bmdlLWtleS0xMjM0NTY3ODk="
    state = tmp_path / "state"
    inv = local_inventory({"local-a": LOCAL})
    result = run_kiln(
        "run", playbook, "-i", inv, "--json", "-e", f"munge_key_b64={secret}",
        env={"KILN_STATE_DIR": str(state)},
    )  # fmt: skip
    assert result.returncode == ExitCode.OK, result.stderr
    run_dir = next((state / "runs").iterdir())
    command = json.loads((run_dir / "artifacts" / "ansible" / "command").read_text())
    assert secret not in " ".join(command["command"])
    assert any(arg.startswith("@") for arg in command["command"])  # -e @file
    leaked = [p for p in state.rglob("*") if p.is_file() and secret in p.read_text(errors="ignore")]
    assert leaked == []
    assert not list((state / "tmp").iterdir())  # the variables file is gone


def test_a_second_run_on_a_locked_inventory_says_who_holds_it(
    local_inventory, playbook, tmp_path, monkeypatch
):
    from pathlib import Path

    from kiln import lock

    state = tmp_path / "state"
    monkeypatch.setenv("KILN_STATE_DIR", str(state))
    inv = local_inventory({"local-a": LOCAL})
    with lock.held(Path(inv), "kiln site") as held:
        held.running("20261123-101010-site-abcd")
        second = run_kiln("run", playbook, "-i", inv)
        assert second.returncode == ExitCode.LOCKED == 7
        line = second.stderr.strip()
        assert line.startswith(f"kiln: error: {inv}: kiln site is running on this inventory (")
        assert f"pid {os.getpid()}" in line and "run 20261123-101010-site-abcd" in line
        assert not (state / "runs").exists()  # nothing ran
        validate = run_kiln("validate", "-i", inv)
        assert validate.returncode == ExitCode.LOCKED
        # A second rollout on one inventory: refused, nothing drained.
        held.running("20261127-101010-rollout-abcd")
        rollout = run_kiln("rollout", "-i", inv, "--max-unavailable", "1")
        started = json.loads(lock.lock_file(Path(inv)).read_text())["started"]
        assert (rollout.returncode, rollout.stderr.strip()) == (
            ExitCode.LOCKED,
            f"kiln: error: {inv}: kiln site is running on this inventory (pid {os.getpid()}, "
            f"run 20261127-101010-rollout-abcd, started {started}); wait for it to end",
        )
        assert not (state / "runs").exists() and not (state / "rollouts").exists()
    # Released at the end of the command (or when its process dies): runs again.
    assert run_kiln("run", playbook, "-i", inv).returncode == ExitCode.OK
    assert oct(lock.lock_file(Path(inv)).stat().st_mode & 0o777) == "0o600"


NO_REBOOT_PLAYBOOK = """
- name: A new driver waits to load on one node
  hosts: slurm_compute
  gather_facts: false
  tasks:
    - name: Plant what the nvidia_driver role found
      ansible.builtin.set_fact:
        _nvidia_driver_now:
          gpus: 8
          installed: 580.95.05
          loaded: "{{ '580.65.06' if inventory_hostname == 'local-a' else '580.95.05' }}"
          reboot_needed: "{{ inventory_hostname == 'local-a' }}"
    - name: Run the role's reboot step
      ansible.builtin.include_role:
        name: nvidia_driver
        tasks_from: reboot.yml
"""


def test_no_reboot_reports_the_nodes_that_wait_for_one(local_inventory, tmp_path):
    """`--no-reboot` reaches the nvidia_driver role, which reports instead of rebooting
    (this machine: without the flag the role would reboot it)."""
    playbook = tmp_path / "no-reboot.yml"
    playbook.write_text(NO_REBOOT_PLAYBOOK)
    inv = local_inventory({"local-a": LOCAL, "local-b": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "--no-reboot", "--json")
    assert result.returncode == ExitCode.OK, result.stderr
    report = json.loads(result.stdout)
    assert report["notes"] == {
        "local-a": [
            "nvidia_driver: driver 580.95.05 is installed, 580.65.06 is loaded: "
            "not rebooted (--no-reboot)"
        ]
    }
    assert all(h["changed"] == 0 for h in report["hosts"].values()), report["hosts"]


TIMED_PLAYBOOK = """
- name: Timed
  hosts: all
  gather_facts: false
  tasks:
    - name: Quick
      ansible.builtin.debug:
        msg: quick
    - name: Slow on one host
      # A margin well above the module's own start-up time on a loaded CI machine.
      ansible.builtin.command: sleep {{ 4 if inventory_hostname == 'local-b' else 0 }}
      changed_when: false
"""


def test_runs_show_lists_the_slowest_tasks_from_the_real_events(local_inventory, tmp_path):
    playbook = tmp_path / "timed.yml"
    playbook.write_text(TIMED_PLAYBOOK)
    # Mitogen runs the tasks of hosts with the same connection in one interpreter, one
    # after another; local-b gets its own, as every real node has.
    own_python = tmp_path / "python3"
    own_python.symlink_to(sys.executable)
    local_b = {**LOCAL, "ansible_python_interpreter": str(own_python)}
    inv = local_inventory({"local-a": LOCAL, "local-b": local_b})
    assert run_kiln("run", str(playbook), "-i", inv).returncode == ExitCode.OK
    shown = run_kiln("runs", "show", "latest", "--slowest", "1", "--json")
    assert shown.returncode == ExitCode.OK, shown.stderr
    (slowest,) = json.loads(shown.stdout)["slowest"]
    assert {k: slowest[k] for k in ("task", "hosts", "slowest_host")} == {
        "task": "Slow on one host",
        "hosts": 3,  # local-ctl, local-a, local-b
        "slowest_host": "local-b",
    }
    assert slowest["seconds"] >= slowest["slowest_seconds"] >= 4.0
    people = run_kiln("runs", "show", "latest", "--slowest", "2")
    assert people.returncode == ExitCode.OK, people.stderr
    assert "slowest 2 tasks" in people.stdout and "Slow on one host" in people.stdout


APT_PRESENT = """
- name: apt_present through kiln
  hosts: local-a
  gather_facts: false
  tasks:
    - name: Installed as asked
      kiln.cluster.apt_present:
        name: [coreutils, "dpkg={{ dpkg_version }}", "dpkg={{ dpkg_version[:2] }}*"]
        state: present
      register: present
    - name: Another version than the installed one
      kiln.cluster.apt_present:
        name: dpkg=0.0-kiln
        state: present
        cache_valid_time: 2000000000  # apt's answer whatever the lists' age
      check_mode: true
      register: other
      ignore_errors: true
    - name: Purged already
      kiln.cluster.apt_present:
        name: [kiln-no-such-package]
        state: absent
        purge: true
      register: absent
    - name: A cache update asked for on lists older than asked, for a package installed
      kiln.cluster.apt_present:
        name: coreutils
        update_cache: true
        cache_valid_time: 1
      register: cached
    - name: What each did
      ansible.builtin.copy:
        content: "{{ dict(present=present, other=other, absent=absent, cached=cached) | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def test_apt_present_asks_dpkg_and_leaves_the_rest_to_apt(local_inventory, tmp_path):
    """Installed at the version asked, or not installed for state=absent: ok without apt.
    Otherwise ansible.builtin.apt runs with the task's arguments, in check mode here: its
    answer is apt's."""
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True, text=True, check=True
    ).stdout
    playbook, out = tmp_path / "apt.yml", tmp_path / "results.json"
    playbook.write_text(APT_PRESENT)
    # The system's interpreter: apt's module runs under it (python3-apt or not).
    inv = local_inventory({"local-a": {**LOCAL, "ansible_python_interpreter": "/usr/bin/python3"}})
    extra = ("-e", f"dpkg_version={version}", "-e", f"out={out}")
    done = run_kiln("run", str(playbook), "-i", inv, "--json", *extra)
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["present"] == {
        "changed": False,
        "failed": False,
        "msg": f"installed: coreutils, dpkg={version}, dpkg={version[:2]}*",
    }
    # Nothing to remove, nothing to install: dpkg answers, whatever the lists' age.
    assert results["absent"] == {
        "changed": False,
        "failed": False,
        "msg": "not installed (purged): kiln-no-such-package",
    }
    assert results["cached"] == {"changed": False, "failed": False, "msg": "installed: coreutils"}
    # apt's own answer (its cache's time varies; no traceback is kept).
    other = {
        k: v for k, v in results["other"].items() if k not in {"cache_update_time", "exception"}
    }
    assert other == {
        "cache_updated": False,
        "changed": False,
        "failed": True,
        "msg": "no available installation candidate for dpkg=0.0-kiln",
    }


BASE_PREFLIGHT = """
- name: The base role's pre-flight, with values its files cannot hold
  hosts: all
  gather_facts: false
  vars:
    base_apt_proxy: 'http://proxy:3142"; APT::Update::Pre-Invoke {"touch /tmp/kiln-pwned"};'
    base_sysctl: {vm.max_map_count: "1048576\\nkernel.core_pattern = |/tmp/x"}
  tasks:
    - name: Run it as the role's first step does
      ansible.builtin.import_role:
        name: base
        tasks_from: preflight
    - name: Never reached
      ansible.builtin.command: "true"
      changed_when: true
"""


def test_the_base_role_refuses_config_injection_before_writing(local_inventory, tmp_path):
    """The role's own check (kiln.roles.base through its filter) on values that never passed
    `kiln inventory check` (play variables): every node refused, nothing run, exit 2."""
    playbook = tmp_path / "base.yml"
    playbook.write_text(BASE_PREFLIGHT)
    inv = local_inventory({"local-a": LOCAL, "local-b": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    report = json.loads(result.stdout)
    message = (
        'base_apt_proxy \'http://proxy:3142"; APT::Update::Pre-Invoke {"touch '
        "/tmp/kiln-pwned\"};': expected a URL (http://host:3142/...) of the characters URLs "
        "allow: no spaces, quotes or line breaks; base_sysctl vm.max_map_count "
        "'1048576\\nkernel.core_pattern = |/tmp/x': must be one line: no line breaks or other "
        "control characters, no '\\' at the end"
    )
    assert {(f["host"], f["message"]) for f in report["failures"]} == {
        (host, message) for host in ("local-ctl", "local-a", "local-b")
    }
    assert all(h["changed"] == 0 for h in report["hosts"].values()), report["hosts"]


# Every role's first task (roles/base/tasks/values.yml, imported by name).
VALUES_TASK = "Pre-flight: check the values the role writes into files and command lines"

# site.yml's pre-flight play, then a step it must never reach.
SITE_PREFLIGHT = """
- name: Pre-flight
  ansible.builtin.import_playbook: {preflight}

- name: Never reached
  hosts: all
  gather_facts: false
  tasks:
    - name: Never reached
      ansible.builtin.command: "true"
      changed_when: true
"""


def test_the_site_preflight_checks_every_roles_values_on_the_nodes_it_runs_on(
    local_inventory, tmp_path
):
    """site.yml's pre-flight play checks, in one step on each node, the values of every role
    the node gets, as each role's own first step would (which a whole site.yml run then
    leaves out): values no inventory check could judge (Jinja, resolved by Ansible), the
    enroot role's on a compute node, base's on another; every node stopped, exit 2."""
    playbook = tmp_path / "site-preflight.yml"
    playbook.write_text(SITE_PREFLIGHT.format(preflight=REPO / "playbooks" / "preflight.yml"))
    inv = local_inventory(
        {
            "local-a": {**LOCAL, "enroot_base_url": "{{ 'file:///../../etc' }}"},
            "local-b": {**LOCAL, "base_apt_proxy": "{{ 'http://proxy:3142 x' }}"},
        }
    )
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert {(f["host"], f["task"], f["message"]) for f in report["failures"]} == {
        (
            "local-a",
            VALUES_TASK,
            "enroot_base_url 'file:///../../etc': expected an http, https, ftp or file URL of "
            "the characters URLs allow (no spaces, quotes or line breaks), with a host (but "
            "file:) and no '.' or '..' in its path, nor '?' or '#' (Kiln adds a file name to it)",
        ),
        (
            "local-b",
            VALUES_TASK,
            "base_apt_proxy 'http://proxy:3142 x': expected a URL (http://host:3142/...) of the "
            "characters URLs allow: no spaces, quotes or line breaks",
        ),
    }
    # The controller gets no enroot and holds no bad value: it passed, stopped with the rest
    # (the OS read, the argument specs, the values).
    assert {h: (c["ok"], c["changed"], c["failed"]) for h, c in report["hosts"].items()} == {
        "local-ctl": (3, 0, 0),
        "local-a": (2, 0, 1),
        "local-b": (2, 0, 1),
    }


SLURM_ROLE = """
- name: The slurm role, with values its config files cannot hold
  hosts: all
  gather_facts: false
  vars:
    slurm_partitions: [{name: batch, max_time: "60\\nPrologSlurmctld=/tmp/kiln-pwned"}]
    slurm_dbd_password: "s3cret\\nPluginDir=/tmp"
  roles:
    - slurm
"""


def test_the_slurm_role_refuses_config_injection_before_installing_anything(
    local_inventory, tmp_path
):
    """The role's first task (kiln.roles.slurm's checks through kiln_value_problems) on values
    that never passed `kiln inventory check` (play variables): every node refused before
    the role installs or writes anything, exit 2, the password never shown."""
    playbook = tmp_path / "slurm.yml"
    playbook.write_text(SLURM_ROLE)
    inv = local_inventory({"local-a": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    report = json.loads(result.stdout)
    word = "must be one word of printable ASCII: no spaces, line breaks, '\"', '#' or '\\'"
    message = (
        f"slurm_dbd_password {word} (slurmdbd.conf's StoragePass); "
        "slurm_partitions: partition batch: max_time '60\\nPrologSlurmctld=/tmp/kiln-pwned': "
        "expected INFINITE, minutes (60), or [days-]hours:minutes:seconds (1-00:00:00)"
    )
    assert {(f["host"], f["task"], f["message"]) for f in report["failures"]} == {
        (host, VALUES_TASK, message) for host in ("local-ctl", "local-a")
    }
    # Nothing ran before it but Ansible's check of the role's argument spec (ok 1).
    assert {h: (c["ok"], c["changed"], c["skipped"]) for h, c in report["hosts"].items()} == {
        "local-ctl": (1, 0, 0),
        "local-a": (1, 0, 0),
    }


# Each role's first task checks its values by their kinds (kiln.setting_kinds) on what
# Ansible resolved: a role run alone, with play variables no inventory check saw.
ROLE_WITH = """
- name: The {role} role, with a value its files cannot hold
  hosts: all
  gather_facts: false
  vars: {variables}
  roles:
    - {role}
"""


@pytest.mark.parametrize(
    ("role", "variables", "message"),
    [
        (
            "monitoring",
            {"monitoring_grafana_repository_suite": "stable\nTrusted: yes"},
            "monitoring_grafana_repository_suite 'stable\\nTrusted: yes': must be one word of "
            "printable ASCII: no spaces, line breaks, '\"', '#' or '\\'",
        ),
        (
            "monitoring",  # a value the role works out itself: the listen address
            {"kiln_address": "10.0.0.1 --web.enable-admin-api"},
            "monitoring_listen_address '10.0.0.1 --web.enable-admin-api': must be one word of "
            "printable ASCII: no spaces, line breaks, '\"', '#' or '\\'",
        ),
        (
            "health",
            {"health_active_results_dir": "/var/lib/kiln/../../../etc/cron.d"},
            "health_active_results_dir '/var/lib/kiln/../../../etc/cron.d': expected an "
            "absolute path of letters, digits and . _ + - /, with no '.' or '..' part, no '//' "
            "and no '/' at the end",
        ),
        (
            "nvidia_driver",
            {"nvidia_driver_imex_address": "gpu001"},
            "nvidia_driver_imex_address 'gpu001': is not an IP address (10.0.0.1, fd00::1)",
        ),
        (
            "enroot",  # before the role stops for want of a release
            {"enroot_base_url": "file:///../../etc"},
            "enroot_base_url 'file:///../../etc': expected an http, https, ftp or file URL of "
            "the characters URLs allow (no spaces, quotes or line breaks), with a host (but "
            "file:) and no '.' or '..' in its path, nor '?' or '#' (Kiln adds a file name to it)",
        ),
    ],
)
def test_each_role_refuses_a_value_its_files_cannot_hold_before_anything_else(
    local_inventory, tmp_path, role, variables, message
):
    playbook = tmp_path / "role.yml"
    playbook.write_text(ROLE_WITH.format(role=role, variables=json.dumps(variables)))
    inv = local_inventory({"local-a": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert {(f["host"], f["task"], f["message"]) for f in report["failures"]} == {
        (host, VALUES_TASK, message) for host in ("local-ctl", "local-a")
    }
    # Nothing ran before it but Ansible's check of the role's argument spec.
    assert {h: (c["ok"], c["changed"]) for h, c in report["hosts"].items()} == {
        "local-ctl": (1, 0),
        "local-a": (1, 0),
    }


# The nvidia_driver role's pre-flight on nodes whose slurmd runs (a stand-in systemctl
# says so) with driver 580.65.06 installed (their kiln_gpu local fact) and none loaded:
# each would wait for a reboot. A stand-in scontrol lists none out of service.
REBOOT_PREFLIGHT_PLAYBOOK = """
- name: Pre-flight
  hosts: all
  gather_facts: false
  tags: [always]
  environment:
    PATH: "{bin}:{{{{ lookup('env', 'PATH') }}}}"
  module_defaults:
    ansible.builtin.setup:
      fact_path: {facts}
  tasks:
    - name: The reboots a driver change would need on nodes in Slurm
      ansible.builtin.import_role:
        name: nvidia_driver
        tasks_from: preflight
"""

# The same nodes, the role run alone (no site pre-flight play before it, as in Molecule or
# playbooks/nvidia_driver.yml): its own pre-flight refuses before anything is installed.
REBOOT_ROLE_ALONE_PLAYBOOK = """
- name: The nvidia_driver role alone
  hosts: all
  gather_facts: false
  environment:
    PATH: "{bin}:{{{{ lookup('env', 'PATH') }}}}"
  module_defaults:
    ansible.builtin.setup:
      fact_path: {facts}
  roles:
    - nvidia_driver
"""


@pytest.mark.parametrize(
    ("template", "cap", "code"),
    [
        (REBOOT_PREFLIGHT_PLAYBOOK, 1, ExitCode.BAD_INPUT),
        (REBOOT_PREFLIGHT_PLAYBOOK, "100%", ExitCode.OK),
        (REBOOT_ROLE_ALONE_PLAYBOOK, 1, ExitCode.BAD_INPUT),
    ],
    ids=["preflight-refused", "preflight-allowed", "role-alone-refused"],
)
def test_a_driver_change_on_more_nodes_in_slurm_than_allowed_is_refused(
    local_inventory, tmp_path, template, cap, code
):
    bin_dir, facts = tmp_path / "bin", tmp_path / "facts"
    bin_dir.mkdir()
    facts.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho active\n")
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho NodeName=local-a State=IDLE\n")
    for stand_in in bin_dir.iterdir():
        stand_in.chmod(0o755)
    (facts / "kiln_gpu.fact").write_text(
        json.dumps({"gpu_count": 8, "driver": {"installed": "580.65.06"}})
    )
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(template.format(bin=bin_dir, facts=facts))
    node = {**LOCAL, "rollout_max_unavailable": cap}
    inv = local_inventory({"local-a": node, "local-b": node})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == code, result.stderr
    report = json.loads(result.stdout)
    refusal = (
        "2 nodes in Slurm would need a reboot for driver 580.65.06; rollout_max_unavailable "
        f"(1) allows 1: apply it with `kiln rollout -i {inv}`"
    )
    task = "Pre-flight: refuse more reboots of nodes in Slurm than rollout_max_unavailable allows"
    expected = (
        [{"host": h, "task": task, "message": refusal} for h in ("local-a", "local-b", "local-ctl")]
        if code == ExitCode.BAD_INPUT
        else []
    )
    assert sorted(report["failures"], key=lambda f: f["host"]) == expected
    assert report["reboots"] == {}
    assert all(h["changed"] == 0 for h in report["hosts"].values()), report["hosts"]


# The role's reboot step on nodes whose slurmd runs (a stand-in systemctl says so) and
# whose new driver waits to load (the role's view, planted): they are left to kiln
# rollout. --check as well, so no path of the step may reboot this machine.
REBOOT_STEP_PLAYBOOK = """
- name: A new driver waits to load on nodes in Slurm
  hosts: slurm_compute
  gather_facts: false
  environment:
    PATH: "{bin}:{{{{ lookup('env', 'PATH') }}}}"
  tasks:
    - name: Plant what the role found
      ansible.builtin.set_fact:
        _nvidia_driver_now:
          gpus: 8
          installed: 580.95.05
          loaded: 580.65.06
          reboot_needed: "{{{{ inventory_hostname == 'local-a' }}}}"
    - name: Run the role's reboot step
      ansible.builtin.include_role:
        name: nvidia_driver
        tasks_from: reboot.yml
"""


@pytest.mark.parametrize("no_reboot", [False, True])
def test_nodes_in_slurm_that_wait_for_a_reboot_are_left_to_kiln_rollout(
    local_inventory, tmp_path, no_reboot
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho active\n")
    (bin_dir / "systemctl").chmod(0o755)
    playbook = tmp_path / "reboot.yml"
    playbook.write_text(REBOOT_STEP_PLAYBOOK.format(bin=bin_dir))
    inv = local_inventory({"local-a": LOCAL, "local-b": LOCAL})
    options = ["--no-reboot"] if no_reboot else []
    result = run_kiln("run", str(playbook), "-i", inv, "--check", "--json", *options)
    assert result.returncode == ExitCode.OK, result.stderr
    report = json.loads(result.stdout)
    why = (
        "not rebooted (--no-reboot)"
        if no_reboot
        else ("slurmd runs here: kiln rollout reboots it through Slurm")
    )
    assert (report["reboots"], report["notes"]) == (
        {} if no_reboot else {"local-a": "kiln: driver 580.95.05"},
        {"local-a": [f"nvidia_driver: driver 580.95.05 is installed, 580.65.06 is loaded: {why}"]},
    )


def test_the_site_preflight_checks_every_roles_argument_spec_once(local_inventory, tmp_path):
    """site.yml applies the roles at their `site` entry point, without the argument spec
    check Ansible adds at `main`: its pre-flight play makes it, in one step on each node,
    for every role the node gets. A value of the wrong type that no inventory check could
    judge (Jinja) stops every node there, exit 2, nothing changed."""
    playbook = tmp_path / "site-preflight.yml"
    playbook.write_text(SITE_PREFLIGHT.format(preflight=REPO / "playbooks" / "preflight.yml"))
    inv = local_inventory({"local-a": {**LOCAL, "health_timeout": "{{ 'soon' }}"}})
    result = run_kiln("run", str(playbook), "-i", inv, "--json")
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [(f["host"], f["task"], f["message"]) for f in report["failures"]] == [
        (
            "local-a",
            "Pre-flight: check each role's variables against its argument spec",
            "Validation of arguments failed: argument 'health_timeout' is of type str and we "
            "were unable to convert to int: \"'soon'\" cannot be converted to an int",
        )
    ]
    assert {h: (c["ok"], c["changed"], c["failed"]) for h, c in report["hosts"].items()} == {
        "local-ctl": (2, 0, 0),
        "local-a": (1, 0, 1),
    }
