"""`kiln drift` through the real `kiln` process and a real ansible-runner run of
drift.yml, against hosts nothing listens for: a run that checked no node says so, in
its summary, its report and their exit codes."""

import json

from kiln.errors import ExitCode
from tests.conftest import run_kiln

UNREACHABLE = {
    "ansible_host": "127.0.0.1",
    "ansible_port": 1,
    "ansible_user": "root",
    "ansible_ssh_common_args": "-o ConnectTimeout=3",
}
# The first task of site.yml, its pre-flight's read of each node's OS.
WHY = (
    "unreachable at Pre-flight: read each node's operating system: Failed to connect to "
    "the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused"
)


def test_a_drift_run_that_reached_no_host_is_not_no_drift(write_inventory, state_dir):
    hosts = {
        "all": {
            "vars": UNREACHABLE,
            "children": {
                "slurm_controller": {"hosts": {"ctl1": None}},
                "slurm_compute": {"hosts": {"gpu[001:002]": None}},
            },
        }
    }
    inv = str(write_inventory(hosts))
    shown = run_kiln("drift", "-i", inv)
    assert shown.returncode == ExitCode.HOSTS_FAILED, shown.stderr
    (report_id,) = [p.name for p in (state_dir / "validations").iterdir()]
    out = shown.stdout.splitlines()
    assert out[out.index("host   tasks  fingerprint") :] == [
        "host   tasks  fingerprint",
        "ctl1   -      -",
        "gpu001 -      -",
        "gpu002 -      -",
        f"ctl1: not checked: {WHY}",
        f"gpu001: not checked: {WHY}",
        f"gpu002: not checked: {WHY}",
        "",
        "nothing was checked; not checked: ctl1,gpu[001-002]; "
        f"report: kiln report show {report_id}",
    ]

    report = run_kiln("report", "show", report_id, "--format", "json")
    assert report.returncode == ExitCode.NOT_CHECKED, report.stderr
    data = json.loads(report.stdout)
    unchecked = {"verdict": "unchecked", "reasons": [f"not checked: {WHY}"]}
    assert (data["verdict"], data["node_verdicts"]) == (
        "unchecked",
        dict.fromkeys(["ctl1", "gpu001", "gpu002"], unchecked),
    )
    assert [(j["node"], j["test"], j["verdict"]) for j in data["judgements"]] == [
        (host, "drift.run", "unchecked") for host in ("ctl1", "gpu001", "gpu002")
    ]
    terminal = run_kiln("report", "show", report_id)
    assert terminal.returncode == ExitCode.NOT_CHECKED
    assert terminal.stdout.splitlines()[-1] == "UNCHECKED 3 nodes"
    junit = run_kiln("report", "show", report_id, "--format", "junit")
    assert junit.returncode == ExitCode.NOT_CHECKED
    assert f'<error message="not checked: {WHY}">' in junit.stdout

    as_json = run_kiln("drift", "-i", inv, "--json")
    assert as_json.returncode == ExitCode.HOSTS_FAILED, as_json.stderr
    found = json.loads(as_json.stdout)
    assert {k: v for k, v in found.items() if k not in ("report", "run")} == {
        "drift": False,
        "unchecked": dict.fromkeys(["ctl1", "gpu001", "gpu002"], WHY),
        "hosts": {},
        "outliers": {},
        "fingerprints": {},
    }
