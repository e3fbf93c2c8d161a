"""kiln-health-active, the scheduled active check the health role installs on the
controller: which nodes it takes, what it reads back from its srun step, what it drains
and resumes, the record it keeps. Slurm's side is `scontrol --oneliner show node` as
Slurm 24.11 prints it; the run under real Slurm is tested in molecule/slurm."""

import json

import pytest

from kiln_node import slurm_state
from tests.node_scripts import health_active as active

TAIL = (
    "ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu "
    "BootTime=2026-11-20T10:12:01 SlurmdStartTime=2026-11-20T10:13:40 "
    "LastBusyTime=2026-11-25T01:10:00 ResumeAfterTime=None "
    "CfgTRES=cpu=224,mem=2000000M,billing=224,gres/gpu=8 AllocTRES= CapWatts=n/a "
    "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/a ExtSensorsWatts=0 ExtSensorsTemp=n/a"
)


def node(name: str, state: str, reason: str = "") -> str:
    head = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUEfctv=224 CPUTot=224 "
        f"CPULoad=0.52 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8 "
        f"NodeAddr={name} NodeHostName={name} Version=24.11.5 OS=Linux 6.8.0-1019-nvidia "
        f"#21-Ubuntu SMP Wed Nov 20 10:00:00 UTC 2026 RealMemory=2000000 AllocMem=0 "
        f"FreeMem=1950000 Sockets=2 Boards=1 State={state} "
    )
    return head + TAIL + (f" Reason={reason} [root@2026-11-22T03:04:11]" if reason else "")


OURS = "kiln-active: dcgm_diag: level 2 pcie GPU 0: Found 104 PCIe replay errors"
SCONTROL = "\n".join(
    [
        node("gpu001", "IDLE"),
        node("gpu002", "ALLOCATED"),
        node("gpu003", "MIXED"),
        node("gpu004", "IDLE+DRAIN", OURS),
        node("gpu005", "IDLE+DRAIN", "bad DIMM, ticket 4711"),
        node("gpu006", "IDLE+DRAIN", "kiln-health: munge: munge does not answer"),
        node("gpu007", "DOWN*+NOT_RESPONDING", "Not responding"),
        node("gpu008", "IDLE+RESERVED"),
        node("gpu009", "ALLOCATED+DRAIN", OURS),
        node("login1", "IDLE"),
    ]
)
COMPUTE = [f"gpu{i:03d}" for i in range(1, 11)]


def test_the_nodes_are_read_whole():
    states = slurm_state.parse(SCONTROL)
    assert {n: (sorted(s.flags), s.reason) for n, s in states.items()} == {
        "gpu001": (["IDLE"], ""),
        "gpu002": (["ALLOCATED"], ""),
        "gpu003": (["MIXED"], ""),
        "gpu004": (["DRAIN", "IDLE"], OURS),
        "gpu005": (["DRAIN", "IDLE"], "bad DIMM, ticket 4711"),
        "gpu006": (["DRAIN", "IDLE"], "kiln-health: munge: munge does not answer"),
        "gpu007": (["DOWN", "NOT_RESPONDING"], "Not responding"),
        "gpu008": (["IDLE", "RESERVED"], ""),
        "gpu009": (["ALLOCATED", "DRAIN"], OURS),
        "login1": (["IDLE"], ""),
    }


def test_only_idle_nodes_and_its_own_drains_are_taken():
    chosen = active.plan(slurm_state.parse(SCONTROL), COMPUTE)
    assert chosen == active.Plan(
        test=["gpu001", "gpu004"],
        resume_to_test=["gpu004"],
        skipped={
            "gpu002": "allocated: not idle",
            "gpu003": "mixed: not idle",
            "gpu005": "drained: bad DIMM, ticket 4711",
            "gpu006": "drained: kiln-health: munge: munge does not answer",
            "gpu007": "down+not_responding: not idle",
            "gpu008": "reserved: not idle",
            "gpu009": "allocated: not idle",
            "gpu010": "not in Slurm",
        },
    )


def as_result(row: tuple[str, str, str]) -> dict:
    return dict(zip(("check", "status", "reason"), row, strict=True))


def health_line(name: str, *results: tuple[str, str, str]) -> str:
    rows = [{"check": c, "status": s, "reason": r} for c, s, r in results]
    return json.dumps({"node": name, "results": rows, "action": ""})


MUNGE_OK = ("munge", "OK", "munge answers")
DCGM_OK = ("dcgm_diag", "OK", "level 2: 4 tests passed")
DCGM_FAIL = ("dcgm_diag", "FAIL", "level 2 pcie GPU 0: Found 104 PCIe replay errors")


def test_the_step_output_is_read_per_node():
    # srun forwards a long line in pieces, each with its task's label (seen with Slurm
    # 22.05 on a 1.1 kB line); task 2 printed nothing readable.
    long = health_line("gpu004", MUNGE_OK, DCGM_FAIL)
    output = "\n".join(
        [
            f"0: {health_line('gpu001', MUNGE_OK, DCGM_OK)}",
            f"1: {long[:70]}",
            f"1: {long[70:]}",
            "2: Traceback (most recent call last):",
        ]
    )
    runs = active.parse_step_output(output, ["gpu001", "gpu004", "gpu011"])
    assert runs == {
        "gpu001": active.NodeRun(
            results=[
                {"check": "munge", "status": "OK", "reason": "munge answers"},
                {"check": "dcgm_diag", "status": "OK", "reason": "level 2: 4 tests passed"},
            ]
        ),
        "gpu004": active.NodeRun(
            results=[
                {"check": "munge", "status": "OK", "reason": "munge answers"},
                {
                    "check": "dcgm_diag",
                    "status": "FAIL",
                    "reason": "level 2 pcie GPU 0: Found 104 PCIe replay errors",
                },
            ]
        ),
        "gpu011": active.NodeRun(error="no result (the srun step did not run here)"),
    }
    assert [r.status for r in runs.values()] == ["OK", "FAIL", "ERROR"]


@pytest.mark.parametrize(
    ("results", "error", "resumed", "drain"),
    [
        # A failing active check drains, named by its first reason.
        ([MUNGE_OK, DCGM_FAIL], "", False, "kiln-active: " + ": ".join(DCGM_FAIL[::2])),
        # A failing passive check is Slurm's health check's to drain, not this one's.
        ([("munge", "FAIL", "munge does not answer"), DCGM_OK], "", False, None),
        # Its own drain, passing again: resumed (no drain).
        ([MUNGE_OK, DCGM_OK], "", True, None),
        # Its own drain, not tested after all: drained again as it was found.
        ([], "no result", True, OURS),
        # An idle node that brought no result: left as it is.
        ([], "no result", False, None),
    ],
)
def test_what_is_drained(results, error, resumed, drain):
    run = active.NodeRun(results=[as_result(r) for r in results])
    run.error = error
    states = slurm_state.parse(SCONTROL)
    name = "gpu004" if resumed else "gpu001"
    chosen = active.drains({name: run}, ["gpu004"] if resumed else [], states)
    assert chosen == ({name: drain} if drain else {})


def test_a_drain_reason_fits_slurms_field():
    long = ("dcgm_diag", "FAIL", "x" * 300)
    run = active.NodeRun(results=[as_result(long)])
    [reason] = active.drains({"gpu001": run}, [], {}).values()
    assert len(reason) == active.REASON_LIMIT and reason.startswith("kiln-active: dcgm_diag: xxx")


def test_metrics_for_the_textfile_collector(tmp_path):
    runs = {
        "gpu004": active.NodeRun(results=[as_result(DCGM_FAIL)]),
        "gpu001": active.NodeRun(results=[as_result(DCGM_OK)]),
    }
    active.write_metrics(str(tmp_path), runs, 1795000000.4)
    assert (tmp_path / "kiln_health_active.prom").read_text() == (
        "# HELP kiln_health_active_check 1 when the scheduled active check passed, 0 when not.\n"
        "# TYPE kiln_health_active_check gauge\n"
        'kiln_health_active_check{node="gpu001",check="dcgm_diag"} 1\n'
        'kiln_health_active_check{node="gpu004",check="dcgm_diag"} 0\n'
        "# HELP kiln_health_active_last_run_timestamp_seconds When the active check last ran.\n"
        "# TYPE kiln_health_active_last_run_timestamp_seconds gauge\n"
        "kiln_health_active_last_run_timestamp_seconds 1795000000\n"
    )
    assert not list(tmp_path.glob("*.tmp"))


def test_only_the_last_records_are_kept(tmp_path):
    for day in range(1, 6):
        (tmp_path / f"active-202611{day:02d}T030000Z.json").write_text("{}")
    (tmp_path / "other.json").write_text("{}")
    active.keep_last(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "active-20261104T030000Z.json",
        "active-20261105T030000Z.json",
        "other.json",
    ]


def test_bad_configuration_exits_2(tmp_path, capsys):
    assert active.main(["--config", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith(
        f"kiln-health-active: cannot read {tmp_path / 'missing.json'}: "
    )


def fake_slurm(tmp_path, monkeypatch, srun_output: str, create_fails: int = 0):
    """scontrol and srun TEST DOUBLES on PATH that log their arguments: `show node`
    prints SCONTROL, `create` fails the first CREATE_FAILS times as Slurm does for a
    node a job took, srun prints SRUN_OUTPUT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "scontrol.txt").write_text(SCONTROL + "\n")
    (tmp_path / "srun.txt").write_text(srun_output + "\n")
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        f'echo "scontrol $*" >> {tmp_path}/calls\n'
        f'case "$*" in *"show node"*) cat {tmp_path}/scontrol.txt;; create*)\n'
        f'  n=$(grep -c "scontrol create" {tmp_path}/calls)\n'
        f'  [ "$n" -gt {create_fails} ] || {{ echo "Error creating the reservation: '
        'Requested nodes are busy" >&2; exit 1; };;\n'
        "esac\n"
    )
    (bin_dir / "srun").write_text(
        f'#!/bin/sh\necho "srun $*" >> {tmp_path}/calls\ncat {tmp_path}/srun.txt\nexit 1\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    config = {
        "nodes": COMPUTE,
        "reservation": "kiln_health_active",
        "minutes": 60,
        "nice": 10000,
        "dcgm_diag_level": 2,
        "results_dir": str(tmp_path / "results"),
        "keep": 12,
        "metrics_dir": str(tmp_path / "metrics"),
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path / "calls"


def test_a_whole_run(tmp_path, monkeypatch, capsys):
    output = "\n".join(
        [
            f"0: {health_line('gpu001', MUNGE_OK, DCGM_FAIL)}",
            f"1: {health_line('gpu004', MUNGE_OK, DCGM_OK)}",
        ]
    )
    calls = fake_slurm(tmp_path, monkeypatch, output, create_fails=1)
    assert active.main(["--config", str(tmp_path / "config.json")]) == 1
    drain = "kiln-active: dcgm_diag: level 2 pcie GPU 0: Found 104 PCIe replay errors"
    create = (
        "scontrol create ReservationName=kiln_health_active Nodes=gpu001,gpu004 Users=root "
        "Flags=MAINT StartTime=now Duration=60"
    )
    # The first reservation is refused (a job took a node meanwhile): read and plan again.
    assert calls.read_text().splitlines() == [
        "scontrol --oneliner show node",
        "scontrol delete ReservationName=kiln_health_active",
        create,
        "scontrol --oneliner show node",
        "scontrol delete ReservationName=kiln_health_active",
        create,
        "scontrol update NodeName=gpu004 State=RESUME",
        "srun --nodes=2 --nodelist=gpu001,gpu004 --ntasks-per-node=1 "
        "--reservation=kiln_health_active --time=60 --nice=10000 --immediate=120 "
        "--kill-on-bad-exit=0 --label --job-name=kiln-health-active "
        "/usr/local/sbin/kiln-health --active --json",
        f"scontrol update NodeName=gpu001 State=DRAIN Reason={drain}",
        "scontrol delete ReservationName=kiln_health_active",
    ]
    [record_file] = (tmp_path / "results").glob("active-*.json")
    record = json.loads(record_file.read_text())
    assert (
        record_file.name
        == f"active-{record['started'][:19].replace('-', '').replace(':', '')}Z.json"
    )
    assert record["finished"] >= record["started"]
    del record["started"], record["finished"]
    skipped = active.plan(slurm_state.parse(SCONTROL), COMPUTE).skipped
    assert record == {
        "dcgm_diag_level": 2,
        "nodes": {
            "gpu001": {
                "results": [as_result(r) for r in (MUNGE_OK, DCGM_FAIL)],
                "error": "",
                "action": f"drained: {drain}",
                "status": "FAIL",
            },
            "gpu004": {
                "results": [as_result(r) for r in (MUNGE_OK, DCGM_OK)],
                "error": "",
                "action": "resumed",
                "status": "OK",
            },
        },
        "skipped": skipped,
        "error": "",
    }
    assert (tmp_path / "metrics" / "kiln_health_active.prom").is_file()
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "gpu001: FAIL",
        "gpu004: OK",
        f"gpu001: drained: {drain}",
        "gpu004: resumed",
    ]
    assert out[4:] == [f"{n}: skipped ({why})" for n, why in skipped.items()]


def test_a_run_that_cannot_reserve_releases_nothing_it_did_not_take(tmp_path, monkeypatch, capsys):
    calls = fake_slurm(tmp_path, monkeypatch, "", create_fails=2)
    assert active.main(["--config", str(tmp_path / "config.json")]) == 2
    assert "scontrol update" not in calls.read_text()
    assert "srun" not in calls.read_text()
    assert capsys.readouterr().err == (
        "kiln-health-active: could not reserve gpu001,gpu004: "
        "Error creating the reservation: Requested nodes are busy\n"
    )
    [record_file] = (tmp_path / "results").glob("active-*.json")
    assert json.loads(record_file.read_text())["error"].startswith("could not reserve")
