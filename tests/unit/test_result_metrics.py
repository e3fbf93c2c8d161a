"""kiln.report.result_metrics: the last validate / burn-in as kiln_result_* metrics, and the
act step (validate_drain.yml, run for real on a local controller) that writes them
where node_exporter's textfile collector reads."""

import subprocess
from pathlib import Path
from types import SimpleNamespace

from kiln.campaigns import campaign, validate
from kiln.errors import ExitCode
from kiln.report import result_metrics as results
from kiln.report.document import Report
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation import results as layout
from kiln.validation.verdicts import Judgement, Verdict
from kiln_node import metrics
from tests.cli.test_data_never_a_template import real_acts, slurm, write_cluster  # noqa: F401
from tests.results_files import Written
from tests.unit.test_validation_run import scontrol_line, storage_result

WHEN = 1795779225.4


def judged(node, test, subject, value, unit, verdict=Verdict.PASS) -> Judgement:
    return Judgement(node, test, subject, value, unit, verdict, f"{test} {subject}")


def a_validation() -> Report:
    """Three nodes judged: two mounts, torch's and nccl-tests' busbw, a pair, the
    multi-node run, a failed benchmark with no value, and a node never checked."""
    report = Report(
        id="20261127-113000-abcd",
        started="2026-11-27T11:30:00+00:00",
        inventory="inv",
        profile="h100-sxm-8x-ib400",
        suites=["slurm", "storage", "collectives"],
        nodes=["gpu9", "gpu10", "gpu11"],
        judgements=[
            judged("gpu9", "storage.seq_read", "/shared", 2450.5, "MB/s"),
            judged("gpu9", "storage.seq_read", "/scratch", 1800.25, "MB/s"),
            judged("gpu9", "storage.seq_write", "/shared", 1520.0, "MB/s"),
            judged("gpu9", "storage.rand_read_iops", "/shared", 91000.0, "IOPS"),
            judged("gpu9", "collectives.all_reduce.single_node", "8 ranks, nccl", 371.2, "GB/s"),
            judged(
                "gpu9", "collectives.all_reduce.single_node", "nccl-tests, 8 ranks", 478.9, "GB/s"
            ),
            judged("gpu9", "slurm.mpi_bandwidth", "", 24.1, "GB/s"),
            judged("gpu10", "storage.seq_read", "/shared", None, "MB/s", Verdict.FAIL),
            judged("gpu10", "collectives.all_reduce.single_node", "8 ranks, nccl", 301.0, "GB/s"),
            judged("gpu9,gpu10", "collectives.all_reduce.pairwise", "", 180.0, "GB/s"),
            judged(
                "gpu[9-11]", "collectives.all_reduce.multi_node", "24 ranks, nccl", 440.0, "GB/s"
            ),
        ],
    )
    report.judge_nodes(nodes=["gpu9", "gpu10"])  # gpu11: no verdict, so not checked
    return report


VALIDATION = """\
# HELP kiln_result_verdict 1 for each node of the campaign's last run, its verdict in `verdict`.
# TYPE kiln_result_verdict gauge
kiln_result_verdict{campaign="validate",node="gpu9",verdict="pass"} 1
kiln_result_verdict{campaign="validate",node="gpu10",verdict="fail"} 1
kiln_result_verdict{campaign="validate",node="gpu11",verdict="unchecked"} 1
# HELP kiln_result_last_run_timestamp_seconds When the campaign's last run finished.
# TYPE kiln_result_last_run_timestamp_seconds gauge
kiln_result_last_run_timestamp_seconds{campaign="validate"} 1795779225
# HELP kiln_result_busbw_bytes_per_second NCCL bus bandwidth at the large-message plateau, last run.
# TYPE kiln_result_busbw_bytes_per_second gauge
kiln_result_busbw_bytes_per_second{campaign="validate",node="gpu9",test="collectives.all_reduce.single_node"} 371200000000
kiln_result_busbw_bytes_per_second{campaign="validate",node="gpu10",test="collectives.all_reduce.single_node"} 301000000000
# HELP kiln_result_storage_bytes_per_second Storage throughput (fio), last run.
# TYPE kiln_result_storage_bytes_per_second gauge
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu9",test="storage.seq_read"} 1800250000
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu9",test="storage.seq_write"} 1520000000
"""  # noqa: E501


def test_a_validation_becomes_each_nodes_verdict_and_its_lowest_figures():
    """Per node and test the lowest figure (of two mounts, of torch and nccl-tests);
    no figure of a pair, of the multi-node run, of a failed benchmark, or of a test
    that is no key figure (IOPS, MPI); a node with no verdict is `unchecked`; no
    empty metric (no burn-in here, so no TFLOP/s)."""
    assert results.for_controller(a_validation(), "validate", WHEN) == {
        "file": "kiln_result_validate.prom",
        "text": VALIDATION,
    }


def test_the_written_file_passes_promtool(tmp_path, promtool):
    metrics.write(
        str(tmp_path),
        results.file_name("validate"),
        results.gauges(a_validation(), "validate", WHEN),
    )
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=(tmp_path / "kiln_result_validate.prom").read_text(),
        capture_output=True,
        text=True,
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_a_run_of_no_node_still_says_when_it_ran():
    report = Report(id="x", started="", inventory="", profile=None, suites=[], nodes=[])
    assert results.for_controller(report, "burn_in", WHEN)["text"] == (
        "# HELP kiln_result_last_run_timestamp_seconds When the campaign's last run finished.\n"
        "# TYPE kiln_result_last_run_timestamp_seconds gauge\n"
        'kiln_result_last_run_timestamp_seconds{campaign="burn_in"} 1795779225\n'
    )


# --- written on the controller by the real validate_drain.yml -----------------------------


def passing_storage(nodes: list[str]):
    """validate.yml as its results say: the storage suite passed on every node."""
    scontrol = "\n".join(scontrol_line(n) for n in nodes)

    def suites(request):
        store = Written(Path(request.extravars["validate_results_dir"]))
        plan = drain.plan(scontrol, nodes).to_dict()
        store.write(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan})
        ok = layout.Step(rc=0).to_json()
        store.write(layout.STORAGE_STEPS, layout.StorageSteps(storage=ok, cold_import=ok).to_json())
        for n in nodes:
            store.write_node("storage", n, storage_result(n))
            store.write_node("cold_import", n, {"node": n, "module": "m", "seconds": 2.5})
        return RunSummary(run="r-suites", playbook=request.playbook, status="successful")

    return suites


STORAGE = """\
# HELP kiln_result_verdict 1 for each node of the campaign's last run, its verdict in `verdict`.
# TYPE kiln_result_verdict gauge
kiln_result_verdict{campaign="validate",node="gpu001",verdict="pass"} 1
kiln_result_verdict{campaign="validate",node="gpu002",verdict="pass"} 1
# HELP kiln_result_last_run_timestamp_seconds When the campaign's last run finished.
# TYPE kiln_result_last_run_timestamp_seconds gauge
kiln_result_last_run_timestamp_seconds{campaign="validate"} 1795779225
# HELP kiln_result_storage_bytes_per_second Storage throughput (fio), last run.
# TYPE kiln_result_storage_bytes_per_second gauge
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu001",test="storage.seq_read"} 1200000000
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu001",test="storage.seq_write"} 2000000000
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu002",test="storage.seq_read"} 1200000000
kiln_result_storage_bytes_per_second{campaign="validate",node="gpu002",test="storage.seq_write"} 2000000000
"""  # noqa: E501


def run_validate(tmp_path, monkeypatch, files=None):
    nodes = ["gpu001", "gpu002"]
    ran = real_acts(monkeypatch, {"validate.yml": passing_storage(nodes)})
    monkeypatch.setattr(campaign, "time", SimpleNamespace(time=lambda: WHEN))
    spec = write_cluster(tmp_path, files=files)
    request = validate.Request(inventory=spec, suites=["storage"], suites_named=True)
    report, code = validate.validate(request)
    return ran, report, code


def test_a_passing_validate_writes_its_results(tmp_path, slurm, monkeypatch):  # noqa: F811
    """Nothing to drain or resume: validate_drain.yml runs all the same, for the file."""
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    files = {"group_vars/all.yml": {"monitoring_metrics_dir": str(textfiles)}}
    ran, report, code = run_validate(tmp_path, monkeypatch, files)
    assert (code, ran, report.notes) == (ExitCode.OK, ["validate.yml", "validate_drain.yml"], [])
    assert sorted(p.name for p in textfiles.iterdir()) == ["kiln_result_validate.prom"]
    assert (textfiles / "kiln_result_validate.prom").read_text() == STORAGE
    assert slurm.calls() == []  # nothing asked of Slurm


def test_no_textfile_directory_writes_nothing(tmp_path, slurm, monkeypatch):  # noqa: F811
    """Where node_exporter's directory is absent nothing reads the file: none is made,
    and the act step does not fail."""
    absent = tmp_path / "no-node-exporter"
    files = {"group_vars/all.yml": {"monitoring_metrics_dir": str(absent)}}
    ran, report, code = run_validate(tmp_path, monkeypatch, files)
    assert (code, ran, report.notes) == (ExitCode.OK, ["validate.yml", "validate_drain.yml"], [])
    assert not absent.exists()
