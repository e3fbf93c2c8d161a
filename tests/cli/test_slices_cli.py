"""`kiln provision --slices N`: bad input through the real `kiln` process, and a sliced
run through real ansible-runner runs on local hosts (site.yml needs real nodes: the
lab; here a playbook of the same shape, a compute fact cached by the slices and read by
the controllers' run)."""

import json

import pytest

from kiln import inventory, lock
from kiln.errors import ExitCode
from kiln.run import display, record, slices
from kiln.run.events import Failure, HostCounts
from kiln.run.execute import RunRequest
from kiln.run.sliced import run_sliced
from tests.conftest import LOCAL, cluster_inventory, run_kiln
from tests.unit.test_slices import provisioned


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slices", "0"], "Invalid value for '--slices': 0 is not in the range x>=1."),
        (
            ["--slices", "2", "--limit", "gpu001"],
            "kiln: error: --slices with --limit: slices split the whole inventory's "
            "compute nodes; run --limit without --slices",
        ),
    ],
)
def test_bad_slices_exit_2_with_one_line(write_inventory, args, message):
    result = run_kiln("provision", "-i", str(write_inventory()), *args)
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.strip().splitlines()[-1].endswith(message)
    assert "Traceback" not in result.stderr


def test_never_provisioned_exits_2(write_inventory):
    result = run_kiln("provision", "-i", str(write_inventory()), "--slices", "2")
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr == (
        "kiln: error: --slices: ctl1 has no cached facts (never provisioned from here): "
        "provision the cluster once unsliced; the slices' nodes take the munge key and "
        "slurmctld from it\n"
    )


def test_more_slices_than_compute_nodes_warn_and_clamp(write_inventory, state_dir):
    """Checked up to the lock: held here, so nothing runs after the warning."""
    provisioned(state_dir)
    inv = write_inventory()
    with lock.held(inventory.load(inv).path, "kiln provision"):
        result = run_kiln("provision", "-i", str(inv), "--slices", "5")
    assert result.stderr.splitlines()[0] == (
        "kiln: warning: --slices 5: 2 compute node(s), so 2 slice(s)"
    )
    assert result.returncode == ExitCode.LOCKED


def test_the_lock_is_taken_before_any_slice_runs(write_inventory, state_dir):
    provisioned(state_dir)
    inv = write_inventory()
    with lock.held(inventory.load(inv).path, "kiln provision"):
        result = run_kiln("provision", "-i", str(inv), "--slices", "2")
    assert result.returncode == ExitCode.LOCKED
    assert "kiln provision is running on this inventory" in result.stderr
    assert run_kiln("runs", "list", "--json").stdout.count('"run"') == 0


PLAYBOOK = """
- name: Every node
  hosts: all
  gather_facts: false
  tasks:
    - name: Cache a fact the controllers' run reads
      ansible.builtin.set_fact:
        shape: "{{ inventory_hostname }}-shape"
        cacheable: true
      when: inventory_hostname in groups['slurm_compute']
    - name: Fail on the broken node
      ansible.builtin.fail:
        msg: "disk on fire"
      when: inventory_hostname == 'gpu2'
    # As the slurm role reads shapes (kiln.roles.slurm.cached_fact): from the cache, a
    # cacheable fact of a host outside the run is in its ansible_facts.
    - name: Write slurm.conf's nodes from every compute node's cached facts
      ansible.builtin.copy:
        dest: "{{ out }}/nodes.txt"
        content: >-
          {{ groups['slurm_compute'] | map('extract', hostvars, ['ansible_facts', 'shape'])
             | join(' ') }}
        mode: "0644"
      when: inventory_hostname in groups['slurm_controller']
"""


def test_a_sliced_run_is_one_record_and_a_failed_slice_stops_no_other(
    write_inventory, tmp_path, state_dir
):
    provisioned(state_dir)
    compute = ["gpu1", "gpu2", "gpu3", "gpu4"]
    hosts = cluster_inventory(compute=compute, controllers=("ctl1",))
    for group in hosts["all"]["children"].values():
        group["hosts"] = {name: LOCAL for name in group["hosts"]}
    spec = inventory.load(write_inventory(hosts))
    playbook = tmp_path / "shape.yml"
    playbook.write_text(PLAYBOOK)
    request = RunRequest(
        playbook=str(playbook),
        inventory=spec,
        extravars={"out": str(tmp_path)},
        display=display.silent,
    )
    plan = slices.plan(request, 2)
    # The Slurm state check needs a Slurm controller: the lab's (tests/e2e, bench).
    assert [p.request.playbook for p in plan.phases[2]] == ["slurm_state.yml"] * 2
    plan.phases = plan.phases[:2]

    summary = run_sliced(request, plan)

    # gpu2 failed in slice 1; gpu1 went on, slice 2 and the controllers' run too, which
    # read every compute node's fact from the cache without touching them.
    assert (tmp_path / "nodes.txt").read_text() == "gpu1-shape gpu2-shape gpu3-shape gpu4-shape"
    ok = HostCounts(ok=1, skipped=2)
    assert summary.hosts == {
        "gpu1": ok,
        "gpu2": HostCounts(ok=1, failed=1),
        "gpu3": ok,
        "gpu4": ok,
        "ctl1": HostCounts(ok=1, changed=1, skipped=2),
    }
    assert summary.failures == [Failure("gpu2", "Fail on the broken node", "disk on fire")]
    assert (summary.status, int(summary.exit_code)) == ("failed", ExitCode.HOSTS_FAILED)

    kept, _ = record.find("latest")
    assert (kept.run, kept.slices, kept.parts) == (
        summary.run,
        2,
        ["slice-1", "slice-2", "controllers"],
    )
    assert (kept.status, kept.exit_code) == ("failed", 4)
    assert [r.run for r in record.list_records()] == [summary.run]
    shown = run_kiln("runs", "show", summary.run, "--json")
    assert json.loads(shown.stdout) == summary.to_json()


STATE_IN_A_SLICE = """
- name: The slurm role's Slurm state check, as a slice runs it
  hosts: slurm_compute
  gather_facts: false
  tasks:
    - name: Check compute nodes are usable
      ansible.builtin.import_role:
        name: slurm
        tasks_from: state
"""


def test_a_slice_leaves_the_slurm_state_wait_to_after_the_controllers(local_inventory, tmp_path):
    """The real role's tasks: with kiln_slice (what every slice is given) neither the
    wait on the controller nor the verdict runs, so no slice waits for a controller its
    new nodes are not yet known to."""
    playbook = tmp_path / "state.yml"
    playbook.write_text(STATE_IN_A_SLICE)
    inv = local_inventory({"local-gpu": LOCAL})
    result = run_kiln("run", str(playbook), "-i", inv, "-e", "kiln_slice=true", "--json")
    assert result.returncode == ExitCode.OK, result.stderr
    assert json.loads(result.stdout)["hosts"] == {
        "local-gpu": {"ok": 0, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 2}
    }
