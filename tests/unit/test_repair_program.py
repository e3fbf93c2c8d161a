"""kiln-repair, the repair program the repair role installs on the controller, and
kiln-health's use of the breaker: what each runs in Slurm for a node, what it records,
what it refuses. Slurm's side is the lab's real `scontrol --oneliner show node` lines
(Slurm 24.11, tests/fixtures/slurm) printed by scontrol and srun TEST DOUBLES on PATH
that log their arguments; the loop under real Slurm is tested in tests/e2e (lab)."""

import json
import re
from pathlib import Path

import pytest

from kiln_node import repair_records, slurm_state
from kiln_node.health_checks import Deadline, Result
from tests.node_scripts import health, repair_step
from tests.node_scripts import repair as program

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LINE = (FIXTURES / "slurm" / "show-node-oneliner-24.11.txt").read_text().splitlines()[1]
MOUNT = "kiln-health: mounts: shared /shared: autofs could not mount kiln-storage:/shared"
DISK = "kiln-health: free_space: /var/spool/slurmd 12 MiB free, 1024 needed"
OPERATOR = "RMA 4711: replace the fan"
RESERVE = "Users=root Flags=MAINT,IGNORE_JOBS StartTime=now Duration=20"


def node(name: str, state: str = "IDLE", reason: str = "") -> str:
    line = LINE.replace("kiln-compute02", name)
    line = re.sub(r"\bState=\S+", f"State={state}", line)
    stamp = f"Reason={reason} [root@2026-11-26T17:20:00]" if reason else ""
    return re.sub(r"\s*Reason=.*?(?= \w+=|$)", f" {stamp}" if stamp else "", line)


def health_json(name: str, *results: tuple[str, str, str]) -> str:
    return json.dumps(
        {"node": name, "action": "",
         "results": [{"check": c, "status": s, "reason": r} for c, s, r in results]}
    )  # fmt: skip


PASS = (("mounts", "OK", "1 mount answers"), ("munge", "OK", "munge answers"))


def lab(tmp_path, monkeypatch, nodes: list[str], health_out: str = "", step_rc: int = 0,
        after_health: list[str] | None = None, **settings):  # fmt: skip
    """The config, and scontrol, srun and systemd-run TEST DOUBLES: `show node` prints
    NODES (AFTER_HEALTH once kiln-health ran, where given), srun prints HEALTH_OUT for
    kiln-health and exits STEP_RC for a ladder step."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "nodes.txt").write_text("\n".join(nodes) + "\n")
    after = tmp_path / "after-health.txt"
    if after_health is not None:
        after.write_text("\n".join(after_health) + "\n")
    (tmp_path / "health.txt").write_text(health_out + "\n")
    log = f'echo "$(basename $0) $*" >> {tmp_path}/calls\n'
    (bin_dir / "scontrol").write_text(
        f'#!/bin/sh\n{log}case "$*" in\n'
        f'  *"show node"*) cat {tmp_path}/nodes.txt;;\n'
        '  "show hostnames "*) echo "$3" | tr , "\\n";;\n'
        '  --version) echo "slurm 24.11.5";;\n'
        "esac\n"
    )
    (bin_dir / "srun").write_text(
        f'#!/bin/sh\n{log}case "$*" in *kiln-health*) cat {tmp_path}/health.txt; '
        f"if [ -f {after} ]; then cp {after} {tmp_path}/nodes.txt; fi;; "
        f"*) exit {step_rc};; esac\n"
    )
    (bin_dir / "systemd-run").write_text(f"#!/bin/sh\n{log}")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    (tmp_path / "state" / "queue").mkdir(parents=True)
    config = {
        "settings": {"repair_retry_after_s": 30, **settings},
        "state_dir": str(tmp_path / "state"),
        "health_program": "/usr/local/sbin/kiln-health",
        "metrics_dir": str(tmp_path / "metrics"),
    }
    (tmp_path / "repair.json").write_text(json.dumps(config))
    return ["--config", str(tmp_path / "repair.json")]


def calls(tmp_path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def history(tmp_path) -> list[tuple[str, str, str, str]]:
    entries = repair_records.read_history(str(tmp_path / "state" / "history.jsonl"))
    return [(e.node, e.cls, e.step, e.outcome) for e in entries]


SHOW = "scontrol --oneliner show node"
SRUN = (
    "srun --nodes=1 --nodelist=c1 --ntasks-per-node=1 --reservation=kiln-repair-c1 "
    "--time=20 --immediate=60 --quiet --job-name=kiln-repair"
)


def test_a_mount_failure_is_repaired_rechecked_and_returned(tmp_path, monkeypatch, capsys):
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", MOUNT), node("c2")],
               health_json("c1", *PASS))  # fmt: skip
    assert program.main([*args, "c1"]) == 0
    assert calls(tmp_path) == [
        SHOW,
        SHOW,
        "scontrol delete ReservationName=kiln-repair-c1",
        f"scontrol create ReservationName=kiln-repair-c1 Nodes=c1 {RESERVE}",
        "scontrol update NodeName=c1 State=RESUME",
        f"{SRUN} sh -c ! systemctl is-enabled --quiet autofs 2>/dev/null"
        " || systemctl restart autofs; systemctl start local-fs.target remote-fs.target",
        # The double still shows c1 drained by kiln-health after the step, as a health
        # run that began before it leaves it (the lab met it): lifted, then re-checked.
        f"{SHOW} c1",
        "scontrol update NodeName=c1 State=RESUME",
        f"{SRUN} /usr/local/sbin/kiln-health --active --json",
        "scontrol delete ReservationName=kiln-repair-c1",
    ]
    assert history(tmp_path) == [
        ("c1", "mount", "restart-mounts", "done"),
        ("c1", "mount", "recheck", "passed"),
        ("c1", "mount", "return", "done"),
    ]
    assert capsys.readouterr().out == "c1: repair: c1: mount, first step\n"
    prom = (tmp_path / "metrics" / "kiln_repair.prom").read_text()
    assert 'kiln_repair_actions_total{failure="mount",step="return",outcome="done"} 1' in prom
    assert "kiln_repair_breaker_open 0" in prom
    assert 'kiln_repair_time_to_repair_seconds{node="c1"} ' in prom


def test_a_failed_recheck_drains_again_with_what_failed_now(tmp_path, monkeypatch):
    failing = health_json("c1", ("mounts", "FAIL", "shared /shared: does not answer"))
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", MOUNT)], failing)
    assert program.main([*args, "c1"]) == 1
    assert calls(tmp_path)[-2:] == [
        "scontrol update NodeName=c1 State=DRAIN "
        "Reason=kiln-health: mounts: shared /shared: does not answer",
        "scontrol delete ReservationName=kiln-repair-c1",
    ]
    assert history(tmp_path)[-1] == ("c1", "mount", "recheck", "failed")


def test_a_recheck_with_no_result_keeps_kiln_healths_drain_of_the_node_meanwhile(
    tmp_path, monkeypatch
):
    """Resumed in its reservation, the node is drained again by a kiln-health run before
    the re-check's srun starts (the lab met it): srun brings no result. kiln-health's
    drain stays; a reason made of the missing result would read as an unknown class."""
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", DISK)],
               repair_rma_after=2, repair_rma_window_s=10**9)  # fmt: skip
    srun = tmp_path / "bin" / "srun"
    busy = "srun: error: Unable to allocate resources: Requested nodes are busy"
    srun.write_text(
        srun.read_text().replace(f"cat {tmp_path}/health.txt;", f"echo '{busy}' >&2; exit 1;")
    )
    assert program.main([*args, "c1"]) == 1
    assert calls(tmp_path)[-3:] == [
        f"{SRUN} /usr/local/sbin/kiln-health --active --json",
        f"{SHOW} c1",
        "scontrol delete ReservationName=kiln-repair-c1",
    ]
    entries = repair_records.read_history(str(tmp_path / "state" / "history.jsonl"))
    assert [(e.cls, e.step, e.outcome, e.detail) for e in entries] == [
        ("disk-full", "recheck", "failed", f"kiln-health brought no result: {busy}")
    ]


def test_a_failed_stress_run_drains_the_node_back_with_the_reason_it_had(tmp_path, monkeypatch):
    """kiln-health passes and the node is back in its reservation, but the stress run
    fails: drained as it was, so the ladder goes on for its class."""
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", MOUNT)], health_json("c1", *PASS),
               step_rc=0, after_health=[node("c1", "IDLE+MAINT")])  # fmt: skip
    config = json.loads((tmp_path / "repair.json").read_text())
    # The double's srun runs every other command as a step: this one fails.
    (tmp_path / "repair.json").write_text(json.dumps({**config, "stress_program": "false"}))
    (tmp_path / "bin" / "srun").write_text(
        (tmp_path / "bin" / "srun").read_text().replace("*) exit 0", "*false) exit 1;; *) exit 0")
    )
    assert program.main([*args, "c1"]) == 1
    assert calls(tmp_path)[-4:] == [
        f"{SRUN} false",
        f"{SHOW} c1",
        f"scontrol update NodeName=c1 State=DRAIN Reason={MOUNT}",
        "scontrol delete ReservationName=kiln-repair-c1",
    ]
    assert history(tmp_path) == [
        ("c1", "mount", "restart-mounts", "done"),
        ("c1", "mount", "recheck", "failed"),
    ]


def test_a_failed_step_drains_back_and_is_recorded(tmp_path, monkeypatch):
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", MOUNT)], step_rc=1)
    assert program.main([*args, "c1"]) == 1
    assert calls(tmp_path)[-2:] == [
        f"scontrol update NodeName=c1 State=DRAIN Reason={MOUNT}",
        "scontrol delete ReservationName=kiln-repair-c1",
    ]
    assert history(tmp_path) == [("c1", "mount", "restart-mounts", "failed")]


def test_an_operators_drain_and_an_idle_node_are_never_touched(tmp_path, monkeypatch, capsys):
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", OPERATOR), node("c2")])
    assert program.main([*args, "c1", "c2"]) == 0
    assert calls(tmp_path) == [SHOW, SHOW, SHOW]
    assert not (tmp_path / "state" / "history.jsonl").exists()
    assert capsys.readouterr().out == (
        f"c1: none: c1: not Kiln's drain ({OPERATOR})\nc2: none: c2: not drained\n"
    )


def test_a_disk_fault_waits_for_its_next_round_then_goes_to_rma(tmp_path, monkeypatch):
    failing = health_json("c1", ("free_space", "FAIL", "/var/spool/slurmd 12 MiB free"))
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", DISK)], failing,
               repair_rma_after=2, repair_rma_window_s=10**9)  # fmt: skip
    assert program.main([*args, "c1"]) == 1
    assert history(tmp_path) == [("c1", "disk-full", "recheck", "failed")]
    # Drained again by the failed re-check; the next round is due in 30 s: a timer.
    assert program.main([*args, "c1"]) == 0
    itself = re.escape(str(Path(program.sys.argv[0]).resolve()))
    timer = re.fullmatch(
        r"systemd-run --collect --unit=kiln-repair-retry-c1 --on-active=(\d+) "
        rf"--timer-property=AccuracySec=1s {itself} c1",
        calls(tmp_path)[-1],
    )
    assert timer and 28 <= int(timer[1]) <= 31, calls(tmp_path)[-1]
    history_file = tmp_path / "state" / "history.jsonl"
    aged = history_file.read_text().replace(
        json.loads(history_file.read_text())["time"], "2026-01-01T00:00:00+00:00"
    )
    history_file.write_text(aged)
    assert program.main([*args, "c1"]) == 1
    assert program.main([*args, "c1"]) == 0
    rma = "kiln-rma: disk-full: 2 failed repairs; no evidence bundle"
    assert calls(tmp_path)[-1] == f"scontrol update NodeName=c1 State=DRAIN Reason={rma}"
    assert history(tmp_path)[-1] == ("c1", "disk-full", "rma", "done")
    assert (
        'kiln_repair_rma{node="c1",failure="disk-full"} 1'
        in (tmp_path / "metrics" / "kiln_repair.prom").read_text()
    )


def test_the_breaker_opens_past_the_cap_and_no_repair_starts(tmp_path, monkeypatch, capsys):
    """c1 and c2 drained by their kiln-health 5 s apart, each before it saw the other:
    the later drain, past the cap of one, is resumed (alerted, not drained)."""
    later = node("c2", "IDLE+DRAIN", MOUNT).replace("17:20:00]", "17:20:05]")
    nodes = [node("c1", "IDLE+DRAIN", MOUNT), later, node("c3")]
    args = lab(tmp_path, monkeypatch, nodes, repair_max_unavailable=1)
    assert program.main([*args, "c1"]) == 0
    assert calls(tmp_path) == [SHOW, SHOW, SHOW, "scontrol update NodeName=c2 State=RESUME", SHOW]
    why = "2 of 3 nodes of partition batch out by Kiln's automation (repair_max_unavailable 1: 1)"
    assert capsys.readouterr().out == (
        f"c1: alert-only: breaker open: {why}; `kiln repair reset` closes it\n"
    )
    breaker = repair_records.read_breaker(str(tmp_path / "state" / "breaker.json"))
    assert (breaker.open, breaker.reason) == (True, why)
    assert history(tmp_path) == [("c2", "mount", "alert", "alerted"),
                                 ("c1", "mount", "alert", "alerted")]  # fmt: skip
    assert "kiln_repair_breaker_open 1" in (tmp_path / "metrics" / "kiln_repair.prom").read_text()


def test_strigger_queues_and_the_service_takes_the_queue(tmp_path, monkeypatch, capsys):
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", OPERATOR), node("c2")])
    assert program.main([*args, "--queue", "c[1-2]"]) == 0
    [queued] = (tmp_path / "state" / "queue").iterdir()
    assert queued.read_text() == "c[1-2]\n"
    assert not (tmp_path / "calls").exists()  # strigger's side asks Slurm nothing
    monkeypatch.setattr(program, "hostnames", lambda expression: ["c1", "c2"])
    assert program.main(args) == 0
    assert list((tmp_path / "state" / "queue").iterdir()) == []
    assert capsys.readouterr().out.splitlines() == [
        f"c1: none: c1: not Kiln's drain ({OPERATOR})",
        "c2: none: c2: not drained",
    ]


def test_slurm_22_05_reboots_without_nextstate():
    assert program.reboot_argv("c1", MOUNT, (22, 5)) == ["scontrol", "reboot", "c1"]
    assert program.reboot_argv("c1", MOUNT, (24, 11)) == [
        "scontrol", "reboot", "ASAP", "nextstate=DRAIN", f"reason={MOUNT}", "c1"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("{", "kiln-repair: cannot read {path}: Expecting property name enclosed in double "
         "quotes: line 1 column 2 (char 1)"),
        ('{"settings": {}, "state_dir": "/x", "health_program": "h", "colour": 1}',
         "kiln-repair: {path}: unknown setting colour: known are bmc_file, dcgm_level, "
         "evidence_dir, evidence_program, health_program, metrics_dir, minutes, mount_check, "
         "settings, ssh, ssh_key, ssh_known_hosts, state_dir, step_timeout_s, stress_program"),
        ('{"settings": {}, "health_program": "h"}', "kiln-repair: {path}: state_dir is missing"),
        ('{"settings": {"repair_max_unavailable": "0%"}, "state_dir": "/x", '
         '"health_program": "h"}',
         "kiln-repair: repair_max_unavailable: '0%' is out of range (a number of nodes, 1 or "
         "more, or a percentage of the partition, 1% to 100%)"),
    ],
)  # fmt: skip
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, config, error):
    path = tmp_path / "repair.json"
    path.write_text(config)
    assert program.main(["--config", str(path), "c1"]) == 2
    assert capsys.readouterr().err == error.format(path=path) + "\n"


# --- kiln-health and the breaker ------------------------------------------------------------


def fake_show(tmp_path, monkeypatch, lines: list[str]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "nodes.txt").write_text("\n".join(lines) + "\n")
    (bin_dir / "scontrol").write_text(
        f'#!/bin/sh\necho "scontrol $*" >> {tmp_path}/calls\n'
        f'case "$*" in *"show node c1") grep "^NodeName=c1 " {tmp_path}/nodes.txt;;\n'
        f'  *"show node"*) cat {tmp_path}/nodes.txt;; esac\n'
    )
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path / "calls"


FAIL = [Result("mounts", "FAIL", "shared /shared: does not answer")]


def test_kiln_health_does_not_drain_past_the_cap(tmp_path, monkeypatch):
    log = fake_show(tmp_path, monkeypatch,
                    [node("c1"), node("c2", "IDLE+DRAIN", MOUNT), node("c3")])  # fmt: skip
    action = health.apply_to_slurm("c1", FAIL, Deadline(30, 10), {"max_unavailable": 1})
    assert action == (
        "not drained: breaker: 1 of 3 nodes already out by Kiln's automation "
        "(repair_max_unavailable 1: 1); c1 not drained"
    )
    assert log.read_text().splitlines() == [f"{SHOW} c1", SHOW]
    health.write_metrics(str(tmp_path), "c1", FAIL, action)
    assert 'kiln_health_drain_held{node="c1"} 1' in (tmp_path / "kiln_health.prom").read_text()


def test_kiln_health_drains_under_the_cap_and_ignores_others_drains(tmp_path, monkeypatch):
    log = fake_show(tmp_path, monkeypatch,
                    [node("c1"), node("c2", "IDLE+DRAIN", OPERATOR), node("c3")])  # fmt: skip
    action = health.apply_to_slurm("c1", FAIL, Deadline(30, 10), {"max_unavailable": 1})
    assert action == "drained c1: kiln-health: mounts: shared /shared: does not answer"
    assert log.read_text().splitlines()[-1] == (
        "scontrol update NodeName=c1 State=DRAIN "
        "Reason=kiln-health: mounts: shared /shared: does not answer"
    )


def test_partitions_are_read_from_show_node():
    lines = [node("c1"), node("c2").replace("Partitions=batch", "Partitions=batch,gpu")]
    assert slurm_state.partitions("\n".join(lines)) == {"batch": ["c1", "c2"], "gpu": ["c2"]}


def test_a_silent_slurmd_without_ssh_is_alerted_not_counted(tmp_path, monkeypatch):
    silent = node("c1", "DOWN+NOT_RESPONDING", "Not responding")
    args = lab(tmp_path, monkeypatch, [silent])
    assert program.main([*args, "c1"]) == 0
    assert calls(tmp_path) == [SHOW, SHOW]
    entries = repair_records.read_history(str(tmp_path / "state" / "history.jsonl"))
    assert [(e.cls, e.step, e.outcome, e.detail) for e in entries] == [
        ("slurmd", "alert", "alerted",
         "restart-slurmd: Slurm cannot reach c1 and repair_ssh is off"),
    ]  # fmt: skip


# --- a node Slurm cannot reach: ssh with the repair key --------------------------------------

SSH = (
    "ssh -i /etc/kiln/repair_ssh_key -o IdentitiesOnly=yes -o BatchMode=yes "
    "-o UserKnownHostsFile=/etc/kiln/repair_known_hosts -o StrictHostKeyChecking=yes "
    "-o ConnectTimeout=10 root@c1 --"
)
SILENT_DRAIN = "kiln-repair: slurmd: Not responding; restart-slurmd"


def with_ssh(tmp_path, args: list[str], rc: int = 0) -> list[str]:
    config = json.loads((tmp_path / "repair.json").read_text())
    (tmp_path / "repair.json").write_text(json.dumps(config | {"ssh": True}))
    ssh = tmp_path / "bin" / "ssh"
    ssh.write_text(f'#!/bin/sh\necho "ssh $*" >> {tmp_path}/calls\nexit {rc}\n')
    ssh.chmod(0o755)
    return args


def test_a_silent_node_is_drained_then_its_daemons_restarted_over_ssh(tmp_path, monkeypatch):
    silent = [node("c1", "DOWN+NOT_RESPONDING", "Not responding")]
    args = with_ssh(tmp_path, lab(tmp_path, monkeypatch, silent))
    assert program.main([*args, "c1"]) == 0
    assert calls(tmp_path)[2:4] == [
        f"scontrol update NodeName=c1 State=DRAIN Reason={SILENT_DRAIN}",
        f"{SSH} sh -c 'systemctl kill --signal=KILL --kill-whom=main slurmd 2>/dev/null;"
        " systemctl restart munge slurmd'",
    ]
    assert history(tmp_path) == [("c1", "slurmd", "restart-slurmd", "done")]
    assert re.search(r"--unit=kiln-repair-retry-c1 --on-active=10 ", calls(tmp_path)[-1])


def test_a_node_restarted_over_ssh_is_waited_for_then_rechecked(tmp_path, monkeypatch, capsys):
    nodes = tmp_path / "nodes.txt"
    args = with_ssh(tmp_path, lab(tmp_path, monkeypatch,
                                  [node("c1", "DOWN+NOT_RESPONDING", "Not responding")],
                                  health_json("c1", *PASS)))  # fmt: skip
    assert program.main([*args, "c1"]) == 0
    # Slurm has not heard from it yet: the loop waits, drained by it.
    nodes.write_text(node("c1", "DOWN+DRAIN+NOT_RESPONDING", SILENT_DRAIN) + "\n")
    assert program.main([*args, "c1"]) == 0
    # slurmd answers: Slurm's ReturnToService leaves it drained, for the re-check.
    nodes.write_text(node("c1", "IDLE+DRAIN", SILENT_DRAIN) + "\n")
    assert program.main([*args, "c1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "c1: repair: c1: slurmd, first step",
        "c1: none: c1: waiting for it to come back",
        "c1: hold-for-recheck: c1: restart-slurmd done: re-check",
    ]
    assert history(tmp_path) == [
        ("c1", "slurmd", "restart-slurmd", "done"),
        ("c1", "slurmd", "recheck", "passed"),
        ("c1", "slurmd", "return", "done"),
    ]


def test_a_failed_ssh_is_a_failed_step(tmp_path, monkeypatch):
    silent = [node("c1", "DOWN+NOT_RESPONDING", "Not responding")]
    args = with_ssh(tmp_path, lab(tmp_path, monkeypatch, silent), rc=255)
    assert program.main([*args, "c1"]) == 1
    assert history(tmp_path) == [("c1", "slurmd", "restart-slurmd", "failed")]


def test_storage_failing_on_the_controller_too_opens_the_breaker(tmp_path, monkeypatch, capsys):
    args = lab(tmp_path, monkeypatch, [node("c1", "IDLE+DRAIN", MOUNT), node("c2"), node("c3")])
    check = tmp_path / "bin" / "kiln-mount-check"
    check.write_text(
        "#!/bin/sh\necho 'FAIL shared /shared: no answer within 10s (hung)'\n"
        "echo 'OK scratch /scratch: answers'\nexit 1\n"
    )
    check.chmod(0o755)
    config = json.loads((tmp_path / "repair.json").read_text())
    (tmp_path / "repair.json").write_text(json.dumps(config | {"mount_check": str(check)}))
    assert program.main([*args, "c1"]) == 0
    why = "shared storage: shared /shared fails on the controller too, not a node fault"
    assert capsys.readouterr().out == (
        f"c1: alert-only: breaker open: {why}; `kiln repair reset` closes it\n"
    )
    breaker = repair_records.read_breaker(str(tmp_path / "state" / "breaker.json"))
    assert (breaker.open, breaker.reason) == (True, why)
    assert history(tmp_path) == [("c1", "mount", "alert", "alerted")]
    assert not any("srun" in c or "RESUME" in c for c in calls(tmp_path))


def test_a_mount_the_controller_reads_is_the_nodes_fault(tmp_path, monkeypatch):
    check = tmp_path / "kiln-mount-check"
    check.write_text("#!/bin/sh\necho 'OK shared /shared: answers'\n")
    check.chmod(0o755)
    assert program.shared_storage_down(MOUNT, {"mount_check": str(check)}) == ""
    assert program.shared_storage_down(MOUNT, {"mount_check": str(tmp_path / "none")}) == ""


def test_requeue_queues_every_node_kiln_has_out(tmp_path, monkeypatch, capsys):
    nodes = [node("c1", "IDLE+DRAIN", MOUNT), node("c2", "IDLE+DRAIN", OPERATOR),
             node("c3", "DOWN+NOT_RESPONDING", "Not responding"), node("c4"),
             node("c5", "IDLE+DRAIN", "kiln-rma: disk-full: 2 failed repairs")]  # fmt: skip
    args = lab(tmp_path, monkeypatch, nodes)
    assert program.main([*args, "--requeue"]) == 0
    assert capsys.readouterr().out == "queued: c1 c3\n"
    [queued] = (tmp_path / "state" / "queue").iterdir()
    assert queued.read_text() == "c1,c3\n"
    # Run after `kiln repair reset`: the closed breaker is in the metrics at once.
    prom = (tmp_path / "metrics" / "kiln_repair.prom").read_text()
    assert "kiln_repair_breaker_open 0\n" in prom


# --- kiln-repair-step: the repair key's forced command on the node ----------------------------


@pytest.mark.parametrize(
    ("asked", "allowed"),
    [
        (
            "sh -c 'systemctl kill --signal=KILL --kill-whom=main slurmd 2>/dev/null;"
            " systemctl restart munge slurmd'",
            True,
        ),
        ("sh -c 'systemctl restart munge slurmd'", False),
        (
            "sh -c '! systemctl is-enabled --quiet autofs 2>/dev/null || systemctl restart"
            " autofs; systemctl start local-fs.target remote-fs.target'",
            True,
        ),
        ("systemctl restart autofs", False),
        ("nvidia-smi --gpu-reset", True),
        ("/usr/local/sbin/kiln-evidence --out /var/lib/kiln/evidence --dcgm-level 2", True),
        ("/usr/local/sbin/kiln-evidence --out /var/lib/../../etc --dcgm-level 2", False),
        ("/usr/local/sbin/kiln-evidence --out /x --dcgm-level 2 --records /root", False),
        ("systemctl restart sshd", False),
        ("sh -c 'systemctl restart autofs; rm -rf /'", False),
        ("bash", False),
    ],
)
def test_the_repair_key_runs_only_the_ladders_steps(asked, allowed):
    import shlex

    assert repair_step.allowed(shlex.split(asked)) is allowed


def test_a_refused_command_exits_126_with_one_line(monkeypatch, capsys):
    monkeypatch.setenv("SSH_ORIGINAL_COMMAND", "cat /etc/munge/munge.key")
    assert repair_step.main([]) == 126
    assert capsys.readouterr().err == "kiln-repair-step: refused: cat /etc/munge/munge.key\n"
    monkeypatch.delenv("SSH_ORIGINAL_COMMAND")
    assert repair_step.main([]) == 126
    assert capsys.readouterr().err == "kiln-repair-step: refused: no command\n"


def test_kiln_health_writes_its_time_to_detect_at_a_drain(tmp_path, monkeypatch):
    """The most a fault went unseen: from the last run that passed to the run that drained."""
    clock = iter([1000.0, 1060.0, 1120.0])
    monkeypatch.setattr(health.time, "time", lambda: next(clock))
    passing = [Result("mounts", "OK", "shared mounts answer")]
    prom = tmp_path / "kiln_health.prom"

    def values() -> dict[str, str]:
        lines = [line for line in prom.read_text().splitlines() if not line.startswith("#")]
        return dict(line.rsplit(" ", 1) for line in lines)

    health.write_metrics(str(tmp_path), "c1", passing)
    health.write_metrics(str(tmp_path), "c1", FAIL, "drained c1: kiln-health: mounts: x")
    health.write_metrics(str(tmp_path), "c1", FAIL, "")  # drained already: kept
    assert values() == {
        'kiln_health_check{node="c1",check="mounts"}': "0",
        'kiln_health_drain_held{node="c1"}': "0",
        'kiln_health_last_run_timestamp_seconds{node="c1"}': "1120",
        'kiln_health_last_pass_timestamp_seconds{node="c1"}': "1000",
        'kiln_health_time_to_detect_seconds{node="c1"}': "60",
    }
