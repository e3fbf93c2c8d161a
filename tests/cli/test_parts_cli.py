"""`kiln provision --slices N --part NAME` and $KILN_FACT_CACHE: one provision spread
over several control machines that share a fact cache. Bad input through the real
`kiln` process; then two "machines" (two state directories, one shared fact cache)
running their parts through the real command line and ansible-runner on local hosts,
with a playbook of site.yml's shape (site.yml needs real nodes: the lab), as
test_slices_cli.py does for a sliced run on one machine."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from kiln import inventory, lock
from kiln.errors import ExitCode
from tests.cli import test_slices_cli
from tests.conftest import LOCAL, cluster_inventory, run_kiln
from tests.unit.test_slices import provisioned


def no_runs():
    """Nothing ran: no run record in this machine's state directory."""
    return json.loads(run_kiln("runs", "list", "--json").stdout) == {"runs": []}


PARTS = "slice-1, slice-2, controllers, slurm-1, slurm-2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--part", "slice-1"],
            "--part needs --slices N: a part (slice-K, controllers, slurm-K) is one of the "
            "runs --slices N makes",
        ),
        (
            ["--slices", "2", "--part", "slice-3"],
            f"--part 'slice-3': no such part of 2 slices ({PARTS})",
        ),
        (
            ["--slices", "2", "--part", "slurm-1", "--check"],
            "--part 'slurm-1': no such part of 2 slices (slice-1, slice-2, controllers)",
        ),
        (
            ["--slices", "2", "--part", ""],
            "--part '': an empty value is refused: give one, or leave --part out",
        ),
    ],
)
def test_a_bad_part_exits_2_with_one_line(write_inventory, state_dir, args, message):
    provisioned(state_dir)
    result = run_kiln("provision", "-i", str(write_inventory()), *args)
    assert (result.returncode, result.stdout) == (ExitCode.BAD_INPUT, "")
    assert result.stderr == f"kiln: error: {message}\n"
    assert no_runs()


@pytest.mark.parametrize(
    "args",
    [
        ["provision"],
        ["provision", "--slices", "2", "--part", "slice-1"],
        ["inventory", "check"],
    ],
)
def test_a_fact_cache_that_is_not_a_directory_exits_2(write_inventory, state_dir, tmp_path, args):
    provisioned(state_dir)
    not_a_directory = tmp_path / "facts.txt"
    not_a_directory.write_text("")
    result = run_kiln(
        *args, "-i", str(write_inventory()), env={"KILN_FACT_CACHE": str(not_a_directory)}
    )
    assert (result.returncode, result.stdout) == (ExitCode.BAD_INPUT, "")
    assert result.stderr == f"kiln: error: $KILN_FACT_CACHE {not_a_directory}: not a directory\n"
    assert no_runs()


def test_an_empty_fact_cache_variable_exits_2(write_inventory, state_dir):
    result = run_kiln("provision", "-i", str(write_inventory()), env={"KILN_FACT_CACHE": ""})
    assert (result.returncode, result.stderr) == (
        ExitCode.BAD_INPUT,
        "kiln: error: $KILN_FACT_CACHE is empty: name a directory, or unset it\n",
    )


def test_a_part_is_run_under_this_machines_lock(write_inventory, state_dir):
    provisioned(state_dir)
    inv = write_inventory()
    with lock.held(inventory.load(inv).path, "kiln site --part slice-2"):
        result = run_kiln("provision", "-i", str(inv), "--slices", "2", "--part", "slice-1")
    assert result.returncode == ExitCode.LOCKED
    assert "kiln site --part slice-2 is running on this inventory" in result.stderr
    assert no_runs()


# test_slices_cli's playbook (a compute fact cached by the slices, read by the
# controllers' run; gpu2 fails), each compute node first waiting for every other: the
# two machines' slices end only if they ran at once (one machine's lock blocking the
# other's would time this out).
START_TOGETHER = """
- name: Say this node has started
  ansible.builtin.copy:
    dest: "{{ out }}/{{ inventory_hostname }}.started"
    content: ""
    mode: "0644"
  when: inventory_hostname in groups['slurm_compute']
- name: Wait for every compute node, whichever machine runs it
  ansible.builtin.wait_for:
    path: "{{ out }}/{{ item }}.started"
    timeout: 90
  loop: "{{ groups['slurm_compute'] }}"
  when: inventory_hostname in groups['slurm_compute']
"""


def shape_playbook() -> str:
    plays = yaml.safe_load(test_slices_cli.PLAYBOOK)
    plays[0]["tasks"][1:1] = yaml.safe_load(START_TOGETHER)  # after the cached fact
    return yaml.safe_dump(plays, sort_keys=False)


# The real command line (kiln.cli.main: options, errors, lock, record), `kiln provision`
# running the playbook named in $TEST_PLAYBOOK instead of site.yml.
KILN_WITH_OUR_PLAYBOOK = """
import os
from kiln import cli
from kiln.commands import playbook
run = playbook._run
playbook._run = lambda site, **options: run(os.environ["TEST_PLAYBOOK"], **options)
cli.main()
"""


def test_two_machines_run_their_slices_at_once_sharing_one_fact_cache(
    write_inventory, tmp_path, state_dir
):
    shared = tmp_path / "shared" / "facts"
    provisioned(shared.parent)  # the first controller's facts, from the first provision
    compute = ["gpu1", "gpu2", "gpu3", "gpu4"]
    hosts = cluster_inventory(compute=compute, controllers=("ctl1",))
    for group in hosts["all"]["children"].values():
        group["hosts"] = {name: LOCAL for name in group["hosts"]}
    # One inventory path on both machines: only their state directories differ.
    inv = inventory.load(write_inventory(hosts)).path
    playbook = tmp_path / "shape.yml"
    playbook.write_text(shape_playbook())
    machines = {"A": tmp_path / "state-a", "B": tmp_path / "state-b"}

    def env(machine):
        return {"KILN_STATE_DIR": str(machines[machine]), "KILN_FACT_CACHE": str(shared)}

    def start(machine, part):
        args = ["provision", "-i", str(inv), "--slices", "2", "--part", part, "--json"]
        return subprocess.Popen(
            [sys.executable, "-c", KILN_WITH_OUR_PLAYBOOK, *args, "-e", f"out={tmp_path}"],
            env={**os.environ, **env(machine), "TEST_PLAYBOOK": str(playbook)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(process, code=ExitCode.OK):
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == code, stderr
        return json.loads(stdout)

    # Phase 1, side by side: slice-1 on A, slice-2 on B. gpu2 fails: exit 4 on A only.
    slice_1, slice_2 = start("A", "slice-1"), start("B", "slice-2")
    ran = {"slice-1": result(slice_1, ExitCode.HOSTS_FAILED), "slice-2": result(slice_2)}
    # Phase 2, once both ended (after a failed slice too, as --slices goes on): the
    # controllers on A, reading B's slice's facts from the shared cache.
    ran["controllers"] = result(start("A", "controllers"))

    assert (tmp_path / "nodes.txt").read_text() == "gpu1-shape gpu2-shape gpu3-shape gpu4-shape"
    compute_node = {"ok": 3, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 2}
    expected = {
        "slice-1": {
            "status": "failed",
            "hosts": {
                "gpu1": compute_node,
                "gpu2": {"ok": 3, "changed": 1, "failed": 1, "unreachable": 0, "skipped": 0},
            },
            "failures": [
                {"host": "gpu2", "task": "Fail on the broken node", "message": "disk on fire"}
            ],
        },
        "slice-2": {
            "status": "successful",
            "hosts": {"gpu3": compute_node, "gpu4": compute_node},
            "failures": [],
        },
        "controllers": {
            "status": "successful",
            "hosts": {"ctl1": {"ok": 1, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 4}},
            "failures": [],
        },
    }
    for part, summary in ran.items():
        assert summary == {
            "run": summary["run"],
            "playbook": "shape.yml",
            **expected[part],
            "notes": {},
            "reboots": {},
        }

    # Each machine has its own parts' records, and no fact cache of its own.
    def records(machine):
        listed = run_kiln("runs", "list", "--json", env=env(machine))
        return [
            (r["run"], r["playbook"], r["limit"], r["slices"], r["part"], r["parts"], r["status"])
            for r in json.loads(listed.stdout)["runs"]
        ]

    def record_of(part, limit):
        return (ran[part]["run"], "shape.yml", limit, 2, part, [], ran[part]["status"])

    assert records("A") == [record_of("controllers", "ctl1"), record_of("slice-1", "gpu1,gpu2")]
    assert records("B") == [record_of("slice-2", "gpu3,gpu4")]
    for machine, state in machines.items():
        assert not (state / "facts").exists(), machine
        assert sorted(p.name for p in (state / "locks").iterdir()) == [lock.lock_file(inv).name], (
            machine
        )
    # `kiln runs list` names the part (its limit does not say which it was).
    table = run_kiln("runs", "list", env=env("B")).stdout.splitlines()
    started = json.loads(run_kiln("runs", "list", "--json", env=env("B")).stdout)["runs"][0]
    row = [ran["slice-2"]["run"], "shape.yml", "(slice-2", "of", "2)", "successful", "0"]
    assert [line.split() for line in table] == [
        ["run", "playbook", "status", "exit", "started", "limit"],
        [*row, started["started"], "gpu3,gpu4"],
    ]
    shown = run_kiln("runs", "show", ran["slice-2"]["run"], "--json", env=env("B"))
    assert json.loads(shown.stdout) == ran["slice-2"]
    assert sorted(p.name for p in shared.iterdir()) == [f"s1_{h}" for h in ["ctl1", *compute]]
