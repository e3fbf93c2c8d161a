"""Kiln's node check under real Slurm: installed by the health role on the compute
nodes, run by slurmd as HealthCheckProgram every 30 s (the scenario's interval). A fault
drains exactly its node with a `kiln-health:` reason and the node resumes once the fault
is gone; a node an operator drained stays drained.

slurm-c2's GPU is the nvidia_driver role's fact plus a TEST DOUBLE nvidia-smi that
replays the H100's recorded `nvidia-smi -q -x` (converge.yml); the faults edit that
recording, so parsing and rules are kiln-health's real code."""

import json
import re
import time

import pytest

testinfra_hosts = ["podman://slurm-ctl", "podman://slurm-c1", "podman://slurm-c2"]
RECORDING = "/srv/kiln-test/nvidia-smi-q.xml"
ECC_FAULT = "<dram_uncorrectable>2</dram_uncorrectable>"
WAIT = 100  # seconds: more than three intervals of 30 s


@pytest.fixture(scope="module")
def ctl(host):
    import testinfra

    return testinfra.get_host("podman://slurm-ctl")


def node_line(ctl, node: str) -> str:
    return ctl.check_output(f"scontrol --oneliner show node {node}")


def wait_for(ctl, node: str, wanted) -> str:
    deadline = time.monotonic() + WAIT
    while True:
        line = node_line(ctl, node)
        if wanted(line) or time.monotonic() > deadline:
            return line
        time.sleep(3)


def test_kiln_health_and_what_it_checks_on_each_node(host):
    name = host.backend.get_hostname()
    if name == "slurm-ctl":
        assert not host.file("/usr/local/sbin/kiln-health").exists
        return
    program = host.file("/usr/local/sbin/kiln-health")
    assert (program.user, program.group, program.mode) == ("root", "root", 0o755)
    config = host.file("/etc/kiln/health.json")
    assert (config.user, config.mode) == ("root", 0o644)
    assert json.loads(config.content_string) == {
        "check_timeout": 10,
        "dcgm_diag_level": 2,
        "free_space": [
            {"min_mb": 1024, "path": "/var/lib/slurm/slurmd"},
            {"min_mb": 10240, "path": "/var/lib/enroot"},
            {"min_mb": 1024, "path": "/tmp"},
        ],
        "gpus": 1 if name == "slurm-c2" else 0,
        "ib_ports": [],
        "imex": False,  # no NVLink domain: the NVL72 checks are off
        "nvlink_domain": False,
        "metrics_dir": "/var/lib/prometheus/node-exporter",
        "mount_check": "",
        "munge": True,
        "nvlinks_per_gpu": 0,
        "nvswitches": 0,
        "prolog_timeout": 10,
        "slurm": True,
        "timeout": 45,
    }
    # Slurm's Prolog and Epilog (kiln-epilog runs kiln-prolog --epilog).
    for name in ("kiln-prolog", "kiln-epilog"):
        job_check = host.file(f"/usr/local/sbin/{name}")
        assert (job_check.user, job_check.group, job_check.mode) == ("root", "root", 0o755)


def test_slurm_runs_it_and_it_writes_metrics(host, ctl):
    name = host.backend.get_hostname()
    if name == "slurm-ctl":
        shown = ctl.check_output("scontrol show config")
        for line in (
            r"HealthCheckInterval\s+= 30 sec",
            r"HealthCheckNodeState\s+= (ANY,CYCLE|CYCLE,ANY)",  # 22.05 writes CYCLE first
            r"HealthCheckProgram\s+= /usr/local/sbin/kiln-health",
        ):
            assert re.search(line, shown), line
        # Kiln's job-edge check as Prolog and Epilog (what the slurm role wrote).
        conf = ctl.file("/etc/slurm/slurm.conf").content_string.splitlines()
        assert "Prolog=/usr/local/sbin/kiln-prolog" in conf
        assert "Epilog=/usr/local/sbin/kiln-epilog" in conf
        return
    # Only slurmd runs the check here: the metrics file is its doing.
    metrics = host.file("/var/lib/prometheus/node-exporter/kiln_health.prom").content_string
    checks = ["munge", "free_space", "slurmd_version"]
    if name == "slurm-c2":
        checks = [
            "gpu_smi",
            "gpu_count",
            "gpu_driver",
            "gpu_persistence",
            "gpu_ecc",
            "gpu_remap",
            "gpu_clocks",
            "gpu_pcie",
            "gpu_xid",
            *checks,
        ]
    found = [line for line in metrics.splitlines() if line.startswith("kiln_health_check{")]
    assert found == [f'kiln_health_check{{node="{name}",check="{c}"}} 1' for c in checks]


def test_faults_drain_their_node_and_only_kiln_healths_drains_are_resumed(host, ctl):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("driven from the controller")
    import testinfra

    c1 = testinfra.get_host("podman://slurm-c1")
    c2 = testinfra.get_host("podman://slurm-c2")
    # slurm-c1: its enroot path full (a 1 MiB tmpfs); slurm-c2: two uncorrectable ECC
    # errors in the GPU's volatile counters.
    # (enroot is not installed in this scenario: the path is made for the test.)
    c1.check_output("mkdir /var/lib/enroot && mount -t tmpfs -o size=1m kiln-test /var/lib/enroot")
    c2.check_output(f"cp {RECORDING} {RECORDING}.good")
    c2.check_output(f"sed -i '0,/<dram_uncorrectable>0</s//<dram_uncorrectable>2</' {RECORDING}")
    try:
        assert ECC_FAULT in c2.file(RECORDING).content_string
        drained = {
            n: wait_for(ctl, n, lambda line: "DRAIN" in line) for n in ("slurm-c1", "slurm-c2")
        }
        assert (
            "Reason=kiln-health: free_space: /var/lib/enroot 1 MiB free, 10240 needed"
            in (drained["slurm-c1"])
        )
        assert (
            "Reason=kiln-health: gpu_ecc: 00000000:00:06.0 2 uncorrectable ECC errors"
            in (drained["slurm-c2"])
        )
        # An operator takes slurm-c1 over; then both faults go away.
        ctl.check_output("scontrol update nodename=slurm-c1 state=drain reason='molecule: RMA 7'")
    finally:
        c1.run("umount /var/lib/enroot; rmdir /var/lib/enroot")
        c2.run(f"mv {RECORDING}.good {RECORDING}")
    resumed = wait_for(ctl, "slurm-c2", lambda line: "DRAIN" not in line)
    assert "DRAIN" not in resumed, resumed
    kept = node_line(ctl, "slurm-c1")
    assert "DRAIN" in kept and "Reason=molecule: RMA 7" in kept
    ctl.check_output("scontrol update nodename=slurm-c1 state=resume")


# --- The scheduled active check -----------------------------------------------------

ACTIVE_RESULTS = "/var/lib/kiln/health"
DCGM_RESULT = "/srv/kiln-test/dcgm-diag.json"
PCIE_FAULT = "/srv/kiln-test/dcgm-diag-pcie-fail.json"


def test_the_active_check_is_scheduled_on_the_first_controller(host):
    name = host.backend.get_hostname()
    timer = host.file("/etc/systemd/system/kiln-health-active.timer")
    if name != "slurm-ctl":
        assert not timer.exists
        return
    assert "OnCalendar=Sun *-*-* 03:00:00\n" in timer.content_string
    assert host.service("kiln-health-active.timer").is_enabled
    assert host.service("kiln-health-active.timer").is_running
    shown = host.check_output(
        "systemctl show kiln-health-active.timer --property=LoadState,NextElapseUSecRealtime"
    )
    assert "LoadState=loaded" in shown and re.search(r"NextElapseUSecRealtime=Sun \d{4}-", shown)
    config = json.loads(host.file("/etc/kiln/health-active.json").content_string)
    assert config == {
        "dcgm_diag_level": 2,
        "keep": 12,
        "metrics_dir": "/var/lib/prometheus/node-exporter",
        "minutes": 60,
        "nice": 10000,
        "nodes": ["slurm-c1", "slurm-c2"],
        "reservation": "kiln_health_active",
        "results_dir": ACTIVE_RESULTS,
    }


def last_record(ctl) -> dict:
    newest = ctl.check_output(f"ls -1 {ACTIVE_RESULTS}/active-*.json | tail -n 1")
    return json.loads(ctl.file(newest).content_string)


def test_the_active_check_drains_its_failures_and_resumes_them_when_they_pass(host, ctl):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("driven from the controller")
    import testinfra

    c2 = testinfra.get_host("podman://slurm-c2")
    for node in ("slurm-c1", "slurm-c2"):
        wait_for(ctl, node, lambda line: re.search(r"State=IDLE\s", line))
    # slurm-c2's DCGM reports a failing pcie test; slurm-c1 has no dcgmi.
    c2.check_output(f"cp {DCGM_RESULT} {DCGM_RESULT}.good")
    try:
        c2.check_output(f"cp {PCIE_FAULT} {DCGM_RESULT}")
        started = ctl.run("systemctl start kiln-health-active.service")
        # The unit fails when a node fails: `systemctl --failed` shows it.
        assert started.rc != 0, last_record(ctl)
        assert ctl.check_output("systemctl show kiln-health-active.service -p Result") == (
            "Result=exit-code"
        )
    finally:
        c2.check_output(f"mv {DCGM_RESULT}.good {DCGM_RESULT}")
    # Slurm's reason field: Kiln keeps its own to 100 characters.
    reason = (
        "kiln-active: dcgm_diag: level 2 pcie GPU 0: Found 104 PCIe replay errors on GPU 0, "
        "more than the threshold of 8: check the GPU's PCIe link and its riser"
    )[:100]
    assert f"Reason={reason} [root@" in node_line(ctl, "slurm-c2")
    assert "DRAIN" not in node_line(ctl, "slurm-c1")
    assert "No reservations in the system" in ctl.check_output("scontrol show reservation")
    record = last_record(ctl)
    assert record["skipped"] == {} and record["error"] == ""
    assert {n: (r["status"], r["action"]) for n, r in record["nodes"].items()} == {
        "slurm-c1": ("OK", ""),
        "slurm-c2": ("FAIL", f"drained: {reason}"),
    }
    c1_checks = [r["check"] for r in record["nodes"]["slurm-c1"]["results"]]
    assert c1_checks == ["munge", "free_space", "slurmd_version"]
    c2_dcgm = record["nodes"]["slurm-c2"]["results"][-1]
    assert (c2_dcgm["check"], c2_dcgm["status"]) == ("dcgm_diag", "FAIL")
    metrics = ctl.file("/var/lib/prometheus/node-exporter/kiln_health_active.prom").content_string
    assert 'kiln_health_active_check{node="slurm-c2",check="dcgm_diag"} 0' in metrics

    # Slurm's passive check (every 30 s) runs on slurm-c2 again, passes, and leaves this
    # drain alone. Each run writes its metrics file anew (a new inode).
    stamp = "stat -c %i /var/lib/prometheus/node-exporter/kiln_health.prom"
    before = c2.check_output(stamp)
    deadline = time.monotonic() + WAIT
    while c2.check_output(stamp) == before and time.monotonic() < deadline:
        time.sleep(2)
    assert c2.check_output(stamp) != before, "Slurm did not run the health check again"
    assert f"Reason={reason} [root@" in node_line(ctl, "slurm-c2")

    # The next run tests slurm-c2 again (drained by this check) and resumes it.
    ctl.check_output("systemctl start kiln-health-active.service")
    assert "DRAIN" not in node_line(ctl, "slurm-c2")
    record = last_record(ctl)
    assert {n: (r["status"], r["action"]) for n, r in record["nodes"].items()} == {
        "slurm-c1": ("OK", ""),
        "slurm-c2": ("OK", "resumed"),
    }
    assert record["nodes"]["slurm-c2"]["results"][-1] == {
        "check": "dcgm_diag",
        "status": "OK",
        "reason": "level 2: 4 tests passed",
    }


def test_a_busy_node_is_never_taken(host, ctl):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("driven from the controller")
    job = ctl.check_output("sbatch --parsable -w slurm-c1 -N1 --wrap 'sleep 120'")
    try:
        wait_for(ctl, "slurm-c1", lambda line: "ALLOCATED" in line or "MIXED" in line)
        ctl.check_output("systemctl start kiln-health-active.service")
        record = last_record(ctl)
        assert list(record["nodes"]) == ["slurm-c2"]
        assert re.fullmatch(r"(allocated|mixed): not idle", record["skipped"]["slurm-c1"])
        # The job ran on, untouched.
        assert ctl.check_output(f"squeue -h -j {job} -o %T") == "RUNNING"
    finally:
        ctl.run(f"scancel {job}")
