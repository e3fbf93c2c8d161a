"""kiln.drift on events recorded from a real `kiln drift` of the lab (see
tests/fixtures/drift/README.md): what drifted, per host, with its diff."""

import json
from pathlib import Path

from kiln import drift
from kiln.inventory.spec import ClusterSpec
from kiln.validation.verdicts import Verdict

EVENTS = Path(__file__).parent.parent / "fixtures" / "drift" / "lab-check-mode-events.jsonl"
NCCL_DIFF = (
    "--- /etc/nccl.conf\n"
    "+++ /etc/nccl.conf\n"
    "@@ -2,4 +2,3 @@\n"
    " # socket: no RDMA device: NCCL over TCP sockets\n"
    " NCCL_IB_DISABLE=1\n"
    " NCCL_SOCKET_IFNAME==eth0\n"
    "-NCCL_DEBUG=INFO\n"
)


# kiln-compute01's verdict in the recorded run's report
DRIFTED = {
    "verdict": Verdict.FAIL,
    "reasons": [
        "would change: munge : Report that the munge key would be replaced",
        "would change: nccl_env : Write the NCCL site settings",
    ],
}


def recorded() -> list[dict]:
    return [json.loads(line) for line in EVENTS.read_text().splitlines()]


def test_the_recorded_run_drifts_on_one_host_with_a_diff_and_a_hidden_secret():
    found = drift.task_drift(recorded())
    assert found == {
        "kiln-compute01": [
            drift.TaskDrift(
                "munge : Report that the munge key would be replaced",
                "ansible.builtin.debug",
                drift.HIDDEN,
            ),
            drift.TaskDrift(
                "nccl_env : Write the NCCL site settings", "ansible.builtin.copy", NCCL_DIFF
            ),
        ]
    }


def test_diffs_of_every_shape_modules_give():
    # file: dicts before and after; lineinfile/template: text, with headers; apt:
    # `prepared`; a loop: one per item.
    assert drift.rendered_diff(
        {
            "diff": {
                "before": {"path": "/x", "state": "absent"},
                "after": {"path": "/x", "state": "directory"},
            }
        }
    ) == (
        '--- before\n+++ after\n@@ -1,4 +1,4 @@\n {\n   "path": "/x",\n'
        '-  "state": "absent"\n+  "state": "directory"\n }\n'
    )
    assert (
        drift.rendered_diff(
            {
                "diff": [
                    {
                        "before": "a\n",
                        "after": "b\n",
                        "before_header": "/etc/f",
                        "after_header": "/etc/f",
                    }
                ]
            }
        )
        == "--- /etc/f\n+++ /etc/f\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert drift.rendered_diff({"diff": {"prepared": "The following NEW packages: jq"}}) == (
        "The following NEW packages: jq\n"
    )
    looped = {
        "results": [
            {"diff": {"before": "1\n", "after": "2\n"}},
            {"diff": {"before": "x\n", "after": "x\n"}},
        ]
    }
    assert drift.rendered_diff(looped) == "--- before\n+++ after\n@@ -1 +1 @@\n-1\n+2\n"
    assert drift.rendered_diff({"changed": True}) == ""
    long = {"diff": {"before": "", "after": "".join(f"{i}\n" for i in range(500))}}
    lines = drift.rendered_diff(long).splitlines()
    assert len(lines) == 201 and lines[-1] == "... (303 more lines)"


def test_drift_as_a_report_for_the_history(tmp_path):
    spec = ClusterSpec(path=tmp_path, source=tmp_path, hosts={}, groups={})
    hosts = ["kiln-compute01", "kiln-compute02"]
    report = drift.to_report(
        "r1", "2026-11-25T06:00:00+00:00", spec, hosts, drift.task_drift(recorded())
    )
    assert [j.to_dict() for j in report.judgements] == [
        {
            "node": "kiln-compute01",
            "test": "drift.task",
            "subject": "munge : Report that the munge key would be replaced",
            "value": None,
            "unit": "",
            "verdict": "fail",
            "reason": "would change (no_log)",
            "threshold": None,
        },
        {
            "node": "kiln-compute01",
            "test": "drift.task",
            "subject": "nccl_env : Write the NCCL site settings",
            "value": None,
            "unit": "",
            "verdict": "fail",
            "reason": "would change",
            "threshold": None,
        },
    ]
    assert report.node_verdicts == {
        "kiln-compute01": DRIFTED,
        "kiln-compute02": {"verdict": Verdict.PASS, "reasons": []},
    }
    assert (report.suites, report.nodes, report.verdict) == (["drift"], hosts, Verdict.FAIL)


H100 = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100-80gb-hbm3-vm"


def test_the_fingerprint_reads_the_recorded_driver_and_dpkgs_listing():
    from tests.node_scripts import fingerprint

    recorded = (H100 / "proc-driver-nvidia-version.txt").read_text()
    assert fingerprint.driver_loaded(recorded) == "580.159.04"
    assert fingerprint.driver_loaded("") == ""
    # dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Status}\n', as on a GPU node
    listing = (
        "slurmd\t24.11.5-4+deb13u1\tinstalled\n"
        "munge\t0.5.16-1.1~deb13u1\tinstalled\n"
        "libnccl2\t2.28.9-1+cuda13.0\tinstalled\n"
        "nvidia-fabricmanager-580\t580.159.04-1\tinstalled\n"
        "nvidia-open\t580.159.04-1\tinstalled\n"
        "rdma-core\t56.1-1\tnot-installed\n"
        "enroot\t3.5.0-1\tconfig-files\n"
    )
    assert fingerprint.packages(listing) == {
        "slurm": "24.11.5-4+deb13u1",
        "munge": "0.5.16-1.1~deb13u1",
        "nccl": "2.28.9-1+cuda13.0",
        "fabric_manager": "580.159.04-1",
        "driver_package": "580.159.04-1",
    }
    assert fingerprint.os_release('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n') == (
        "Debian GNU/Linux 12 (bookworm)"
    )
    assert fingerprint.joined(["96.00.DA.00.0C", "96.00.DA.00.0C", ""]) == "96.00.DA.00.0C"
    # Run here, it answers JSON with what this machine has, nothing empty.
    mine = fingerprint.fingerprint()
    assert mine["kernel"] and all(mine.values())


def test_a_node_that_differs_from_most_of_its_group_is_named_field_by_field():
    same = {"kernel": "6.1.0-31-amd64", "driver_loaded": "580.159.04", "slurm": "24.11.5"}
    prints = {f"gpu00{i}": dict(same) for i in range(1, 5)}
    prints["gpu003"]["kernel"] = "6.1.0-28-amd64"
    del prints["gpu004"]["driver_loaded"]
    prints["head01"] = {"kernel": "6.1.0-28-amd64", "slurm": "24.11.5"}
    prints["head02"] = {"kernel": "6.1.0-31-amd64", "slurm": "24.11.5"}
    groups = {h: "slurm_compute" for h in prints if h.startswith("gpu")}
    groups |= {"head01": "slurm_controller", "head02": "slurm_controller"}
    odd, ties = drift.outliers(prints, groups)
    assert odd == {
        "gpu003": [drift.Outlier("kernel", "6.1.0-28-amd64", "6.1.0-31-amd64", 3, "slurm_compute")],
        "gpu004": [drift.Outlier("driver_loaded", None, "580.159.04", 3, "slurm_compute")],
    }
    assert [o.describe() for o in odd["gpu003"] + odd["gpu004"]] == [
        "kernel 6.1.0-28-amd64 (group slurm_compute: 6.1.0-31-amd64 on 3 nodes)",
        "driver_loaded absent (group slurm_compute: 580.159.04 on 3 nodes)",
    ]
    # Two controllers, two kernels: neither is the odd one; a note says so.
    assert ties == [
        "slurm_controller: kernel differs with no majority: "
        "6.1.0-28-amd64 on 1, 6.1.0-31-amd64 on 1"
    ]
    spec = ClusterSpec(path=Path("/inv"), source=Path("/inv"), hosts={}, groups={})
    report = drift.to_report("r2", "2026-11-25T06:00:00+00:00", spec, ["gpu003"], {}, odd)
    assert [j.to_dict() for j in report.judgements] == [
        {
            "node": "gpu003",
            "test": "drift.fingerprint",
            "subject": "kernel",
            "value": None,
            "unit": "",
            "verdict": "warn",
            "reason": "kernel 6.1.0-28-amd64 (group slurm_compute: 6.1.0-31-amd64 on 3 nodes)",
            "threshold": None,
        }
    ]
    assert report.node_verdicts["gpu003"]["verdict"] == Verdict.WARN


def test_fingerprints_are_read_from_the_runs_last_task():
    events = [
        {
            "event": "runner_on_ok",
            "event_data": {
                "host": "gpu001",
                "task": drift.FINGERPRINT_TASK,
                "res": {"changed": False, "rc": 0, "stdout": '{"kernel": "6.1.0-31-amd64"}'},
            },
        },
        {
            "event": "runner_on_ok",
            "event_data": {
                "host": "gpu002",
                "task": drift.FINGERPRINT_TASK,
                "res": {"changed": False, "rc": 2, "stdout": "", "msg": "No such file"},
            },
        },
    ]
    assert drift.fingerprints(events) == {"gpu001": {"kernel": "6.1.0-31-amd64"}}


def test_a_host_not_reached_or_stopped_by_a_failure_is_unchecked_never_pass(tmp_path):
    from kiln.run.events import Failure

    refused = "Failed to connect to the host via ssh: ssh: connect to host c3 port 22"
    missed = drift.unchecked(
        [
            Failure("kiln-compute03", "base : Install python3", refused, unreachable=True),
            Failure("kiln-compute04", "slurm : Write slurm.conf", "Permission denied"),
            Failure("kiln-compute04", "slurm : A later task", "not the first"),
        ]
    )
    assert missed == {
        "kiln-compute03": f"unreachable at base : Install python3: {refused}",
        "kiln-compute04": "failed at slurm : Write slurm.conf: Permission denied",
    }
    spec = ClusterSpec(path=tmp_path, source=tmp_path, hosts={}, groups={})
    hosts = ["kiln-compute01", "kiln-compute02", "kiln-compute03", "kiln-compute04"]
    tasks = drift.task_drift(recorded())
    report = drift.to_report("r1", "2026-11-25T06:00:00+00:00", spec, hosts, tasks, {}, missed)
    assert report.node_verdicts == {
        "kiln-compute01": DRIFTED,
        "kiln-compute02": {"verdict": Verdict.PASS, "reasons": []},
        "kiln-compute03": {
            "verdict": Verdict.UNCHECKED,
            "reasons": [f"not checked: unreachable at base : Install python3: {refused}"],
        },
        "kiln-compute04": {
            "verdict": Verdict.UNCHECKED,
            "reasons": ["not checked: failed at slurm : Write slurm.conf: Permission denied"],
        },
    }
    result = drift.DriftResult(report, tasks, unchecked=missed)
    assert result.summary() == "drift found; not checked: kiln-compute[03-04]"
    result.tasks = {}
    assert result.summary() == "no drift on the 2 nodes checked; not checked: kiln-compute[03-04]"
    result.unchecked = {}
    assert result.summary() == "no drift"
    # Nothing in the report at all (a playbook that stopped before any host): unchecked.
    empty = drift.to_report("r2", "2026-11-25T06:00:00+00:00", spec, [], {})
    assert (empty.verdict, drift.DriftResult(empty).summary()) == (
        Verdict.UNCHECKED,
        "nothing was checked",
    )


def test_a_diff_never_shows_url_credentials():
    proxy = 'Acquire::http::Proxy "http://kiln:{}@proxy:3142";\n'
    assert drift.rendered_diff(
        {
            "diff": {
                "before": proxy.format("old-PW"),
                "after": proxy.format("new-PW"),
                "before_header": "/etc/apt/apt.conf.d/01proxy",
                "after_header": "/etc/apt/apt.conf.d/01proxy",
            }
        }
    ) == (
        "--- /etc/apt/apt.conf.d/01proxy\n+++ /etc/apt/apt.conf.d/01proxy\n@@ -1 +1 @@\n"
        '-Acquire::http::Proxy "http://(secret)@proxy:3142";\n'
        '+Acquire::http::Proxy "http://(secret)@proxy:3142";\n'
    )


def test_the_fingerprint_of_a_gpu_node_from_its_recorded_outputs(monkeypatch):
    """Every field, each from the output it is read from; the VBIOS from nvidia-smi's CSV
    (kiln_node.nvidia_smi), the same version on every GPU said once."""
    import os

    from tests.node_scripts import fingerprint

    files = {
        "/etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n',
        "/proc/driver/nvidia/version": (H100 / "proc-driver-nvidia-version.txt").read_text(),
        "/usr/local/cuda/version.json": '{"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}',
    }
    vbios = "vbios_version\n96.00.DA.00.0C\n96.00.DA.00.0C\n"
    outputs = {
        "dpkg-query": "slurmd\t24.11.5-4+deb13u1\tinstalled\nlibnccl2\t2.28.9-1\tinstalled\n",
        "modinfo": "580.159.04\n",
        "nvidia-smi": vbios,
        "ofed_info": "",
    }
    ran = []
    monkeypatch.setattr(fingerprint, "read", lambda path: files.get(path, ""))
    monkeypatch.setattr(fingerprint, "run", lambda argv: ran.append(argv) or outputs[argv[0]])
    monkeypatch.setattr(fingerprint.glob, "glob", lambda pattern: [])
    assert fingerprint.fingerprint() == {
        "cuda": "13.0.2",
        "distribution": "Debian GNU/Linux 12 (bookworm)",
        "driver_installed": "580.159.04",
        "driver_loaded": "580.159.04",
        "kernel": os.uname().release,
        "nccl": "2.28.9-1",
        "slurm": "24.11.5-4+deb13u1",
        "vbios": "96.00.DA.00.0C",
    }
    assert ["nvidia-smi", "--query-gpu=vbios_version", "--format=csv"] in ran
