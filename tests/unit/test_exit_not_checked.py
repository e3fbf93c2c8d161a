"""Exit 3, "a node was not checked and none failed", for each command that judges nodes
(exit 4 is a host that failed a run: docs/cli.md#exit-codes). `kiln report show` and
`kiln drift`: tests/cli/test_drift_cli.py; `kiln health`: tests/cli/test_health_cli.py;
`kiln rollout`: tests/unit/test_rollout.py; `kiln nccl show`: tests/cli/test_nccl_show_cli.py."""

import shutil
from pathlib import Path
from types import SimpleNamespace

from kiln import inventory
from kiln.campaigns import burn_in as burn_in_campaign
from kiln.campaigns import validate
from kiln.errors import ExitCode
from kiln.run import execute
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation import results as layout
from kiln.validation.verdicts import Verdict
from tests.conftest import cluster_inventory
from tests.results_files import Written
from tests.unit.test_burn_in import write_round
from tests.unit.test_validation_run import NODES as RUN_NODES
from tests.unit.test_validation_run import (  # noqa: F401
    collectives_steps_without_benchmarks,
    raw,
    scontrol_line,
)

NODES = ["gpu001", "gpu002"]  # write_inventory's compute nodes


def test_validate_exits_3_when_no_node_could_be_measured(
    raw,  # noqa: F811 (the fixture imported above)
    tmp_path,
    monkeypatch,
    write_inventory,
):
    """A GPU profile, and collectives that neither benchmark could run: every node is
    unchecked, none failed (tests/unit/test_validation_run.py's healthy results)."""
    profile = "h100-sxm-8x-ib400"
    raw.put(layout.COLLECTIVES_STEPS, collectives_steps_without_benchmarks(profile))
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))

    def fake_run(request):
        if request.playbook == "validate.yml":
            shutil.copytree(raw, request.extravars["validate_results_dir"], dirs_exist_ok=True)
        return RunSummary(run="r", playbook=request.playbook, status="successful")

    monkeypatch.setattr(execute, "run_playbook", fake_run)
    three = cluster_inventory(compute=RUN_NODES)
    spec = inventory.load(write_inventory(three))
    report, code = validate.validate(validate.Request(inventory=spec, profile=profile))
    assert {n: v["verdict"] for n, v in report.node_verdicts.items()} == dict.fromkeys(
        RUN_NODES, "unchecked"
    )
    assert (report.verdict, code) == (Verdict.UNCHECKED, ExitCode.NOT_CHECKED)


def test_burn_in_exits_3_when_no_node_could_be_measured(tmp_path, monkeypatch, write_inventory):
    """One round whose collectives neither benchmark could run, on a GPU profile: the
    stress passes, the nodes are unchecked, none failed."""
    profile = "h100-sxm-8x-ib400"
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    scontrol = "\n".join(scontrol_line(n) for n in NODES)
    clock = iter(range(0, 10**6, 100))

    def fake_run(request):
        ev = request.extravars
        if request.playbook == "burn_in.yml":
            store = Written(Path(ev["validate_results_dir"]))
            if ev["validate_burn_in_step"] == "hold":
                store.write(
                    layout.SLURM_STATE,
                    {"scontrol": scontrol, "plan": drain.plan(scontrol, NODES).to_dict()},
                )
            else:
                write_round(store, NODES)
                store.write(layout.COLLECTIVES_STEPS, collectives_steps_without_benchmarks(profile))
        return RunSummary(run="r", playbook=request.playbook, status="successful")

    monkeypatch.setattr(execute, "run_playbook", fake_run)
    monkeypatch.setattr(burn_in_campaign, "time", SimpleNamespace(time=lambda: next(clock)))
    spec = inventory.load(write_inventory())
    request = burn_in_campaign.Request(inventory=spec, duration_s=30, profile=profile)
    report, code = burn_in_campaign.burn_in(request)
    why = (
        "round 1: collectives.run: collectives not measured: no nccl-tests"
        " (/opt/nccl-tests/2.19.6/bin/all_reduce_perf): no CUDA toolkit (bin/nvcc) and no"
        " NCCL (nccl.h) on the node; no torch (python3 cannot import it)"
    )
    assert report.node_verdicts == {n: {"verdict": "unchecked", "reasons": [why]} for n in NODES}
    assert report.actions["drain"] == {}  # nothing says they are faulty
    assert (report.verdict, code) == (Verdict.UNCHECKED, ExitCode.NOT_CHECKED)
