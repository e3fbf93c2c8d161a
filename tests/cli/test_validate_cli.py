"""`kiln validate` and `kiln report` through the real process: the bad-input paths that
stop before anything runs, and re-rendering and comparing kept reports. (The lab e2e
runs the suites for real.)"""

import json

import yaml

from kiln.errors import ExitCode
from kiln.report import document, write
from kiln.run import ids
from kiln.validation.verdicts import Judgement, Verdict
from tests.conftest import cluster_inventory, run_kiln


def one_line_error(result, code, *fragments):
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_profile(write_inventory):
    inventory = write_inventory()
    result = run_kiln("validate", "-i", str(inventory), "--profile", "h100-pcie")
    one_line_error(result, ExitCode.BAD_INPUT, "unknown profile 'h100-pcie'", "lab-cpu")


def test_profile_with_a_misspelled_test(write_inventory, tmp_path):
    inventory = write_inventory()
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        yaml.safe_dump({"extends": "h100-sxm-8x-ib400", "thresholds": {"storage.seq_raed": 2000}})
    )
    result = run_kiln("validate", "-i", str(inventory), "--profile", str(mine))
    one_line_error(
        result,
        ExitCode.BAD_INPUT,
        "unknown test 'storage.seq_raed'",
        "did you mean 'storage.seq_read'?",
    )


def test_profile_with_a_bad_storage_setting(write_inventory, tmp_path):
    inventory = write_inventory()
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"extends": "lab-cpu", "storage": {"file_size_mib": "big"}}))
    result = run_kiln("validate", "-i", str(inventory), "--profile", str(mine))
    one_line_error(
        result, ExitCode.BAD_INPUT, "storage.file_size_mib must be a whole number, got 'big'"
    )


def test_nodes_outside_the_inventory(write_inventory):
    inventory = write_inventory()
    result = run_kiln("validate", "-i", str(inventory), "--nodes", "gpu[001-004]")
    one_line_error(
        result,
        ExitCode.BAD_INPUT,
        "gpu[003-004] not in the inventory's slurm_compute (gpu[001-002])",
    )


def test_bad_hostlist_and_unknown_suite(write_inventory):
    inventory = write_inventory()
    result = run_kiln("validate", "-i", str(inventory), "--nodes", "gpu[001-")
    one_line_error(result, ExitCode.BAD_INPUT, "--nodes 'gpu[001-'", "unbalanced brackets")
    # Bounded and ascending: a typo must not exhaust memory or select no node at all.
    result = run_kiln("validate", "-i", str(inventory), "--nodes", "c[0-99999999]", timeout=30)
    one_line_error(result, ExitCode.BAD_INPUT, "names more than 1,000,000 hosts")
    result = run_kiln("validate", "-i", str(inventory), "--nodes", "gpu[003-1]")
    one_line_error(result, ExitCode.BAD_INPUT, "reversed range 3-1")
    result = run_kiln("validate", "-i", str(inventory), "--suite", "storage,nccl")
    one_line_error(
        result, ExitCode.BAD_INPUT, "--suite: unknown suite 'nccl'", "slurm, storage, collectives"
    )


def test_inventory_without_a_controller(write_inventory):
    hosts = cluster_inventory()
    del hosts["all"]["children"]["slurm_controller"]
    inventory = write_inventory(hosts)
    result = run_kiln("validate", "-i", str(inventory))
    one_line_error(result, ExitCode.BAD_INPUT, "no slurm_controller group")


def kept_report(verdict, value):
    report = document.Report(
        id=ids.new_id(),
        started=document.now(),
        inventory="inv",
        profile="lab-cpu",
        suites=["storage"],
        nodes=["n1", "n2"],
        judgements=[
            Judgement("n1", "storage.seq_read", "/shared", 100.0, "MB/s", Verdict.PASS, "ok", 5.0),
            Judgement("n2", "storage.seq_read", "/shared", value, "MB/s", verdict, "r", 5.0),
        ],
        node_verdicts={
            "n1": {"verdict": "pass", "reasons": []},
            "n2": {"verdict": verdict.value, "reasons": ["r"]},
        },
    )
    write.write_all(report)
    return report


def test_report_show_list_and_compare():
    good = kept_report(Verdict.PASS, 100.0)
    bad = kept_report(Verdict.FAIL, 2.0)
    listed = run_kiln("report", "list", "--json")
    assert {r["id"] for r in json.loads(listed.stdout)} == {good.id, bad.id}
    shown = run_kiln("report", "show", bad.id, "--format", "markdown")
    assert shown.returncode == ExitCode.VALIDATION_FAILED
    assert "| n2 | fail | r |" in shown.stdout
    html = run_kiln("report", "show", good.id, "--format", "html")
    assert html.returncode == ExitCode.OK and "<svg" in html.stdout
    compared = run_kiln("report", "compare", good.id, bad.id, "--json")
    changes = json.loads(compared.stdout)
    assert {(c["node"], c["direction"]) for c in changes} == {
        ("n2", "worse"),
        ("fleet median", "worse"),
    }
    missing = run_kiln("report", "show", "20990101")
    one_line_error(missing, ExitCode.BAD_INPUT, "no validation run '20990101'")
