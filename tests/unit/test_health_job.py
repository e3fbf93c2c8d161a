"""kiln-prolog, Kiln's Prolog and Epilog check, on recorded outputs: the healthy H100 VM
of tests/fixtures/gpu/h100-80gb-hbm3-vm (its `nvidia-smi -q -x` and kernel log), with
XID lines in the kernel's format appended and a GPU process in nvidia-smi's
<process_info> format added. The program runs with stand-ins on PATH for nvidia-smi,
dmesg and scontrol (which records what it was asked)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kiln_node import job_checks, metrics, nvidia_smi
from kiln_node.health_checks import Result
from tests.node_scripts import prolog
from tests.unit.test_health_node import XID_LINES, recorded, variant

SCRIPT = Path(prolog.__file__)
PROCESS = """<processes>
\t\t\t<process_info>
\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>
\t\t\t\t<compute_instance_id>N/A</compute_instance_id>
\t\t\t\t<pid>4242</pid>
\t\t\t\t<type>C</type>
\t\t\t\t<process_name>python3</process_name>
\t\t\t\t<used_memory>1024 MiB</used_memory>
\t\t\t</process_info>
\t\t</processes>"""
HELD = variant(("<processes>\n\t\t</processes>", PROCESS))


def log(*numbers: int) -> str:
    return recorded("dmesg-nvrm.txt") + "".join(XID_LINES[n] + "\n" for n in numbers)


# --- the library ----------------------------------------------------------------------


def test_the_kernel_log_is_read_from_the_marker_on():
    text = log(13, 79)
    first, marker = job_checks.log_since(text, None, "boot-a")
    assert first == text.rstrip("\n")
    assert marker == job_checks.Marker("boot-a", 9500.1)
    # Only the lines after it; the marker stays at the log's end.
    later, again = job_checks.log_since(text + XID_LINES[31] + "\n", marker, "boot-a")
    assert (later, again) == (XID_LINES[31], job_checks.Marker("boot-a", 9600.2))
    nothing, same = job_checks.log_since(text, marker, "boot-a")
    assert (nothing, same) == ("", marker)
    # Another boot: the whole log is new.
    assert job_checks.log_since(text, marker, "boot-b")[0] == first


def test_the_marker_is_written_whole_and_read_back(tmp_path):
    path = tmp_path / "kiln" / "marker.json"
    assert job_checks.read_marker(str(path)) is None
    job_checks.write_marker(str(path), job_checks.Marker("b", 12.5))
    assert job_checks.read_marker(str(path)) == job_checks.Marker("b", 12.5)
    assert [p.name for p in path.parent.iterdir()] == ["marker.json"]
    path.write_text("{half")
    assert job_checks.read_marker(str(path)) is None


@pytest.mark.parametrize(
    ("numbers", "line"),
    [
        ((), "OK gpu_xid: no XID since the last job"),
        ((13,), "OK gpu_xid: only application faults since the last job (XID 13)"),
        ((79, 13), "FAIL gpu_xid: XID 79 GPU fell off the bus on 0000:00:06"),
    ],
)
def test_new_xids_are_judged_as_kiln_health_judges_them(numbers, line):
    new, _ = job_checks.log_since(log(*numbers), job_checks.Marker("b", 3.6), "b")
    assert job_checks.judge_new_xids(new, "since the last job").line() == line


def test_the_gpu_state_checks_are_kiln_healths():
    gpus = nvidia_smi.parse_xml(recorded("nvidia-smi-q.xml")).gpus
    assert [r.line() for r in job_checks.judge_gpu_state(gpus, 1)] == [
        "OK gpu_count: 1 GPU",
        "OK gpu_ecc: no uncorrectable ECC error",
        "OK gpu_remap: no remap pending or failed",
    ]
    assert job_checks.judge_gpu_state(gpus, 8)[0].line() == (
        "FAIL gpu_count: 1 GPU visible, 8 expected"
    )


def test_processes_on_the_jobs_gpus():
    gpus = nvidia_smi.parse_xml(HELD).gpus
    assert gpus[0].processes == (nvidia_smi.SmiProcess(4242, "python3", 1024),)
    assert job_checks.judge_processes(gpus, [0], "after the job").line() == (
        "FAIL gpu_processes: pid 4242 (python3, 1024 MiB) on GPU 0 after the job"
    )
    idle = nvidia_smi.parse_xml(recorded("nvidia-smi-q.xml")).gpus
    assert job_checks.judge_processes(idle, [0], "before the job").line() == (
        "OK gpu_processes: the job's GPUs hold no process"
    )
    # A GPU the job did not get, or one that is missing (gpu_count says so), is not judged.
    assert job_checks.judge_processes(gpus, [1], "x").status == "OK"


@pytest.mark.parametrize(
    ("value", "indices"), [("", []), ("0", [0]), ("0,2", [0, 2]), ("0-3,6", [0, 1, 2, 3, 6])]
)
def test_slurm_job_gpus(value, indices):
    assert job_checks.job_gpus(value) == indices


def test_slurm_job_gpus_that_are_not_indices():
    with pytest.raises(ValueError, match=r"^SLURM_JOB_GPUS 'gpu:a100' is not a list of GPU"):
        job_checks.job_gpus("gpu:a100")


def test_the_drain_reason_keeps_its_job_when_cut():
    reason = job_checks.drain_reason(Result("gpu_ecc", "FAIL", "x" * 200), "123", "epilog")
    assert len(reason) == job_checks.REASON_LIMIT
    assert reason.startswith("kiln-health: gpu_ecc: xxx") and reason.endswith("x (epilog, job 123)")


# --- the program ----------------------------------------------------------------------

NODE_LINE = "NodeName=c1 Arch=x86_64 State={state} Reason={reason}\n"


def stand_ins(tmp_path, xml: str, kernel_log: str, state="MIXED", reason="") -> Path:
    """nvidia-smi, dmesg and scontrol on a PATH of their own; scontrol appends each
    call's arguments to scontrol.calls and answers `show node` with NODE_LINE."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "smi.xml").write_text(xml)
    (tmp_path / "dmesg.txt").write_text(kernel_log)
    (tmp_path / "node.txt").write_text(NODE_LINE.format(state=state, reason=reason or "none"))
    scripts = {
        "nvidia-smi": f"exec cat {tmp_path / 'smi.xml'}\n",
        "dmesg": f"exec cat {tmp_path / 'dmesg.txt'}\n",
        "scontrol": f'echo "$*" >> {tmp_path / "scontrol.calls"}\n'
        f'[ "$2" = show ] && exec cat {tmp_path / "node.txt"}\nexit 0\n',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def settings(tmp_path, **more) -> dict:
    return {
        "processes_settle_s": 0,
        "gpus": 1,
        "prolog_timeout": 10,
        "check_timeout": 5,
        "job_marker": str(tmp_path / "run" / "marker.json"),
        "metrics_dir": str(tmp_path / "metrics"),
        **more,
    }


def program(tmp_path, config: dict, *args: str, job="77", gpus="0", uid="1000"):
    (tmp_path / "health.json").write_text(json.dumps(config))
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURM_JOB_ID": job, "SLURM_JOB_UID": uid}
    if gpus is not None:
        env["SLURM_JOB_GPUS"] = gpus
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--config",
            str(tmp_path / "health.json"),
            "--node",
            "c1",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = tmp_path / "scontrol.calls"
    return done.returncode, done.stdout, calls.read_text() if calls.exists() else ""


def test_roots_job_is_not_gated(tmp_path):
    """Kiln's own steps (the repair loop's, the active check, validate) run as root on a
    node that may be failing: its Prolog checks nothing, drains nothing, writes nothing."""
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log())
    config = settings(tmp_path, mounts=[{"name": "shared", "path": "/nonexistent-e2e"}])
    assert program(tmp_path, config, uid="0") == (0, "OK prolog: root's job 77, not gated\n", "")
    assert program(tmp_path, config, "--epilog", uid="0") == (
        0,
        "OK epilog: root's job 77, not gated\n",
        "",
    )
    assert not (tmp_path / "metrics").exists()


HEALTHY = [
    "OK gpu_count: 1 GPU",
    "OK gpu_ecc: no uncorrectable ECC error",
    "OK gpu_remap: no remap pending or failed",
    "OK gpu_processes: the job's GPUs hold no process",
]


def test_a_healthy_node_passes_without_asking_slurm(tmp_path):
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log())
    assert program(tmp_path, settings(tmp_path)) == (
        0,
        "\n".join([*HEALTHY, "OK gpu_xid: no XID since the last job"]) + "\n",
        "",
    )
    assert job_checks.read_marker(str(tmp_path / "run" / "marker.json")) == job_checks.Marker(
        job_checks.boot_id(), 3.56618
    )
    prom = (tmp_path / "metrics" / "kiln_health_prolog.prom").read_text().splitlines()
    assert [line for line in prom if line.startswith("kiln_health_job_check{")] == [
        f'kiln_health_job_check{{node="c1",phase="prolog",check="{check}"}} 1'
        for check in ("gpu_count", "gpu_ecc", "gpu_remap", "gpu_processes", "gpu_xid")
    ]


def test_an_xid_since_the_last_job_drains_once_and_requeues_the_job(tmp_path):
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log())
    program(tmp_path, settings(tmp_path))  # the last job's Prolog: the marker
    (tmp_path / "dmesg.txt").write_text(log(13, 79))
    reason = "kiln-health: gpu_xid: XID 79 GPU fell off the bus on 0000:00:06 (prolog, job 78)"
    assert program(tmp_path, settings(tmp_path), job="78") == (
        1,
        "\n".join(
            [
                *HEALTHY,
                "FAIL gpu_xid: XID 79 GPU fell off the bus on 0000:00:06",
                f"# drained c1: {reason}",
            ]
        )
        + "\n",
        f"--oneliner show node c1\nupdate NodeName=c1 State=DRAIN Reason={reason}\n",
    )
    # Judged once: after a repair resumed the node, the next job starts.
    (tmp_path / "scontrol.calls").unlink()
    assert program(tmp_path, settings(tmp_path), job="79")[::2] == (0, "")


def test_a_missing_gpu_and_a_failing_mount_before_the_job(tmp_path):
    mount_check = tmp_path / "bin" / "kiln-mount-check"
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log())
    mount_check.write_text("#!/bin/sh\necho 'FAIL shared /shared: not mounted'\nexit 1\n")
    mount_check.chmod(0o755)
    config = settings(tmp_path, gpus=8, mount_check=str(mount_check))
    code, out, calls = program(tmp_path, config, gpus="")
    reason = "kiln-health: gpu_count: 1 GPU visible, 8 expected (prolog, job 77)"
    assert (code, out) == (
        1,
        "FAIL gpu_count: 1 GPU visible, 8 expected\n"
        "OK gpu_ecc: no uncorrectable ECC error\n"
        "OK gpu_remap: no remap pending or failed\n"
        "OK gpu_xid: no XID since the last job\n"
        "FAIL mounts: shared /shared: not mounted\n"
        f"# drained c1: {reason}\n",
    )
    assert calls.endswith(f"Reason={reason}\n")


def test_a_node_drained_by_someone_else_keeps_its_reason(tmp_path):
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log(), "IDLE+DRAIN", "fan swap")
    code, out, calls = program(tmp_path, settings(tmp_path, gpus=2))
    assert (code, out.splitlines()[-1], calls) == (
        1,
        "# c1 already drained: fan swap",
        "--oneliner show node c1\n",
    )


def test_the_epilog_names_the_job_that_left_a_process_and_an_xid(tmp_path):
    stand_ins(tmp_path, recorded("nvidia-smi-q.xml"), log())
    program(tmp_path, settings(tmp_path))  # the job's Prolog
    (tmp_path / "smi.xml").write_text(HELD)
    (tmp_path / "dmesg.txt").write_text(log(48))
    reason = (
        "kiln-health: gpu_processes: pid 4242 (python3, 1024 MiB) on GPU 0 after the job "
        "(epilog, job 77)"
    )
    assert program(tmp_path, settings(tmp_path), "--epilog") == (
        1,
        "OK gpu_count: 1 GPU\n"
        "OK gpu_ecc: no uncorrectable ECC error\n"
        "OK gpu_remap: no remap pending or failed\n"
        "FAIL gpu_processes: pid 4242 (python3, 1024 MiB) on GPU 0 after the job\n"
        "FAIL gpu_xid: XID 48 double-bit ECC error on 0000:00:06\n"
        f"# drained c1: {reason}\n",
        f"--oneliner show node c1\nupdate NodeName=c1 State=DRAIN Reason={reason}\n",
    )
    assert (tmp_path / "metrics" / "kiln_health_epilog.prom").exists()


def test_a_process_that_lets_go_of_its_gpu_on_the_second_look_is_not_a_leftover(tmp_path):
    bin_dir = stand_ins(tmp_path, HELD, log())
    (tmp_path / "idle.xml").write_text(recorded("nvidia-smi-q.xml"))
    # The first answer shows the job's process, the next one an idle GPU.
    smi, idle = tmp_path / "smi.xml", tmp_path / "idle.xml"
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\ncat {smi}\ncp {idle} {smi}\n")
    code, out, calls = program(tmp_path, settings(tmp_path), "--epilog")
    assert (code, calls) == (0, "")
    assert "OK gpu_processes: the job's GPUs hold no process\n" in out


def test_a_check_that_cannot_run_never_drains_and_the_job_starts(tmp_path):
    bin_dir = stand_ins(tmp_path, "", log())
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 30\n")
    (bin_dir / "dmesg").write_text(
        "#!/bin/sh\necho 'dmesg: read kernel buffer failed' >&2\nexit 1\n"
    )
    config = settings(tmp_path, prolog_timeout=3, check_timeout=1)
    assert program(tmp_path, config, gpus="0,x") == (
        0,
        "UNKNOWN gpu_processes: SLURM_JOB_GPUS '0,x' is not a list of GPU indices\n"
        "UNKNOWN gpu_smi: nvidia-smi: no answer within 1s\n"
        "UNKNOWN gpu_xid: kernel log unreadable: dmesg: dmesg: read kernel buffer failed\n",
        "",
    )
    prom = (tmp_path / "metrics" / "kiln_health_prolog.prom").read_text()
    assert 'kiln_health_job_check{node="c1",phase="prolog",check="gpu_smi"} -1' in prom


def test_nvidia_smis_own_exit_code_is_an_answer(tmp_path):
    bin_dir = stand_ins(tmp_path, "", log())
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 15\n")
    code, out, _ = program(tmp_path, settings(tmp_path), "--no-slurm")
    assert (code, out.splitlines()[0]) == (
        1,
        "FAIL gpu_smi: nvidia-smi: a GPU has fallen off the bus",
    )


def test_unreadable_settings_let_the_job_start(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (
        0,
        f"UNKNOWN settings: cannot read {tmp_path / 'none.json'}: [Errno 2] No such file or "
        f"directory: '{tmp_path / 'none.json'}'\n",
    )


def test_the_metrics_are_in_the_catalogue():
    assert metrics.HEALTH_JOB.format(phase="prolog") == "kiln_health_prolog.prom"
