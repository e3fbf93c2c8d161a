"""The repair loop's decision core (kiln_node.repair_classes, repair_records,
repair_decision): failure classes from kiln-health's real lines and drain reasons, the
history and breaker files, and each rule of the decision on real `scontrol --oneliner
show node` lines (tests/fixtures/slurm, Slurm 24.11)."""

import json
import re
from pathlib import Path

import pytest

from kiln_node import repair_classes, repair_decision, repair_records, slurm_state
from kiln_node.repair_classes import Failure
from kiln_node.repair_decision import Decision, Settings
from kiln_node.repair_records import Breaker, Entry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LINE = (FIXTURES / "slurm" / "show-node-oneliner-24.11.txt").read_text().splitlines()[1]
MOUNT = "kiln-health: mounts: shared /shared: autofs could not mount kiln-storage:/shared"
XID79 = "kiln-health: gpu_xid: XID 79 GPU fell off the bus on 0000:00:06"
NOW = 1_795_000_000.0


def node(name: str, state: str = "IDLE+DRAIN", reason: str = MOUNT) -> str:
    """The recorded line of a lab compute node, as another node in another state."""
    line = LINE.replace("kiln-compute02", name)
    line = re.sub(r"\bState=\S+", f"State={state}", line)
    return re.sub(r"\bReason=.*?(?= \w+=|$)", f"Reason={reason} [root@2026-11-26T17:20:00]", line)


def states(*lines: str) -> dict[str, slurm_state.NodeState]:
    return slurm_state.parse("\n".join(lines))


# --- classes ------------------------------------------------------------------------------


def test_every_ladder_step_is_declared_and_every_check_has_a_class():
    assert {s for c in repair_classes.CLASSES for s in repair_classes.ladder(c)} <= set(
        repair_classes.STEPS
    )
    assert set(repair_classes.CHECK_CLASSES.values()) <= set(repair_classes.CLASSES)
    assert repair_classes.STEPS["gpu-reset"] == repair_classes.Step(
        "gpu-reset", "node", ("nvidia-smi", "--gpu-reset"), evidence=True
    )
    assert {c: repair_classes.ladder(c) for c in ("mount", "disk-full", "gpu-hardware")} == {
        "mount": ("restart-mounts",),
        "disk-full": (),
        "gpu-hardware": ("reboot",),
    }


@pytest.mark.parametrize(
    ("check", "reason", "failure"),
    [
        ("mounts", "shared /shared: autofs could not mount kiln-storage:/shared", Failure("mount")),
        ("munge", "munge does not answer (munge: exit code 1)", Failure("munge")),
        ("free_space", "/var/spool/slurmd 12 MiB free, 1024 needed", Failure("disk-full")),
        ("slurmd_version", "slurmd 24.11.5, controller 24.11.6", Failure("slurm-version")),
        ("ib_ports", "mlx5_0/1 DOWN", Failure("network")),
        ("gpu_count", "7 GPUs visible, 8 expected", Failure("gpu-hardware")),
        ("gpu_driver", "driver 570.1 loaded, 580.2 installed: reboot", Failure("driver", "reboot")),
        ("gpu_smi", "nvidia-smi: NVIDIA driver is not loaded", Failure("driver", "reboot")),
        ("gpu_smi", "nvidia-smi: a GPU has fallen off the bus", Failure("gpu-hardware")),
        ("gpu_smi", "nvidia-smi: GPU InfoROM is corrupted", Failure("hardware")),
        ("gpu_ecc", "0000:00:06.0 2 uncorrectable ECC errors", Failure("memory-ecc")),
        ("gpu_clocks", "0000:00:06.0 HW thermal slowdown active", Failure("hardware")),
        ("dcgm_diag", "dcgmi diag -r 2: pcie failed on GPU 0", Failure("gpu-diag")),
        (
            "gpu_xid",
            "XID 48 double-bit ECC error on 0000:00:06, XID 79 GPU fell off the bus on 0000:00:06",
            Failure("gpu-hardware", "reboot"),
        ),
        ("gpu_xid", "XID 74 NVLink error on 0000:00:06", Failure("nvlink", "gpu-reset")),
        (
            "gpu_xid",
            "XID 94 contained ECC error on 0000:00:06",
            Failure(
                "unknown",
                why="gpu_xid names no XID that drains: XID 94 contained ECC error on 0000:00:06",
            ),
        ),
        (
            "mounts",
            "did not finish in time (hung)",
            Failure(
                "unknown",
                why="mounts: the check did not run to its end: did not finish in time (hung)",
            ),
        ),
        ("gpu_new", "something", Failure("unknown", why="no class for check 'gpu_new'")),
    ],
)
def test_a_fail_of_kiln_health_has_one_class(check, reason, failure):
    assert repair_classes.classify(check, reason) == failure


def test_result_lines_and_drain_reasons_give_the_first_fails_class():
    health = json.loads(
        (FIXTURES / "gpu" / "h100-80gb-hbm3-580.159.04" / "kiln-health.json").read_text()
    )
    lines = [f"{r['status']} {r['check']}: {r['reason']}" for r in health["results"]]
    assert repair_classes.classify_lines(lines) is None  # the recorded node is healthy
    lines[2] = "FAIL gpu_driver: driver 570.1 loaded, 580.2 installed: reboot"
    lines.append("FAIL munge: munge does not answer")
    assert repair_classes.classify_lines(lines) == Failure("driver", "reboot")
    assert [
        repair_classes.classify_reason(r)
        for r in (MOUNT, "kiln-active: dcgm_diag: dcgmi diag -r 2: memory failed", "RMA 4711: fan")
    ] == [
        Failure("mount"),
        Failure("gpu-diag"),
        Failure("unknown", why="not a reason of Kiln's checks: RMA 4711: fan"),
    ]
    # kiln-prolog's drains (Prolog and Epilog) are kiln-health's checks, named the same.
    assert [
        repair_classes.classify_reason(r)
        for r in (
            "kiln-health: gpu_xid: XID 79 GPU fell off the bus on 0000:00:06 (prolog, job 78)",
            "kiln-health: gpu_processes: pid 4242 (python3, 1024 MiB) on GPU 0 after the job "
            "(epilog, job 77)",
        )
    ] == [Failure("gpu-hardware", "reboot"), Failure("job-leftovers")]


# --- history and breaker files ---------------------------------------------------------


def test_history_is_json_lines_read_back_whole(tmp_path):
    path = str(tmp_path / "history.jsonl")
    assert repair_records.read_history(path) == []
    first = Entry("gpu001", NOW, "mount", "restart-mounts", "done")
    second = Entry(
        "gpu001", NOW + 60, "mount", "recheck", "failed", "/var/lib/kiln/e.tar.gz", "mounts"
    )
    repair_records.append_history(path, first)
    repair_records.append_history(path, second)
    assert repair_records.read_history(path) == [first, second]
    assert json.loads(Path(path).read_text().splitlines()[0]) == {
        "node": "gpu001", "time": "2026-11-18T11:06:40+00:00", "class": "mount",
        "step": "restart-mounts", "outcome": "done", "evidence": "", "detail": "",
    }  # fmt: skip


def test_a_bad_history_line_stops_with_one_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(Entry("gpu001", NOW, "mount", "recheck", "passed").json() + '\n{"node": 1}\n')
    with pytest.raises(repair_records.RecordError) as raised:
        repair_records.read_history(str(path))
    assert str(raised.value) == f"repair history {path} line 2: not a record ('outcome')"
    with pytest.raises(repair_records.RecordError, match=r"^outcome 'fine' is not one of done"):
        repair_records.append_history(str(path), Entry("n", NOW, "mount", "recheck", "fine"))
    nowhere = str(tmp_path / "absent" / "history.jsonl")
    with pytest.raises(repair_records.RecordError) as raised:
        repair_records.append_history(nowhere, Entry("n", NOW, "mount", "recheck", "passed"))
    assert str(raised.value) == f"repair history {nowhere}: No such file or directory"
    with pytest.raises(repair_records.RecordError) as raised:
        repair_records.open_breaker(nowhere, NOW, "3 of 10 out")
    assert str(raised.value) == f"breaker file {nowhere}: No such file or directory"


def test_the_breaker_opens_once_and_resets(tmp_path):
    path = str(tmp_path / "breaker.json")
    assert repair_records.read_breaker(path) == Breaker(False)
    assert repair_records.open_breaker(path, NOW, "3 of 10 out") == Breaker(
        True, NOW, "3 of 10 out"
    )
    assert repair_records.open_breaker(path, NOW + 5, "later") == Breaker(True, NOW, "3 of 10 out")
    assert repair_records.reset_breaker(path) == Breaker(True, NOW, "3 of 10 out")
    assert repair_records.read_breaker(path) == Breaker(False)
    Path(path).write_text("{")  # fail closed: unreadable is open
    seen = repair_records.read_breaker(path)
    assert (seen.open, seen.reason.startswith(f"breaker file {path} unreadable: ")) == (True, True)


# --- settings and the breaker's cap -------------------------------------------------------


def test_settings_default_and_bad_values_are_one_line_errors():
    assert repair_decision.settings({}) == Settings("10%", 3, 604800, 600)
    assert [Settings(m).limit(n) for m, n in (("10%", 5), ("10%", 40), (2, 40), ("100%", 3))] == [
        1, 4, 2, 3,
    ]  # fmt: skip
    bad = {
        "0%": "repair_max_unavailable: '0%' is out of range (a number of nodes, 1 or more, "
        "or a percentage of the partition, 1% to 100%)",
        "150%": "repair_max_unavailable: '150%' is out of range (a number of nodes, 1 or more, "
        "or a percentage of the partition, 1% to 100%)",
        0: "repair_max_unavailable: 0 is out of range (a number of nodes, 1 or more, "
        "or a percentage of the partition, 1% to 100%)",
    }
    for value, message in bad.items():
        with pytest.raises(repair_decision.SettingsError) as raised:
            repair_decision.settings({"repair_max_unavailable": value})
        assert (str(raised.value), raised.value.exit_code) == (message, 2)
    with pytest.raises(repair_decision.SettingsError) as raised:
        repair_decision.settings({"repair_rma_after": 0})
    assert str(raised.value) == "repair_rma_after: 0 is not a whole number of 1 or more"
    with pytest.raises(repair_decision.SettingsError) as raised:
        repair_decision.settings({"repair_max": 1})
    assert str(raised.value) == (
        "unknown repair setting repair_max: known are repair_back_after_s, repair_max_unavailable, "
        "repair_retry_after_s, repair_rma_after, repair_rma_window_s"
    )


def test_the_cap_counts_kilns_outs_and_unknowns_never_an_operators_or_an_rma():
    names = [f"n{i:02}" for i in range(1, 21)]  # 20 nodes: 10% is 2
    seen = states(
        *(node(n, "IDLE", "") for n in names[3:]),
        node("n01", "IDLE+DRAIN", "RMA 4711: replace the fan"),  # an operator's
        node("n02", "IDLE+DRAIN", "kiln-rma: mount: 3 failed repairs; evidence /x.tar.gz"),
        node("n03", "IDLE+DRAIN", MOUNT),
    )
    assert repair_decision.may_drain("n04", seen, names, Settings()) == (True, "")
    seen["n05"] = slurm_state.NodeState("n05", "UNKNOWN", "")  # unknown: counted as out
    assert repair_decision.may_drain("n04", seen, names, Settings()) == (
        False,
        "breaker: 2 of 20 nodes already out by Kiln's automation "
        "(repair_max_unavailable 10%: 2); n04 not drained",
    )
    assert repair_decision.may_drain("n04", seen, names, Settings(3)) == (True, "")


# --- the decision --------------------------------------------------------------------------

CLOSED = Breaker(False)


DEFAULTS = Settings()


def decide(line: str, history=(), breaker=CLOSED, settings=DEFAULTS, now=NOW) -> Decision:
    return repair_decision.decide("n1", states(line), list(history), breaker, settings, now)


def test_only_kilns_own_drains_are_worked_on():
    assert [
        decide(node("n1", state, reason))
        for state, reason in (
            ("IDLE+DRAIN", "RMA 4711: replace the fan"),
            ("IDLE", ""),
            ("DOWN", "slurmctld: node down by the operator"),
            ("IDLE+DRAIN", "kiln-rma: mount: 3 failed repairs; evidence /e.tar.gz"),
            ("IDLE+DRAIN", "kiln: validate: all_reduce 120 GB/s"),
        )
    ] == [
        Decision("none", "n1: not Kiln's drain (RMA 4711: replace the fan)"),
        Decision("none", "n1: not drained"),
        Decision("none", "n1: not Kiln's drain (slurmctld: node down by the operator)"),
        Decision("none", "n1: RMA, never resumed by Kiln"),
        Decision("none", "n1: not Kiln's drain (kiln: validate: all_reduce 120 GB/s)"),
    ]


def test_unknowns_alert_and_never_act():
    assert repair_decision.decide("n1", {}, [], CLOSED, Settings(), NOW) == Decision(
        "alert-only", "n1: Slurm state unknown, never read as healthy"
    )
    assert decide("NodeName=n1 Arch=x86_64") == Decision(
        "alert-only", "n1: Slurm state unknown, never read as healthy"
    )
    assert decide(node("n1", reason="kiln-health: gpu_new: odd")) == Decision(
        "alert-only", "n1: failure class unknown (no class for check 'gpu_new')"
    )


def test_a_mount_is_repaired_rechecked_and_returned():
    line = node("n1")
    done = Entry("n1", NOW - 30, "mount", "restart-mounts", "done")
    assert decide(line) == Decision("repair", "n1: mount, first step", "mount", "restart-mounts")
    assert decide(line, [done]) == Decision(
        "hold-for-recheck", "n1: restart-mounts done: re-check", "mount"
    )
    passed = Entry("n1", NOW - 10, "mount", "recheck", "passed")
    assert decide(line, [done, passed]) == Decision("return", "n1: passed its re-check", "mount")
    # After the return the next failure starts again at the ladder's first step.
    back = Entry("n1", NOW - 5, "mount", "return", "done")
    assert decide(line, [done, passed, back]).step == "restart-mounts"


def test_a_gpu_ladder_resets_with_evidence_then_reboots_and_waits_for_jobs_and_reboots():
    xid48 = "kiln-health: gpu_xid: XID 48 double-bit ECC error on 0000:00:06"
    reset = Entry("n1", NOW - 300, "memory-ecc", "gpu-reset", "done", "/e1.tar.gz")
    failed = Entry("n1", NOW - 200, "memory-ecc", "recheck", "failed")
    rebooting = Entry("n1", NOW - 60, "gpu-hardware", "reboot", "started")
    assert [
        decide(node("n1", reason=xid48)),
        decide(node("n1", reason=xid48), [reset, failed]),
        decide(node("n1", reason=XID79)),
        decide(node("n1", "MIXED+DRAIN", XID79)),
        decide(node("n1", "IDLE+DRAIN+REBOOT_ISSUED", XID79)),
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting]),
        decide(node("n1", "DOWN+DRAIN", XID79)),
        decide(node("n1", "IDLE+DRAIN", XID79), [rebooting]),
    ] == [
        Decision("repair", "n1: memory-ecc, first step", "memory-ecc", "gpu-reset", True),
        Decision("repair", "n1: re-check failed, next step", "memory-ecc", "reboot", True),
        Decision("repair", "n1: gpu-hardware, first step", "gpu-hardware", "reboot", True),
        Decision("none", "n1: a job still runs there; the ladder waits", "gpu-hardware"),
        Decision("none", "n1: reboot under way", "gpu-hardware"),
        Decision("none", "n1: waiting for it to come back", "gpu-hardware"),
        Decision("alert-only", "n1: does not answer Slurm (DOWN+DRAIN)", "gpu-hardware"),
        Decision("hold-for-recheck", "n1: reboot started: re-check", "gpu-hardware"),
    ]  # fmt: skip


def test_a_failed_step_goes_to_the_next_and_a_spent_ladder_waits_then_starts_again():
    xid74 = "kiln-health: gpu_xid: XID 74 NVLink error on 0000:00:06"
    refused = Entry("n1", NOW - 10, "nvlink", "gpu-reset", "failed", detail="in use")
    assert decide(node("n1", reason=xid74), [refused]) == Decision(
        "repair", "n1: gpu-reset failed, next step", "nvlink", "reboot", True
    )
    tried = [Entry("n1", NOW - 100, "mount", "restart-mounts", "done"),
             Entry("n1", NOW - 90, "mount", "recheck", "failed")]  # fmt: skip
    assert decide(node("n1"), tried) == Decision(
        "none", "n1: ladder tried, next round in 510s", "mount"
    )
    assert decide(node("n1"), tried, now=NOW + 600) == Decision(
        "repair", "n1: mount, next round", "mount", "restart-mounts"
    )


def test_a_full_disk_is_only_rechecked_and_reaches_rma_with_its_evidence():
    line = node("n1", reason="kiln-health: free_space: /var/spool/slurmd 12 MiB free, 1024 needed")
    assert decide(line) == Decision(
        "hold-for-recheck",
        "n1: disk-full, first step; disk-full has no repair: re-check",
        "disk-full",
    )
    failed = [Entry("n1", NOW - 1100 + i * 700, "disk-full", "recheck", "failed") for i in range(2)]
    assert decide(line, failed) == Decision(
        "none", "n1: ladder tried, next round in 200s", "disk-full"
    )
    with_evidence = [*failed, Entry("n1", NOW - 20, "disk-full", "recheck", "failed", "/e.tar.gz")]
    assert decide(line, with_evidence) == Decision(
        "rma", "n1: 3 failed repairs within 604800s", "disk-full",
        reason="kiln-rma: disk-full: 3 failed repairs; evidence /e.tar.gz",
    )  # fmt: skip
    # Failures older than the window do not count; none with evidence: collect it first.
    old = [Entry("n1", NOW - 700_000, "disk-full", "recheck", "failed"), *with_evidence[1:]]
    assert decide(line, old) == Decision(
        "none", "n1: ladder tried, next round in 580s", "disk-full"
    )
    assert decide(line, failed, settings=Settings(rma_after=2)) == Decision(
        "rma", "n1: 2 failed repairs within 604800s", "disk-full", evidence=True,
        reason="kiln-rma: disk-full: 2 failed repairs; no evidence bundle",
    )  # fmt: skip


def test_an_open_breaker_stops_repairs_but_lets_a_passed_node_return():
    opened = Breaker(True, NOW - 60, "breaker: 2 of 20 nodes already out")
    assert decide(node("n1"), breaker=opened) == Decision(
        "alert-only",
        "breaker open: breaker: 2 of 20 nodes already out; `kiln repair reset` closes it",
        "mount",
    )
    passed = [Entry("n1", NOW - 10, "mount", "recheck", "passed")]
    assert decide(node("n1"), passed, breaker=opened).action == "return"


def test_slurms_own_not_responding_is_the_slurmd_class():
    line = node("n1", "DOWN+NOT_RESPONDING", "Not responding")
    assert decide(line) == Decision("repair", "n1: slurmd, first step", "slurmd", "restart-slurmd")
    assert decide(node("n1", "DOWN+NOT_RESPONDING", "the operator's")).action == "none"


def test_a_silent_node_restarted_is_waited_for_then_rechecked_or_alerted_past_the_window():
    drained = "kiln-repair: slurmd: Not responding; restart-slurmd"
    restarted = [Entry("n1", NOW - 30, "slurmd", "restart-slurmd", "done")]
    still_down = node("n1", "DOWN+DRAIN+NOT_RESPONDING", drained)
    assert decide(still_down, restarted) == Decision(
        "none", "n1: waiting for it to come back", "slurmd"
    )
    assert decide(node("n1", "IDLE+DRAIN", drained), restarted) == Decision(
        "hold-for-recheck", "n1: restart-slurmd done: re-check", "slurmd"
    )
    assert decide(still_down, restarted, now=NOW + 900) == Decision(
        "late", "n1: restart-slurmd done 930s ago, not back", "slurmd", "restart-slurmd"
    )


# --- the BMC's power cycle ----------------------------------------------------------------

SILENT = "kiln-repair: slurmd: Not responding; power-cycle"  # kiln-repair's drain before it


def test_a_silent_slurmd_goes_from_its_restart_to_the_bmcs_power_cycle_and_back():
    assert repair_classes.ladder("slurmd") == ("restart-slurmd", "power-cycle")
    assert repair_classes.STEPS["power-cycle"] == repair_classes.Step(
        "power-cycle", "bmc", (), evidence=False
    )
    assert repair_classes.classify_reason(SILENT) == Failure("slurmd")
    down = node("n1", "DOWN+NOT_RESPONDING", "Not responding")
    skipped = Entry("n1", NOW - 5, "slurmd", "restart-slurmd", "skipped")
    failed = Entry("n1", NOW - 5, "slurmd", "restart-slurmd", "failed", detail="ssh: exit 255")
    cycled = Entry("n1", NOW - 60, "slurmd", "power-cycle", "started")
    late = Entry("n1", NOW - 1000, "slurmd", "power-cycle", "started")
    assert [
        decide(down, [skipped]),
        decide(down, [failed]),
        decide(node("n1", "DOWN+DRAIN+NOT_RESPONDING", SILENT), [skipped, cycled]),
        decide(node("n1", "DOWN+DRAIN+NOT_RESPONDING", SILENT), [skipped, late]),
        decide(node("n1", "IDLE+DRAIN", SILENT), [skipped, cycled]),
    ] == [
        Decision("repair", "n1: restart-slurmd skipped, next step", "slurmd", "power-cycle"),
        Decision("repair", "n1: restart-slurmd failed, next step", "slurmd", "power-cycle"),
        Decision("none", "n1: waiting for it to come back", "slurmd"),
        Decision("late", "n1: power-cycle started 1000s ago, not back", "slurmd", "power-cycle"),
        Decision("hold-for-recheck", "n1: power-cycle started: re-check", "slurmd"),
    ]
    # The late cycle recorded failed: the round is spent, the next starts after the wait.
    failed_cycle = Entry("n1", NOW - 1, "slurmd", "power-cycle", "failed")
    assert decide(
        node("n1", "DOWN+DRAIN+NOT_RESPONDING", SILENT), [skipped, late, failed_cycle]
    ) == (Decision("none", "n1: ladder tried, next round in 599s", "slurmd"))


def test_a_reboot_that_never_comes_back_is_failed_then_power_cycled_through_the_bmc():
    rebooting = Entry("n1", NOW - 901, "gpu-hardware", "reboot", "started")
    late = Entry("n1", NOW - 1, "gpu-hardware", "reboot", "failed", detail="not back")
    cycled = Entry("n1", NOW, "gpu-hardware", "power-cycle", "started")
    cycle_failed = Entry("n1", NOW, "gpu-hardware", "power-cycle", "failed")
    assert [
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting]),
        decide(node("n1", "IDLE+DRAIN+REBOOT_ISSUED", XID79), [rebooting]),
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting], settings=Settings(back_after_s=1800)),
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting, late]),
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting, late, cycled]),
        decide(node("n1", "IDLE+DRAIN", XID79), [rebooting, late, cycled]),
        decide(node("n1", "DOWN+DRAIN", XID79), [rebooting, late, cycle_failed]),
    ] == [
        Decision("late", "n1: reboot started 901s ago, not back", "gpu-hardware", "reboot"),
        Decision("late", "n1: reboot started 901s ago, not back", "gpu-hardware", "reboot"),
        Decision("none", "n1: waiting for it to come back", "gpu-hardware"),
        Decision("repair", "n1: the reboot failed and it does not answer", "gpu-hardware",
                 "power-cycle"),
        Decision("none", "n1: waiting for it to come back", "gpu-hardware"),
        Decision("hold-for-recheck", "n1: power-cycle started: re-check", "gpu-hardware"),
        Decision("alert-only", "n1: does not answer Slurm (DOWN+DRAIN)", "gpu-hardware"),
    ]  # fmt: skip
    with pytest.raises(repair_decision.SettingsError) as raised:
        repair_decision.settings({"repair_back_after_s": 0})
    assert str(raised.value) == "repair_back_after_s: 0 is not a whole number of 1 or more"
    assert repair_decision.settings({}).back_after_s == 900


def test_a_node_back_from_rma_starts_its_count_again():
    """A person replaced the part and resumed it: the failures before the RMA are not
    counted again (the lab's compute01 after its full disk, then storage down)."""
    before = [
        Entry("n1", NOW - 300, "disk-full", "recheck", "failed"),
        Entry("n1", NOW - 280, "disk-full", "recheck", "failed"),
        Entry("n1", NOW - 270, "disk-full", "rma", "done", "n1:/var/lib/kiln/evidence/e.tar.gz"),
    ]
    assert decide(node("n1"), before) == Decision(
        "repair", "n1: mount, first step", "mount", "restart-mounts"
    )
    again = [*before, Entry("n1", NOW - 60, "mount", "recheck", "failed"),
             Entry("n1", NOW - 30, "mount", "recheck", "failed")]  # fmt: skip
    assert decide(node("n1"), again, settings=Settings(rma_after=2)) == Decision(
        "rma", "n1: 2 failed repairs within 604800s", "mount", evidence=True,
        reason="kiln-rma: mount: 2 failed repairs; no evidence bundle",
    )  # fmt: skip
