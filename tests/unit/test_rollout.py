"""`kiln rollout`: its options, its plan, its waits on recorded Slurm output, its record,
and its batches against a simulated controller (the lab test runs the real one)."""

import json
import os
import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kiln import inventory
from kiln.campaigns import rollout as rolling
from kiln.drift import TaskDrift
from kiln.errors import ExitCode, InputError
from kiln.report import html
from kiln.rollout import plan as planning
from kiln.rollout import progress as records
from kiln.rollout import waits
from kiln.run.events import RunSummary
from kiln.validation.verdicts import Verdict
from kiln_node import slurm_jobs, slurm_state
from tests.conftest import cluster_inventory

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"
RECORDED = (FIXTURES / "show-node-oneliner-24.11.txt").read_text().splitlines()[0]


def line(node: str, state: str, reason: str = "") -> str:
    """A recorded `scontrol --oneliner show node` line with another name, state, reason."""
    text = RECORDED.replace("kiln-compute01", node).replace("State=IDLE+DRAIN", f"State={state}")
    text = re.sub(r" +Reason=.*\]$", "", text)  # the recorded node's own reason
    return text + (f" Reason={reason} [root@2026-11-27T03:00:00]" if reason else "")


def states(**given: str) -> dict[str, slurm_state.NodeState]:
    return slurm_state.parse("\n".join(line(n, s) for n, s in given.items()))


# --- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "compute", "count"),
    [
        ("1", 3, 1),
        ("3", 3, 3),
        ("10%", 3, 1),
        ("50%", 8, 4),
        ("100%", 5, 5),
        ("10%", 100, 10),
        ("12.5%", 16, 2),
    ],
)
def test_max_unavailable_is_a_count_or_a_share_of_at_least_one_node(text, compute, count):
    assert planning.max_unavailable(text, compute) == count


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "'0': expected a node count (2) or a share of the compute nodes (10%), at least "
              "one node"),
        ("4", "4: more than the 3 compute nodes of the rollout"),
        ("0%", "'0%': expected a node count (2) or a share of the compute nodes (10%), at "
               "least one node"),
        ("120%", "'120%': expected a node count (2) or a share of the compute nodes (10%), at "
                 "least one node"),
        ("-1", "'-1': expected a node count (2) or a share of the compute nodes (10%), at "
               "least one node"),
    ],
)  # fmt: skip
def test_max_unavailable_refuses_none_or_more_than_the_nodes(text, message):
    with pytest.raises(InputError) as caught:
        planning.max_unavailable(text, 3)
    assert caught.value.message == message


NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("wait", "until", "expected"),
    [
        ("2h", None, NOW + timedelta(hours=2)),
        ("1h30m", None, NOW + timedelta(minutes=90)),
        ("90s", None, NOW + timedelta(seconds=90)),
        (None, "18:00", NOW.replace(hour=18)),
        (None, "2026-11-28T06:00", datetime(2026, 11, 28, 6, 0, tzinfo=UTC)),
        (None, "2026-11-28T06:00+01:00", datetime(2026, 11, 28, 5, 0, tzinfo=UTC)),
        (None, None, None),
    ],
)
def test_deadlines(wait, until, expected):
    assert planning.deadline(wait, until, NOW) == expected


@pytest.mark.parametrize(
    ("wait", "until", "message"),
    [
        (None, "11:00", ("deadline", "11:00: that is in the past (2026-11-27 12:00)")),
        (None, "2026-11-26T23:00", ("deadline", "2026-11-26T23:00: that is in the past "
                                                "(2026-11-27 12:00)")),
        (None, "tomorrow", ("deadline", "'tomorrow': expected a time (18:00) or a date and "
                                        "time (2026-11-28T06:00)")),
        ("0s", None, ("wait_for_jobs", "'0s': expected a duration such as 2h, 45m, 1h30m or 90s")),
        ("2d", None, ("wait_for_jobs", "'2d': expected a duration such as 2h, 45m, 1h30m or 90s")),
        ("1h", "18:00", ("wait_for_jobs+deadline", "give one of them")),
    ],
)  # fmt: skip
def test_bad_deadlines_are_refused(wait, until, message):
    with pytest.raises(planning.BadValue) as caught:
        planning.deadline(wait, until, NOW)
    assert (caught.value.setting, caught.value.message) == message


# --- the plan ----------------------------------------------------------------------------


def spec_of(tmp_path, compute=("gpu001", "gpu002", "gpu003", "gpu004"), login=()):
    import yaml

    hosts = cluster_inventory(compute=compute)
    if login:
        hosts["all"]["children"]["slurm_login"] = {"hosts": {h: None for h in login}}
    (tmp_path / "inv").mkdir(exist_ok=True)
    (tmp_path / "inv" / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return inventory.load(tmp_path / "inv")


def test_the_plan_puts_service_hosts_first_and_busy_nodes_last(tmp_path):
    spec = spec_of(tmp_path, login=("login1",))
    tasks = {
        "ctl1": [TaskDrift("slurm : Write slurm.conf", "ansible.builtin.template", "")],
        "login1": [TaskDrift("slurm : Write slurm.conf", "ansible.builtin.template", "")],
        "gpu001": [TaskDrift("nccl_env : Write /etc/nccl.conf", "ansible.builtin.template", "")],
        "gpu002": [TaskDrift("nvidia_driver : Install the driver", "kiln.cluster.apt_present", "")],
        "gpu003": [TaskDrift("nccl_env : Write /etc/nccl.conf", "ansible.builtin.template", "")],
        "gpu004": [],
    }
    changes = planning.touched(tasks)
    assert changes == {"ctl1": False, "login1": False, "gpu001": False, "gpu002": True,
                       "gpu003": False}  # fmt: skip
    seen = states(gpu001="MIXED", gpu002="IDLE", gpu003="IDLE", gpu004="IDLE")
    plan = planning.make_plan(spec, spec.group("slurm_compute"), changes, seen, 2)
    assert plan.to_dict() == {
        "services": ["ctl1", "login1"],
        "batches": [["gpu002", "gpu003"], ["gpu001"]],
        "reboot": ["gpu002"],
        "skipped": {},
        "unchanged": ["gpu004"],
    }
    assert plan.lines() == [
        "ctl1: alone (service host)",
        "login1: alone (service host)",
        "batch 1: gpu[002-003] (reboot: gpu002)",
        "batch 2: gpu001",
        "already as declared: gpu004",
    ]


def test_the_plan_leaves_alone_what_slurm_cannot_run_or_the_check_did_not_reach(tmp_path):
    spec = spec_of(tmp_path)
    changes = {n: False for n in spec.group("slurm_compute")}
    seen = states(gpu001="DOWN+NOT_RESPONDING", gpu002="IDLE", gpu003="IDLE")
    plan = planning.make_plan(spec, spec.group("slurm_compute"), changes, seen, 1,
                              {"gpu003": "unreachable at Gathering Facts: timed out"})  # fmt: skip
    assert (plan.batches, plan.skipped) == (
        [["gpu002"]],
        {
            "gpu001": "Slurm reports it DOWN+NOT_RESPONDING",
            "gpu003": "not checked: unreachable at Gathering Facts: timed out",
            "gpu004": "Slurm does not know this node",
        },
    )


# --- the waits, on recorded output ------------------------------------------------------


def test_a_batch_is_idle_once_no_job_runs_on_it():
    assert waits.ready(
        "\n".join([line("gpu001", "IDLE+DRAIN"), line("gpu002", "MIXED+DRAIN")]),
        waits.IDLE,
        ["gpu001"],
    )
    assert not waits.ready(line("gpu002", "MIXED+DRAIN"), waits.IDLE, ["gpu002"])
    assert not waits.ready(line("gpu002", "COMPLETING+DRAIN"), waits.IDLE, ["gpu002"])
    assert not waits.ready(line("gpu001", "IDLE"), waits.IDLE, ["gpu009"])  # unknown


def test_a_node_is_back_when_slurmd_registered_with_all_its_gres():
    text = "\n".join(
        [
            line("gpu001", "IDLE+DRAIN", "kiln: rollout r1: reboot"),
            line("gpu002", "DOWN+DRAIN+REBOOT_ISSUED", "kiln: rollout r1: reboot"),
            line("gpu003", "IDLE+DRAIN+INVALID_REG",
                 "gres/gpu count reported lower than configured (7 < 8)"),
            line("gpu004", "DOWN+NOT_RESPONDING"),
        ]
    )  # fmt: skip
    found = waits.not_back(slurm_state.parse(text), ["gpu001", "gpu002", "gpu003", "gpu004"])
    assert found == {
        "gpu002": "Slurm reports it DOWN+DRAIN+REBOOT_ISSUED",
        "gpu003": "slurmd registered without all its GRES: "
        "gres/gpu count reported lower than configured (7 < 8)",
        "gpu004": "Slurm reports it DOWN+NOT_RESPONDING",
    }
    assert waits.ready(text, waits.BACK, ["gpu001"])
    assert not waits.ready(text, waits.BACK, ["gpu001", "gpu003"])


def test_the_controller_answers_when_every_slurmctld_is_up():
    assert waits.controller_up("Slurmctld(primary) at kiln-controller is UP\n")
    assert not waits.controller_up(
        "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is DOWN\n"
    )
    assert not waits.controller_up("slurm_load_ctl_conf error: Unable to contact slurm controller")


def test_free_capacity_counts_nodes_in_service():
    seen = states(gpu001="IDLE", gpu002="MIXED", gpu003="IDLE+DRAIN", gpu004="DOWN")
    assert waits.free(seen, ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005"]) == 2


def test_a_reboot_after_the_change_is_one_slurm_22_05_takes_without_a_next_state():
    # Slurm 22.05 refuses nextstate=DRAIN ("Valid states: DOWN, RESUME": Molecule slurm).
    assert slurm_jobs.reboot_drained(["gpu001", "gpu002"]) == [
        "scontrol", "reboot", "gpu001,gpu002",
    ]  # fmt: skip


# --- the batches, against a simulated controller -----------------------------------------


class Slurm:
    """A controller as the step playbook sees it: node states and reasons, jobs that end
    after some looks, and every moment's nodes out of service."""

    def __init__(self, nodes: list[str], jobs: dict[str, int] | None = None) -> None:
        self.state = {n: "IDLE" for n in nodes}
        self.reason = {n: "" for n in nodes}
        self.jobs = dict(jobs or {})  # node -> looks left before its job ends
        for node in self.jobs:
            self.state[node] = "ALLOCATED"
        self.job_ids = {node: str(100 + i) for i, node in enumerate(self.jobs)}
        self.most_out = 0
        self.changed: list[str] = []  # in the order the rollout applied them
        self.stop_after_apply: str | None = None  # Ctrl-C once this node is applied

    def act(self, argv: list[str]) -> None:
        if argv[:2] == ["scontrol", "requeue"]:  # the jobs go back to the queue
            for node, job in list(self.job_ids.items()):
                if job in argv[2].split(","):
                    self.jobs[node] = 0
        if argv[:2] == ["scontrol", "update"]:
            node = argv[2].removeprefix("NodeName=")
            if argv[3] == "State=DRAIN":
                self.reason[node] = argv[4].removeprefix("Reason=")
                self.state[node] = self.state[node].split("+")[0] + "+DRAIN"
            elif argv[3] == "State=RESUME":
                self.reason[node] = ""
                self.state[node] = self.state[node].split("+")[0]

    def look(self) -> str:
        for node in list(self.jobs):
            self.jobs[node] -= 1
            if self.jobs[node] <= 0:
                del self.jobs[node]
                self.state[node] = self.state[node].replace("ALLOCATED", "IDLE")
        out = [n for n, s in self.state.items() if "DRAIN" in s or "DOWN" in s]
        self.most_out = max(self.most_out, len(out))
        return "\n".join(line(n, s, self.reason[n]) for n, s in self.state.items())


class Simulated(rolling.Rollout):
    """The rollout's flow with the controller, the apply and the checks simulated."""

    slurm: Slurm
    failing: dict[str, str]

    def step(self, commands=None, wait=None, tries=None):
        for argv in [*(commands or []), *(tries or [])]:
            self.slurm.act(argv)
        text = self.slurm.look()
        polls = wait["retries"] if wait else 0
        while polls and wait["kind"] == waits.IDLE and not waits.ready(text, "idle", wait["nodes"]):
            text, polls = self.slurm.look(), polls - 1
        jobs = "\n".join(f"{self.slurm.job_ids[n]}|RUNNING|{n}" for n in self.slurm.jobs)
        view = rolling.View(slurm_state.parse(text), jobs, "Slurmctld(primary) at ctl1 is UP")
        self.record.capacity.append([rolling.document.now(), waits.free(view.states, self.compute)])
        return view

    def apply(self, hosts):
        self.slurm.changed += [h for h in hosts if h not in self.spec.group("slurm_controller")]
        if self.slurm.stop_after_apply in hosts:
            self.slurm.stop_after_apply = None
            raise KeyboardInterrupt
        return RunSummary("run-apply", "site.yml", "successful")

    def check(self, nodes):
        """Judges only, as the real check: the batch alone drains and resumes."""
        return {n: (Verdict.FAIL, self.failing[n]) for n in nodes if n in self.failing}


def simulated(tmp_path, monkeypatch, slurm, failing=None, **options) -> Simulated:
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    spec = spec_of(tmp_path)
    request = rolling.Request(inventory=spec, **options)
    run = Simulated(request)
    run.slurm, run.failing = slurm, failing or {}
    compute = spec.group("slurm_compute")
    seen = slurm_state.parse(slurm.look())
    run.start(planning.make_plan(spec, compute, dict.fromkeys(compute, False), seen,
                                 run.options.max_unavailable))  # fmt: skip
    return run


def test_a_rollout_changes_one_node_at_a_time_and_the_busy_one_last(tmp_path, monkeypatch):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"], jobs={"gpu001": 6})
    run = simulated(tmp_path, monkeypatch, slurm, max_unavailable="1")
    report, code = run.run()
    assert code == ExitCode.OK
    assert slurm.changed == ["gpu002", "gpu003", "gpu004", "gpu001"]
    assert slurm.most_out == 1
    assert slurm.state == dict.fromkeys(["gpu001", "gpu002", "gpu003", "gpu004"], "IDLE")
    assert {n: v["verdict"] for n, v in report.node_verdicts.items()} == dict.fromkeys(
        ["gpu001", "gpu002", "gpu003", "gpu004"], "pass"
    )
    assert run.record.status == records.FINISHED
    with pytest.raises(InputError, match="is finished: nothing to resume"):
        records.load(run.record.id, run.spec.path)
    assert report.series[0]["metric"] == "free_nodes"
    assert min(p[1] for p in report.series[0]["points"]) == 3  # never two out of four
    page = html.render(report)
    assert "<title>Kiln rollout " in page
    assert ("<figure class='plot' data-kind='time' data-thresholds='0' "
            "aria-label='compute nodes in service during a rollout'>") in page  # fmt: skip


def test_a_failing_node_stays_drained_and_stops_the_rollout(tmp_path, monkeypatch):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    failing = {"gpu002": "storage.mount /shared: not mounted"}
    run = simulated(tmp_path, monkeypatch, slurm, failing, max_unavailable="2")
    report, code = run.run()
    assert code == ExitCode.VALIDATION_FAILED
    assert slurm.changed == ["gpu001", "gpu002"]  # batch 2 never started
    assert slurm.state == {"gpu001": "IDLE", "gpu002": "IDLE+DRAIN", "gpu003": "IDLE",
                           "gpu004": "IDLE"}  # fmt: skip
    assert slurm.reason["gpu002"] == (
        f"kiln: rollout {run.record.id}: storage.mount /shared: not mounted"
    )
    assert run.record.status == records.STOPPED
    verdicts = {n: (v["verdict"], v["reasons"]) for n, v in report.node_verdicts.items()}
    assert verdicts == {
        "gpu001": ("pass", []),
        "gpu002": ("fail", ["storage.mount /shared: not mounted"]),
        "gpu003": ("unchecked", ["not rolled out (the rollout did not reach it)"]),
        "gpu004": ("unchecked", ["not rolled out (the rollout did not reach it)"]),
    }
    assert report.notes[-2:] == [
        "stopped before batch 2: 1 node(s) failed (--max-failures 1)",
        f"fix the failed nodes, then `kiln rollout --resume {run.record.id}`",
    ]
    # Fixed, then resumed: the failed node is checked again, then the batches left.
    again = simulated_resume(tmp_path, run.record.id, slurm, failing={})
    report, code = again.run()
    assert code == ExitCode.OK, report.node_verdicts
    assert slurm.changed == ["gpu001", "gpu002", "gpu002", "gpu003", "gpu004"]
    assert set(slurm.state.values()) == {"IDLE"}


def simulated_resume(tmp_path, rollout_id, slurm, failing=None) -> Simulated:
    spec = inventory.load(tmp_path / "inv")
    run = Simulated(rolling.Request(inventory=spec, resume=rollout_id))
    run.slurm, run.failing = slurm, failing or {}
    return run


def test_ctrl_c_then_resume_finishes_without_draining_a_done_batch_again(tmp_path, monkeypatch):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    slurm.stop_after_apply = "gpu002"
    run = simulated(tmp_path, monkeypatch, slurm, max_unavailable="1")
    report, code = run.run()
    assert code == ExitCode.INTERRUPTED
    assert run.record.status == records.RUNNING
    assert report.notes[-1] == f"interrupted: `kiln rollout --resume {run.record.id}` carries on"
    assert slurm.state["gpu002"] == "IDLE+DRAIN"  # cut short after its apply
    assert [sorted(s.done) for s in run.record.batches[:2]] == [
        ["applied", "checked", "drained", "idle", "rebooted", "resumed", "started"],
        ["drained", "idle", "started"],
    ]
    # A new rollout is refused while this one is cut short.
    with pytest.raises(records.Resumable, match=f"rollout {run.record.id} on this inventory was"):
        rolling.Rollout(rolling.Request(inventory=run.spec))
    drains = []
    original = Slurm.act

    def counting(self, argv):
        if argv[3:4] == ["State=DRAIN"]:
            drains.append(argv[2])
        original(self, argv)

    monkeypatch.setattr(Slurm, "act", counting)
    again = simulated_resume(tmp_path, run.record.id, slurm)
    _report, code = again.run()
    assert code == ExitCode.OK
    assert slurm.changed == ["gpu001", "gpu002", "gpu002", "gpu003", "gpu004"]
    assert drains == ["NodeName=gpu003", "NodeName=gpu004"]  # gpu001, gpu002: not again
    assert set(slurm.state.values()) == {"IDLE"}


@pytest.mark.parametrize("at_deadline", ["skip", "requeue"])
def test_a_job_past_the_deadline_is_left_alone_or_requeued(tmp_path, monkeypatch, at_deadline):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"], jobs={"gpu001": 10**6})
    run = simulated(tmp_path, monkeypatch, slurm, max_unavailable="1", wait_for_jobs="1s",
                    at_deadline=at_deadline)  # fmt: skip
    report, code = run.run()
    if at_deadline == "skip":
        assert code == ExitCode.NOT_CHECKED  # a node left out, none failed
        assert slurm.changed == ["gpu002", "gpu003", "gpu004"]
        assert slurm.state["gpu001"] == "ALLOCATED"  # its job runs on, the node resumed
        assert report.node_verdicts["gpu001"] == {
            "verdict": "unchecked",
            "reasons": ["its jobs ran past the deadline: left as it was"],
        }
    else:
        assert code == ExitCode.OK
        assert slurm.changed == ["gpu002", "gpu003", "gpu004", "gpu001"]
        assert slurm.state["gpu001"] == "IDLE"
    assert slurm.most_out == 1


def test_a_batch_shrinks_to_the_room_left_when_someone_drains_a_node(tmp_path, monkeypatch):
    slurm = Slurm(["gpu001", "gpu002", "gpu003", "gpu004"])
    run = simulated(tmp_path, monkeypatch, slurm, max_unavailable="2")
    assert [s.nodes for s in run.record.batches] == [["gpu001", "gpu002"], ["gpu003", "gpu004"]]
    slurm.act(slurm_jobs.drain("gpu004", "RMA 7: replace the fan"))  # meanwhile, by hand
    report, code = run.run()
    assert code == ExitCode.OK, report.node_verdicts
    assert [s.nodes for s in run.record.batches] == [["gpu001"], ["gpu002"], ["gpu003", "gpu004"]]
    assert slurm.most_out == 2
    # Its drain and reason are the operator's: applied, never resumed by the rollout.
    assert (slurm.state["gpu004"], slurm.reason["gpu004"]) == (
        "IDLE+DRAIN",
        "RMA 7: replace the fan",
    )


def test_the_plan_leaves_a_node_someone_drained_alone(tmp_path):
    spec = spec_of(tmp_path)
    text = "\n".join(
        [
            line("gpu001", "IDLE+DRAIN", "RMA 7: replace the fan"),
            line("gpu002", "IDLE+DRAIN", "kiln-health: mounts: /shared is not mounted"),
            line("gpu003", "IDLE+DRAIN", "kiln: storage.mount /shared: not mounted"),
            line("gpu004", "IDLE"),
        ]
    )
    compute = spec.group("slurm_compute")
    plan = planning.make_plan(
        spec, compute, dict.fromkeys(compute, False), slurm_state.parse(text), 1
    )
    assert (plan.batches, plan.skipped) == (
        [["gpu003"], ["gpu004"]],
        {
            "gpu001": "drained by someone else: RMA 7: replace the fan",
            "gpu002": "drained by someone else: kiln-health: mounts: /shared is not mounted",
        },
    )


def test_stray_files_among_the_records_are_named_and_do_not_block_a_new_rollout(
    tmp_path, monkeypatch
):
    """One stray file in the rollout records (a FIFO, a JSON list, a number where a path
    goes, NaN, nesting past Python's limit, a status that is no text) hung or crashed
    every new rollout: each is now said and kept in the new record's notes, unread where
    it is no file; a real rollout cut short still holds new ones back."""
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    spec = spec_of(tmp_path)
    folder = records.directory()
    folder.mkdir(parents=True)
    os.mkfifo(folder / "20261101-000000-rollout-fifo.json")
    stray = {
        "list": b"[1, 2]",
        "path": json.dumps({"id": "x", "inventory": 5, "started": "s", "options": {}}).encode(),
        "nan": b'{"id": NaN}',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "status": json.dumps(
            {"id": "x", "inventory": str(spec.path), "started": "s", "options": {}, "status": 1}
        ).encode(),
    }
    for name, data in stray.items():
        (folder / f"20261101-000000-rollout-{name}.json").write_bytes(data)
    said: list[str] = []
    signal.alarm(30)  # a read of the FIFO would wait for ever
    try:
        run = rolling.Rollout(rolling.Request(inventory=spec, say=said.append))
    finally:
        signal.alarm(0)
    path = f"{folder}/20261101-000000-rollout"
    not_a_record = "not a rollout record Kiln can read"
    expected = [
        f"left out: {path}-status.json: {not_a_record} (status: Input should be a valid string)",
        f"left out: {path}-path.json: {not_a_record} (inventory: Input should be a valid string)",
        f"left out: {path}-nan.json: not JSON Kiln can read (NaN is not a JSON value)",
        f"left out: {path}-list.json: {not_a_record} (Input should be a dictionary or an "
        "instance of Record)",
        f"left out: {path}-fifo.json: cannot read: a FIFO, not a regular file",
        f"left out: {path}-deep.json: not JSON Kiln can read (nested too deeply)",
    ]
    assert said == expected
    assert run.record.notes == expected
    # A rollout of this inventory cut short, among them, still holds a new one back.
    cut_short = records.Record(
        id="20261102-000000-rollout-real",
        inventory=str(spec.path),
        started="2026-11-02T00:00:00+00:00",
        options=records.Options(nodes=["gpu001"]),
    )
    records.save(cut_short)
    with pytest.raises(records.Resumable, match="rollout 20261102-000000-rollout-real on this"):
        rolling.Rollout(rolling.Request(inventory=spec))
