"""A validation run's results, from raw files to verdicts, Slurm actions and reports.

The raw results are written in the shapes the probe, kiln-mount-check, fio and the
torch benchmark produce (fio's JSON is a recorded fixture)."""

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from kiln import inventory
from kiln.campaigns import campaign, validate
from kiln.errors import ExitCode
from kiln.report import compare, document, html, junit, markdown, write
from kiln.run import ids
from kiln.validation import assess, collect, drain, profiles, suites
from kiln.validation import results as layout
from kiln.validation.verdicts import Judgement, Verdict
from kiln_node.slurm_state import NodeState
from tests.conftest import cluster_inventory
from tests.results_files import Written
from tests.unit.test_validate_suites import SETTINGS as ROLE_SETTINGS

MULTI = "collectives.all_reduce.multi_node"

FIO = Path(__file__).parent.parent / "fixtures" / "fio"
NODES = ["gpu001", "gpu002", "gpu003"]


def scontrol_line(node, state="IDLE", reason=None):
    line = f"NodeName={node} Arch=x86_64 CoresPerSocket=1 State={state} ThreadsPerCore=1"
    if reason:
        line += f" Reason={reason} [root@2026-11-22T10:00:00]"
    return line + " Partitions=batch"


def mount(path="/shared", status="OK", reason="fuse.glusterfs storage:/shared"):
    return {
        "name": "shared",
        "path": path,
        "source": "storage:/shared",
        "fstype": "glusterfs",
        "required": True,
        "status": status,
        "reason": reason,
    }


def fio_text(name):
    return (FIO / name).read_text()


def rand_read_json():
    """fio's randread output: the read fixture's shape, at 4 KiB and 60,000 IOPS."""
    text = fio_text("seq_read.json")
    data = json.loads(text[text.index("{") :])
    for job in data["jobs"]:
        job["read"]["iops"] = 60000.0 / len(data["jobs"])
        job["read"]["bw_bytes"] = int(job["read"]["iops"] * 4096)
    return json.dumps(data)


def storage_result(node, mounts=None, seq_mbps_scale=2.0):
    write_json = fio_text("seq_write_4jobs.json")
    data = json.loads(write_json[write_json.index("{") :])
    for job in data["jobs"]:
        job["write"]["bw_bytes"] = int(job["write"]["bw_bytes"] * seq_mbps_scale)
    write_json = json.dumps(data)
    mounts = mounts if mounts is not None else [mount()]
    healthy = [m for m in mounts if m["status"] == "OK"]
    return {
        "node": node,
        "mount_check": {
            "rc": 0 if len(healthy) == len(mounts) else 1,
            "stdout": "",
            "stderr": "",
            "seconds": 0.1,
            "mounts": mounts,
        },
        "targets": [
            {
                "path": m["path"],
                "seq_write": {"rc": 0, "json": write_json, "stderr": ""},
                "seq_read": {"rc": 0, "json": fio_text("seq_read.json"), "stderr": ""},
                "rand_read": {"rc": 0, "json": rand_read_json(), "stderr": ""},
                "metadata": {"files": 10000, "ops": 30000, "seconds": 10.0},
            }
            for m in healthy
        ],
    }


def bench(ranks, hosts, scale=1.0):
    results = []
    for size in (1 << 20, 1 << 24, 1 << 30):
        for collective in ("all_reduce", "all_gather"):
            busbw = 450.0 * scale * (size / (1 << 30)) ** 0.1
            results.append(
                {
                    "collective": collective,
                    "size_bytes": size,
                    "time_us": 10.0,
                    "algbw_gbps": busbw / 1.75,
                    "busbw_gbps": busbw,
                }
            )
    return {
        "benchmark": "kiln-torch-bench",
        "backend": "nccl",
        "ranks": ranks,
        "hosts": hosts,
        "results": results,
    }


class Raw(type(Path())):
    """The results directory, written through the layout the role and collect share."""

    def put(self, name, data):
        Written(self).write(name, data)

    def node(self, kind, node, data):
        Written(self).write_node(kind, node, data)


def mpi_output(latency=(2.1, 2.0, 2.2), bandwidth=(24.0, 23.5, 24.4)) -> str:
    """What Kiln's MPI check prints on rank 0 for NODES, one rank each: the ring's
    pairs (gpu001-gpu002, gpu002-gpu003, gpu003-gpu001)."""
    ring = zip(NODES, NODES[1:] + NODES[:1], latency, bandwidth, strict=True)
    pairs = [
        {"node": a, "peer": b, "latency_us": lat, "bandwidth_gbps": bw} for a, b, lat, bw in ring
    ]
    return json.dumps({"ranks": 3, "hosts": NODES, "pairs": pairs}) + "\n"


def mpi_run(stdout=None, rc=0, stderr="", alone=None, unbuilt=()):
    across = {"rc": rc, "stdout": mpi_output() if stdout is None else stdout, "stderr": stderr}
    return {"all": {**across, "seconds": 1.9}, "alone": alone or {}, "unbuilt": list(unbuilt)}


@pytest.fixture
def raw(tmp_path):
    """A healthy three-node run; tests break it where they need."""
    root = Raw(layout.make(tmp_path / "raw").root)
    put = root.put
    scontrol = "\n".join(scontrol_line(n) for n in NODES)

    put(layout.SLURM_STATE, {"scontrol": scontrol, "plan": drain.plan(scontrol, NODES).to_dict()})
    put(layout.SRUN, {n: {"rc": 0, "stdout": "", "stderr": "", "seconds": 0.4} for n in NODES})
    put(layout.MPI, mpi_run())
    ok = layout.Step(rc=0).to_json()
    put(layout.STORAGE_STEPS, layout.StorageSteps(storage=ok, cold_import=ok).to_json())
    put(
        layout.COLLECTIVES_STEPS,
        layout.CollectivesSteps(
            single_node=ok, multi_node=ok, nccl_tests_skipped="absent"
        ).to_json(),
    )
    for n in NODES:
        root.node(layout.MUNGE, n, layout.Munge(rc=0, status="STATUS: Success (0)").to_json())
        root.node("storage", n, storage_result(n))
        root.node("cold_import", n, {"node": n, "module": "kiln_cold_import.all", "seconds": 2.5})
        root.node("collectives_node", n, bench(8, [n]))
    root.node("collectives_all", "gpu001", bench(24, NODES, scale=0.9))
    return root


SUITES = ["slurm", "storage", "collectives"]


def run(raw, profile="h100-sxm-8x-ib400"):
    found = collect.collect(raw, NODES, SUITES)
    judgements = assess.judge(found, profiles.load(profile) if profile else None)
    return found, judgements, assess.per_node(judgements, NODES)


def test_a_healthy_run_passes_every_node_with_every_test_judged(raw):
    _found, judgements, nodes = run(raw)
    assert {n: v.verdict for n, v in nodes.items()} == dict.fromkeys(NODES, Verdict.PASS)
    tests = {(j.node, j.test) for j in judgements}
    for node in NODES:
        for test in (
            "slurm.state",
            "slurm.srun_s",
            "slurm.munge",
            "slurm.mpi",
            "slurm.mpi_latency_us",
            "slurm.mpi_bandwidth",
            "storage.mount",
            "storage.seq_write",
            "storage.seq_read",
            "storage.rand_read_iops",
            "storage.metadata_ops",
            "storage.cold_import_s",
            "collectives.all_reduce.single_node",
        ):
            assert (node, test) in tests, (node, test)
    multi = [j for j in judgements if j.test == "collectives.all_reduce.multi_node"]
    assert [(j.node, round(j.value)) for j in multi] == [("gpu[001-003]", 405)]
    # metadata: 30,000 operations in 10 s
    meta = next(j for j in judgements if j.test == "storage.metadata_ops")
    assert meta.value == 3000


def test_a_missing_mount_fails_the_node_with_the_mount_check_reason(raw):
    broken = mount(
        status="FAIL", reason="not mounted after access: autofs could not mount storage:/shared"
    )
    raw.node("storage", "gpu002", storage_result("gpu002", [broken]))
    raw.node("cold_import", "gpu002", {"node": "gpu002", "error": "/shared is not mounted"})
    _, judgements, nodes = run(raw)
    assert nodes["gpu002"].verdict is Verdict.FAIL
    assert any(
        j.test == "storage.mount"
        and j.node == "gpu002"
        and j.verdict is Verdict.FAIL
        and j.reason.startswith("storage.mount /shared: not mounted after access")
        for j in judgements
    )
    # nothing was benchmarked on the bare mount point
    assert not [j for j in judgements if j.node == "gpu002" and j.test == "storage.seq_write"]
    assert nodes["gpu001"].verdict is Verdict.PASS and nodes["gpu003"].verdict is Verdict.PASS


def test_a_slow_node_fails_against_the_profile_with_a_readable_reason(raw):
    raw.node("storage", "gpu003", storage_result("gpu003", seq_mbps_scale=0.1))
    _, _judgements, nodes = run(raw)
    assert nodes["gpu003"].verdict is Verdict.FAIL
    reason = nodes["gpu003"].reasons[0]
    assert reason.startswith("storage.seq_write /shared ")
    assert "MB/s < 1000 MB/s (profile h100-sxm-8x-ib400)" in reason


def test_without_a_profile_the_fleet_median_judges(raw):
    raw.node("storage", "gpu003", storage_result("gpu003", seq_mbps_scale=1.0))
    _, _, nodes = run(raw, profile=None)
    assert nodes["gpu003"].verdict is Verdict.FAIL
    assert "off the fleet median" in nodes["gpu003"].reasons[0]
    assert nodes["gpu001"].verdict is Verdict.PASS


def test_srun_munge_and_missing_results_are_failures_naming_the_cause(raw):
    raw.put(
        layout.SRUN,
        {
            "gpu001": {"rc": 0, "stderr": "", "seconds": 0.3},
            "gpu002": {
                "rc": 1,
                "stderr": "srun: error: Unable to allocate resources: "
                "Requested node configuration is not available",
                "seconds": 0.2,
            },
            "gpu003": {"rc": None, "stderr": "no answer within 30s", "seconds": 30.0},
        },
    )
    raw.node(layout.MUNGE, "gpu001", layout.Munge(2, "STATUS: Invalid credential (6)").to_json())
    layout.Layout(raw).node_path("storage", "gpu003").unlink()
    raw.put(
        layout.STORAGE_STEPS,
        {"storage": {"rc": 1, "stderr": "srun: error: gpu003: task 2: Exited with exit code 1"}},
    )
    _, _judgements, nodes = run(raw)
    reasons = {n: " | ".join(v.reasons) for n, v in nodes.items()}
    assert (
        "slurm.munge: cannot decode the controller's credential: STATUS: Invalid"
        in reasons["gpu001"]
    )
    assert "srun on the node failed: srun: error: Unable to allocate" in reasons["gpu002"]
    assert "no answer within 30s" in reasons["gpu003"]
    assert "no storage result: srun exited 1: srun: error: gpu003" in reasons["gpu003"]


def test_nodes_drained_by_someone_else_are_not_tested_and_warned(raw):
    scontrol = "\n".join(
        [
            scontrol_line("gpu001"),
            scontrol_line("gpu002", "IDLE+DRAIN", "bad fan"),
            scontrol_line("gpu003", "IDLE+DRAIN", "kiln: storage.mount /shared: not mounted"),
        ]
    )
    plan = drain.plan(scontrol, NODES)
    assert plan.test == ["gpu001", "gpu003"]
    assert plan.resume_to_test == ["gpu003"]
    assert plan.skipped == {"gpu002": "drained by someone else: bad fan"}
    raw.put(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan.to_dict()})
    found, _judgements, nodes = run(raw)
    assert nodes["gpu002"].verdict is Verdict.WARN
    assert nodes["gpu002"].reasons == ["slurm.state: not tested: drained by someone else: bad fan"]
    actions = drain.decide({}, ["gpu001", "gpu002", "gpu003"], found.states, no_drain=False)
    assert actions.resume == ["gpu003"]  # Kiln's own drain, now passing
    assert actions.drain == {}


def test_an_idle_only_run_tests_idle_nodes_and_warns_of_the_busy_ones(raw):
    scontrol = "\n".join(
        [
            scontrol_line("gpu001"),
            scontrol_line("gpu002", "MIXED"),
            scontrol_line("gpu003", "IDLE+DRAIN", "kiln: storage.mount /shared: not mounted"),
            scontrol_line("gpu004", "ALLOCATED+DRAIN", "kiln: slurm.srun: failed"),
            scontrol_line("gpu005", "IDLE+RESERVED"),
            scontrol_line("gpu006", "MIXED+DRAIN", "RMA 7"),
            scontrol_line("gpu007", "IDLE+MAINT+RESERVED"),
            scontrol_line("gpu008", "DOWN+NOT_RESPONDING"),
        ]
    )
    every = [f"gpu00{i}" for i in range(1, 9)]
    why = "(an idle-only run tests idle nodes)"
    assert drain.plan(scontrol, every, idle_only=True).to_dict() | {"states": {}} == {
        "states": {},
        "test": ["gpu001", "gpu003"],
        "resume_to_test": ["gpu003"],
        "skipped": {
            "gpu002": f"busy: MIXED {why}",
            "gpu004": f"busy: ALLOCATED {why}",
            "gpu005": f"busy: RESERVED {why}",
            "gpu006": "drained by someone else: RMA 7",
            "gpu007": f"busy: MAINT+RESERVED {why}",
            "gpu008": "Slurm reports it DOWN+NOT_RESPONDING",
        },
    }
    # Without --idle-only, jobs do not keep a node from being tested.
    assert drain.plan(scontrol, every).to_dict() | {"states": {}} == {
        "states": {},
        "test": ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005", "gpu007"],
        "resume_to_test": ["gpu003", "gpu004"],
        "skipped": {
            "gpu006": "drained by someone else: RMA 7",
            "gpu008": "Slurm reports it DOWN+NOT_RESPONDING",
        },
    }
    plan = drain.plan(scontrol, NODES, idle_only=True)
    raw.put(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan.to_dict()})
    found, _judgements, nodes = run(raw)
    assert {n: (v.verdict, v.reasons) for n, v in nodes.items()} == {
        "gpu001": (Verdict.PASS, []),
        "gpu002": (Verdict.WARN, [f"slurm.state: not tested: busy: MIXED {why}"]),
        "gpu003": (Verdict.PASS, []),
    }
    actions = drain.decide({}, ["gpu001", "gpu003"], found.states, no_drain=False)
    assert (actions.drain, actions.resume) == ({}, ["gpu003"])


def test_drain_decisions():
    states = {
        "a": NodeState("a", "IDLE", ""),
        "b": NodeState("b", "IDLE+DRAIN", "kiln: storage.seq_read /shared 3 MB/s"),
        "c": NodeState("c", "IDLE+DRAIN", "RMA ticket 42"),
        "d": NodeState("d", "IDLE+DRAIN", "kiln: old reason"),
    }
    actions = drain.decide(
        {"a": "storage.mount /shared: not mounted", "c": "slurm.srun: failed", "d": "x"},
        ["b"],
        states,
        no_drain=False,
    )
    assert actions.drain == {"a": "kiln: storage.mount /shared: not mounted", "d": "kiln: x"}
    assert actions.resume == ["b"]
    assert actions.left == {"c": "already drained by someone else (RMA ticket 42)"}
    quiet = drain.decide({"a": "bad"}, ["b"], states, no_drain=True)
    assert quiet.drain == {} and quiet.resume == []
    assert quiet.left == {"a": "--no-drain", "b": "passes, stays drained (--no-drain)"}
    long = drain.reason("x" * 500)
    assert len(long) == drain.REASON_LIMIT and long.startswith("kiln: x") and long.endswith("...")


def test_down_and_unknown_nodes_are_not_tested_and_fail():
    plan = drain.plan(scontrol_line("a", "DOWN+NOT_RESPONDING"), ["a", "zz"])
    assert plan.test == []
    assert plan.skipped == {
        "a": "Slurm reports it DOWN+NOT_RESPONDING",
        "zz": "Slurm does not know this node",
    }


def test_why_a_node_was_not_tested_decides_its_verdict_in_validate_and_burn_in():
    """One rule (drain.skipped_verdict) for both: someone else's drain and a busy node
    warn; Kiln's own health check's drain, a down node and one Slurm does not know fail."""
    reason = "kiln-health: mounts: /shared not mounted"
    lines = [
        scontrol_line("ops", "IDLE+DRAIN", "maintenance"),
        scontrol_line("busy", "ALLOCATED"),
        scontrol_line("sick", "IDLE+DRAIN", reason),
        scontrol_line("down", "DOWN"),
    ]
    plan = drain.plan("\n".join(lines), ["ops", "busy", "sick", "down", "zz"], idle_only=True)
    assert {n: drain.skipped_verdict(why) for n, why in plan.skipped.items()} == {
        "ops": Verdict.WARN,
        "busy": Verdict.WARN,
        "sick": Verdict.FAIL,
        "down": Verdict.FAIL,
        "zz": Verdict.FAIL,
    }


# The role's settings, typed as kiln.validation.suites reads them.
SETTINGS = suites.Settings.from_role(ROLE_SETTINGS)


def collectives_steps_without_benchmarks(profile: str) -> dict:
    """collectives_steps.json as the role writes it where no node has torch or nccl-tests
    (kiln.validation.suites decides the notes; neither benchmark step ran), the
    look at each node's toolchain finding no CUDA toolkit and no NCCL."""
    bare = suites.Found(
        torch={"rc": 1, "stdout": "", "stderr": "No module named 'torch'"},
        nccl_tests=False,
        toolchain={"cuda": None, "nccl": None, "mpi": None},
    )
    loaded = profiles.load(profile)
    settings = replace(
        SETTINGS,
        nccl_tests_dir="/opt/nccl-tests/2.19.6/bin",
        nccl_tests_version="2.19.6",
        collectives=loaded.collectives,
    )
    lack = suites.lacking(dict.fromkeys(NODES, bare), NODES, "")
    unmeasured = suites.unmeasured(dict.fromkeys(NODES, bare), NODES, settings, lack)
    skipped = {"skipped": True}
    return {
        "single_node": skipped,
        "multi_node": skipped,
        **suites.collectives_notes(settings, lack, unmeasured),
    }


NO_BENCHMARK_NOTES = [
    "nccl-tests skipped: no /opt/nccl-tests/2.19.6/bin/all_reduce_perf on gpu001,gpu002,gpu003",
    "Kiln's collectives benchmark skipped: torch is not importable with python3 on "
    "gpu001,gpu002,gpu003",
]


def test_on_a_gpu_profile_collectives_that_could_not_run_leave_every_node_unchecked(raw):
    """A node whose GPUs were never measured is never a pass: unchecked, with what it
    lacks, the run exits 3 and no node is drained (nothing says it is faulty)."""
    raw.put(layout.COLLECTIVES_STEPS, collectives_steps_without_benchmarks("h100-sxm-8x-ib400"))
    report = make_report(raw)
    why = (
        "collectives.run: collectives not measured: no nccl-tests"
        " (/opt/nccl-tests/2.19.6/bin/all_reduce_perf): no CUDA toolkit (bin/nvcc) and no"
        " NCCL (nccl.h) on the node; no torch (python3 cannot import it)"
    )
    assert report.node_verdicts == {
        node: {"verdict": "unchecked", "reasons": [why]} for node in NODES
    }
    assert report.notes == NO_BENCHMARK_NOTES
    assert (report.verdict, report.exit_code) == (Verdict.UNCHECKED, ExitCode.NOT_CHECKED)
    assert report.actions == {"drain": {}, "resume": [], "left": {}}
    assert "| gpu001 | unchecked | collectives.run: collectives not measured" in (
        markdown.render(report)
    )


def test_on_the_labs_cpu_profile_collectives_that_could_not_run_stay_notes(raw):
    """The lab's gloo profile measures no GPU: a missing benchmark is a note, as before,
    and the nodes pass on the suites that ran."""
    raw.put(layout.COLLECTIVES_STEPS, collectives_steps_without_benchmarks("lab-cpu"))
    found, _, nodes = run(raw)
    assert {n: v.verdict for n, v in nodes.items()} == dict.fromkeys(NODES, Verdict.PASS)
    assert found.notes == NO_BENCHMARK_NOTES


def test_plateau_is_judged_at_1gib_and_short_sweeps_at_their_largest_sizes():
    results = [
        layout.Point(collective="all_reduce", size_bytes=s, busbw_gbps=b)
        for s, b in ((1 << 20, 5.0), (1 << 30, 300.0), (2 << 30, 320.0), (4 << 30, 310.0))
    ]
    best, points = collect.plateau_busbw(results, "all_reduce")
    assert best == 320.0 and points[0] == (1 << 20, 5.0)
    short = [
        layout.Point(collective="all_reduce", size_bytes=s, busbw_gbps=b)
        for s, b in ((1024, 0.1), (4096, 0.3))
    ]
    assert collect.plateau_busbw(short, "all_reduce")[0] == 0.3


def make_report(raw, profile="h100-sxm-8x-ib400"):
    """A report assembled as `kiln validate` assembles it (validate.conclude)."""
    found, judgements, _ = run(raw, profile)
    report = document.Report(
        id=ids.new_id(),
        started=document.now(),
        inventory="inv",
        profile=profile,
        suites=SUITES,
        nodes=NODES,
        judgements=judgements,
    )
    validate.conclude(report, found, NODES, no_drain=False)
    return report


def test_reports_in_every_format_round_trip_and_say_the_same(raw):
    raw.node("storage", "gpu003", storage_result("gpu003", seq_mbps_scale=0.1))
    report = make_report(raw)
    paths = write.write_all(report)
    assert sorted(paths) == ["html", "json", "junit", "markdown"]
    again = document.load(report.id)
    assert again.to_json() == report.to_json()
    assert again.verdict is Verdict.FAIL
    text = markdown.render(report)
    assert "# Kiln validation" in text and "| gpu003 | fail | storage.seq_write /shared" in text
    assert "- drained gpu003: kiln: storage.seq_write /shared" in text
    page = html.render(report)
    # Busbw curves with the single- and multi-node floors, a bar plot per other measured
    # test with its threshold (MPI's figures have none in this profile), and the fleet.
    plots = re.findall(r"<figure class='plot' data-kind='(\w+)' data-thresholds='(\d+)' "
                       r"aria-label='([^']*)'", page)  # fmt: skip
    assert plots[:3] == [
        ("curve", "2", "all_gather: bus bandwidth by message size"),
        ("curve", "2", "all_reduce: bus bandwidth by message size"),
        ("bar", "0", "slurm.mpi_bandwidth: per node"),
    ]
    assert ("bar", "1", "storage.seq_write: per node") in plots
    assert ("fleet", "1", "storage.seq_write: across the fleet") in plots
    assert "https://" not in page.split("<body>")[1]  # nothing fetched: it opens offline
    suites = ET.fromstring(junit.render(report))
    by_name = {s.get("name"): s for s in suites}
    assert by_name["gpu003"].get("failures") == "1"
    assert by_name["gpu001"].get("failures") == "0"
    failure = by_name["gpu003"].find("testcase/failure")
    assert failure.get("message").startswith("storage.seq_write /shared")


def test_junit_holds_a_reason_quoting_control_characters_as_their_escapes():
    """A reason may quote a node's output: a terminal colour code or a NUL, which XML
    1.0 cannot hold (ElementTree wrote them as they were, and the file did not parse)."""
    report = document.Report(
        id="20261127-190000-validate-abcd",
        started="2026-11-27T19:00:00+00:00",
        inventory="inv",
        profile=None,
        suites=["collectives"],
        nodes=["gpu001"],
        judgements=[
            Judgement("gpu001", "nccl", "\x1b[1mall_reduce", None, "", Verdict.FAIL,
                      "NCCL error: \x1b[31mremote\x00 error\x1b[0m\ttab"),
            Judgement("gpu001", "slurm.state", "", None, "", Verdict.WARN, "\ufffe\ud800"),
        ],
    )  # fmt: skip
    suites = ET.fromstring(junit.render(report))
    cases = [
        (case.get("name"), [(child.tag, child.get("message"), child.text) for child in case])
        for case in suites.iter("testcase")
    ]
    reason = "NCCL error: \\x1b[31mremote\\x00 error\\x1b[0m\ttab"
    assert cases == [
        ("nccl \\x1b[1mall_reduce", [("failure", reason, reason)]),
        ("slurm.state", [("system-out", None, "warning: \\ufffe\\ud800")]),
    ]


@pytest.mark.parametrize("figure", [float("nan"), float("inf")])
def test_a_report_holding_a_figure_that_is_no_number_is_written_nowhere(raw, figure):
    """The parsers keep NaN and infinity out of every figure (a non-finite measurement is
    no measurement: kiln.validation.verdicts.judge fails it with value None, see
    test_validation_profiles); one that slips past is a bug, refused before any file is
    written: JSON has no NaN."""
    report = make_report(raw)
    report.judgements.append(
        Judgement("gpu001", "storage.seq_read", "/shared", figure, "MB/s", Verdict.PASS, "")
    )
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write.write_all(report)
    assert not document.directory(report.id).exists()


def test_compare_says_what_got_worse_per_node_and_for_the_fleet(raw):
    before = make_report(raw)
    raw.node("storage", "gpu003", storage_result("gpu003", seq_mbps_scale=0.1))
    after = make_report(raw)
    changes = [c for c in compare.compare(before, after) if c.direction != "same"]
    worse = {(c.node, c.test) for c in changes if c.direction == "worse"}
    assert ("gpu003", "storage.seq_write") in worse
    assert all(c.node in ("gpu003", compare.FLEET) for c in changes)
    back = [
        c
        for c in compare.compare(after, before)
        if c.node == "gpu003" and c.test == "storage.seq_write"
    ]
    assert back[0].direction == "better" and back[0].percent > 1000


def test_compare_ranks_a_node_not_checked_between_a_warning_and_a_failure():
    def change(before, after):
        return compare.Change("gpu001", "drift.run", "", None, None, "", before, after)

    assert [change("pass", "unchecked").direction, change("unchecked", "fail").direction] == [
        "worse",
        "worse",
    ]
    assert [change("unchecked", "warn").direction, change("unchecked", "").direction] == [
        "better",
        "worse",
    ]


def test_a_node_without_a_verdict_is_unchecked_in_every_rendering():
    """Renderings once showed such a node as "pass, all tests passed"."""
    report = document.Report(
        id="r", started="s", inventory="inv", profile=None, suites=["storage"], nodes=["gpu001"]
    )
    assert (report.verdict, report.exit_code) == (Verdict.UNCHECKED, ExitCode.NOT_CHECKED)
    assert markdown.render(report).splitlines()[0] == "# Kiln validation r: UNCHECKED"
    assert "| gpu001 | unchecked | not checked |" in markdown.render(report).splitlines()
    page = html.render(report)
    assert "<tr><td>gpu001</td><td class='unchecked'>unchecked</td><td>not checked</td>" in page


def test_unknown_report_is_an_input_error():
    with pytest.raises(document.InputError, match="no validation run 'nope'"):
        document.load("nope")


NCCL = Path(__file__).parent.parent / "fixtures" / "nccl-tests"


def test_nccl_tests_output_is_judged_per_node_and_wrong_values_fail_the_node(raw):
    def out(name):
        return {"rc": 0, "stdout": (NCCL / name).read_text(), "stderr": ""}

    raw.put(layout.COLLECTIVES_STEPS, {"single_node": {"rc": 0}, "multi_node": {"rc": 0}})
    raw.put(
        layout.NCCL_TESTS,
        {
            "single_node": {
                "gpu001": {"all_reduce": out("all_reduce_1node.txt")},
                "gpu002": {"all_reduce": out("all_reduce_1node.txt")},
                "gpu003": {
                    "all_gather": out("all_gather_wrong.txt"),
                    "all_reduce": {
                        "rc": 1,
                        "stdout": "",
                        "stderr": "srun: error: gpu003: task 0: Exited",
                    },
                },
            },
            "multi_node": {"all_reduce": out("all_reduce_2nodes.txt")},
        },
    )
    found, judgements, nodes = run(raw)
    by = {(j.node, j.test, j.subject): j for j in judgements}
    single = by[("gpu001", "collectives.all_reduce.single_node", "nccl-tests, 8 ranks")]
    assert single.verdict is Verdict.PASS and round(single.value) == 478
    multi = by[("gpu[001-003]", "collectives.all_reduce.multi_node", "nccl-tests, 16 ranks")]
    assert multi.verdict is Verdict.PASS
    assert nodes["gpu003"].verdict is Verdict.FAIL
    reasons = " | ".join(nodes["gpu003"].reasons)
    assert "collectives.nccl_tests all_gather: " in reasons and "data corruption" in reasons
    assert "collectives.nccl_tests all_reduce: no results: srun: error: gpu003" in reasons
    assert any(c.collective == "all_reduce (nccl-tests)" for c in found.curves)


def test_one_rank_per_node_schedules_no_within_node_run_and_judges_none(raw):
    """With ranks_per_node 1 the role runs no within-node collective and records why;
    a one-rank result that arrives anyway is a note, never a measure."""
    note = "within-node collectives not run: 1 rank per node crosses no link"
    raw.put(
        layout.COLLECTIVES_STEPS,
        {"single_node": {"skipped": True}, "multi_node": {"rc": 0}, "single_node_skipped": note},
    )
    one_gpu = {"rc": 0, "stdout": (NCCL / "v2.19" / "all_reduce_1gpu.txt").read_text()}
    raw.put(
        layout.NCCL_TESTS,
        {"single_node": {n: {} for n in NODES}, "multi_node": {"all_reduce": one_gpu}},
    )
    for n in NODES:
        layout.Layout(raw).node_path("collectives_node", n).unlink()
    found, judgements, nodes = run(raw)
    assert all(v.verdict is Verdict.PASS for v in nodes.values()), nodes
    assert not [j for j in judgements if j.test.endswith(".single_node")]
    assert not [j for j in judgements if "nccl-tests" in j.subject]
    assert found.notes == [
        note,
        "gpu[001-003] all_reduce (nccl-tests): 1 rank: no link is crossed; nothing to judge",
    ]
    raw.node("collectives_all", "gpu001", bench(1, ["gpu001"]))
    found, judgements, _ = run(raw)
    assert not [j for j in judgements if j.test.startswith("collectives.")]
    assert (
        found.notes[-1] == "gpu[001-003] multi_node: 1 rank: no link is crossed; nothing to judge"
    )


def test_markdown_escapes_html_and_pipes_from_the_cluster():
    report = document.Report(
        id="r1", started="s", inventory="inv", profile=None, suites=["slurm"],
        nodes=["gpu<b>1"], notes=["mount a|b <script>"],
    )  # fmt: skip
    report.judgements.append(
        Judgement("gpu<b>1", "slurm.state", "x|y", None, "", Verdict.FAIL, "down: <img src=x>")
    )
    report.node_verdicts["gpu<b>1"] = {"verdict": "fail", "reasons": ["down | <img src=x>"]}
    text = markdown.render(report)
    assert "| gpu&lt;b&gt;1 | fail | down \\| &lt;img src=x&gt; |" in text
    assert "| gpu&lt;b&gt;1 | slurm.state | x\\|y |" in text
    assert "- mount a\\|b &lt;script&gt;" in text
    assert "<" not in text.replace("&lt;", "")


def test_a_node_drained_by_someone_else_during_the_run_is_not_drained_by_kiln():
    """The drain step reads the states again just before acting (the role's filter)."""
    from tests.collection import collection_plugin

    plugin = collection_plugin("filter", "kiln_validate")
    still_ours = plugin.FilterModule().filters()["kiln_validate_still_ours"]
    text = "\n".join(
        [
            scontrol_line("gpu001"),
            scontrol_line("gpu002", "IDLE+DRAIN", "hardware swap [ops@2026-11-23T10:00:00]"),
            scontrol_line("gpu003", "IDLE+DRAIN", "kiln: storage.seq_read /shared 3 MB/s"),
        ]
    )
    assert still_ours(text, ["gpu001", "gpu002", "gpu003", "gone"]) == ["gpu001", "gpu003"]


def test_only_a_node_still_drained_with_kilns_reason_is_resumed():
    """Read again just before the resume: a node resumed, or drained again by someone
    else or by Kiln's health check since, is left as it is."""
    from tests.unit.test_filter_plugins import filters

    drained_by_kiln = filters("kiln_validate")["kiln_validate_drained_by_kiln"]
    text = "\n".join(
        [
            scontrol_line("gpu001"),
            scontrol_line("gpu002", "IDLE+DRAIN", "hardware swap [ops@2026-11-23T10:00:00]"),
            scontrol_line("gpu003", "IDLE+DRAIN", "kiln: storage.seq_read /shared 3 MB/s"),
            scontrol_line("gpu004", "IDLE+DRAIN", "kiln-health: gpu: XID 79"),
        ]
    )
    nodes = ["gpu001", "gpu002", "gpu003", "gpu004", "gone"]
    assert drained_by_kiln(text, nodes) == ["gpu003"]


def test_the_terminal_prints_markup_in_names_and_reasons_as_text(capsys):
    """A reason holding "[/path]" once made `kiln validate` exit 1 after draining."""
    from kiln.report import terminal

    report = document.Report(
        id="r1", started="s", inventory="inv", profile=None, suites=["storage"],
        nodes=["gpu001"], notes=["[bold]note[/bold] [/x]"],
    )  # fmt: skip
    reason = "storage.mount /shared: stale handle on [/scratch] [/bold]"
    report.judgements.append(
        Judgement("gpu001", "storage.mount", "[/shared]", None, "", Verdict.FAIL, reason)
    )
    report.node_verdicts["gpu001"] = {"verdict": "fail", "reasons": [reason]}
    terminal.show(report)
    text = capsys.readouterr().out
    assert "gpu001: storage.mount /shared: stale handle on [/scratch] [/bold]" in text
    assert "note: [bold]note[/bold] [/x]" in text
    assert "[/shared]" in text


def test_report_show_and_compare_print_control_characters_escaped(tmp_path, monkeypatch, capsys):
    """A node named, and a reason and a note written, with escape sequences and a
    forged line (a report kept from elsewhere, a node's output): `kiln report show`,
    `compare` and the Markdown rendering print them escaped, whole lines as expected."""
    from tests.cli.test_bad_input import kiln

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    node = "gpu\x1b]0;owned\x07"
    reason = "storage.mount /shared: \x1b[2J\rkiln: all clear\nPASS"
    for run, value in (("20261123-120000-aaaa", 100.0), ("20261124-120000-bbbb", 50.0)):
        report = document.Report(
            id=run, started="s", inventory="inv", profile=None, suites=["storage"],
            nodes=[node], notes=["\x9b31mred"],
        )  # fmt: skip
        report.judgements.append(
            Judgement(node, "storage.seq_read", "/shared", value, "MB/s", Verdict.FAIL, reason)
        )
        report.node_verdicts[node] = {"verdict": "fail", "reasons": [reason]}
        write.write_all(report)
    code, out, err = kiln(["report", "show", "20261124-120000-bbbb"], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    assert out.splitlines() == [
        "validation 20261124-120000-bbbb: profile none",
        "node                 test              subject  value    threshold  verdict",
        "gpu\\x1b]0;owned\\x07  storage.seq_read  /shared  50 MB/s             fail",
        "fail gpu\\x1b]0;owned\\x07: storage.mount /shared: \\x1b[2J\\rkiln: all clear\\nPASS",
        "note: \\x9b31mred",
        "FAIL 1 node",
    ]
    code, out, err = kiln(["report", "compare", "20261123-120000-aaaa", "latest"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "node                 test              subject  before         after         change",
        "fleet median         storage.seq_read  /shared  100 MB/s fail  50 MB/s fail  -50%"
        "    worse",
        "gpu\\x1b]0;owned\\x07  storage.seq_read  /shared  100 MB/s fail  50 MB/s fail  -50%"
        "    worse",
    ]
    code, out, err = kiln(["report", "show", "latest", "--format", "markdown"], capsys)
    assert "\x1b" not in out and "\r" not in out and "\x9b" not in out
    assert "| gpu\\x1b]0;owned\\x07 | fail |" in out


def test_a_canceled_run_judges_nothing_drains_nothing_and_releases_its_reservation(
    tmp_path, monkeypatch, write_inventory
):
    """Ctrl-C or SIGTERM during the suites (the runner reports the run canceled): exit
    130, no verdict, no drain; the reservation and the nodes resumed to test go back."""
    from kiln import inventory
    from kiln.errors import ExitCode
    from kiln.run import execute
    from kiln.run.events import RunSummary

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    asked = []

    def fake_run(request):
        asked.append((request.playbook, request.extravars))
        if request.playbook == "validate.yml":
            scontrol = "\n".join(
                [scontrol_line("gpu001"), scontrol_line("gpu002", "IDLE+DRAIN", "kiln: old")]
            )
            plan = drain.plan(scontrol, ["gpu001", "gpu002"]).to_dict()
            results = Path(request.extravars["validate_results_dir"])
            Written(results).write(layout.SLURM_STATE, {"plan": plan})
            return RunSummary(run="r-suites", playbook="validate.yml", status="canceled")
        return RunSummary(run="r-release", playbook="validate_drain.yml", status="successful")

    monkeypatch.setattr(execute, "run_playbook", fake_run)
    spec = inventory.load(write_inventory())
    report, code = validate.validate(validate.Request(inventory=spec, profile="lab-cpu"))
    assert code == ExitCode.INTERRUPTED == 130
    assert (report.judgements, report.node_verdicts, report.actions) == ([], {}, {})
    assert [playbook for playbook, _ in asked] == ["validate.yml", "validate_drain.yml"]
    reservation = asked[0][1]["validate_reservation"]
    assert reservation == f"kiln_validate_{report.id}"
    assert asked[1][1] == {
        "validate_drain": {},
        "validate_resume": [],
        "validate_release": {"reservation": reservation, "redrain": {"gpu002": "kiln: old"}},
    }
    assert report.notes == ["canceled: nothing was judged and no node drained"]


def test_a_missing_prerequisite_travels_as_data_not_as_message_text(tmp_path):
    from kiln.errors import ExitCode, KilnError, PrerequisiteError
    from kiln.run.events import Failure, RunSummary

    stopped = RunSummary(run="r1", playbook="validate.yml", status="failed")
    stopped.failures.append(Failure("ctl1", "Stop before testing any node", "anything", False))
    (tmp_path / "prerequisites.json").write_text(
        json.dumps({"missing": ["collectives suite: neither torch nor nccl-tests on gpu001"]})
    )
    with pytest.raises(PrerequisiteError) as found:
        campaign.stop_on_controller_failure(stopped, "ctl1", tmp_path)
    assert found.value.message == "collectives suite: neither torch nor nccl-tests on gpu001"
    assert found.value.exit_code == ExitCode.BAD_INPUT
    # Without the file, a failure on the controller is the run's failure, with its words.
    (tmp_path / "prerequisites.json").unlink()
    with pytest.raises(KilnError) as failed:
        campaign.stop_on_controller_failure(stopped, "ctl1", tmp_path)
    assert failed.value.message == "validation could not run on ctl1: anything (kiln runs show r1)"
    assert failed.value.exit_code == ExitCode.FAILED


def test_result_records_keep_only_fields_of_their_kind():
    """A record the run did not finish writing, or wrote wrong, reads as its defaults
    field by field; what it did write correctly is kept whole."""
    assert layout.Step.from_json(None) == layout.Step(rc=None, stderr="", skipped=False)
    step = layout.Step.from_json({"rc": 1, "stderr": "x\nsrun: error: gpu002 down\n"})
    assert step.problem() == "srun exited 1: srun: error: gpu002 down"
    assert layout.Step.from_json({"skipped": True}).problem() == "the step did not run"
    steps = layout.CollectivesSteps.from_json(
        {
            "single_node": "oops",
            "torch_skipped": 5,
            "nccl_tests_skipped": "no nccl-tests",
            "unmeasured": ["gpu001"],
            "x": 1,
        }
    )
    assert steps.to_json() == {
        "single_node": {},
        "multi_node": {},
        "single_node_skipped": "",
        "torch_skipped": "",
        "nccl_tests_skipped": "no nccl-tests",
        "unmeasured": {},
    }
    assert layout.Prerequisites.from_json({"missing": "not a list"}).missing == []
    assert layout.Munge.from_json({"rc": True, "status": "S"}) == layout.Munge(rc=None, status="S")


def test_records_of_runs_that_left_nothing():
    """What the probes' own outputs read into is tested on those outputs
    (tests/unit/test_validation_probes.py); here, runs that brought nothing back."""
    outputs = layout.NcclTests.from_json({"single_node": {"gpu001": {}}})
    assert (outputs.within("gpu001"), outputs.within("gpu002"), outputs.across()) == ({}, {}, {})
    assert layout.Pair.from_json({"rc": 1, "stderr": "down", "result": None}).benchmark() is None


def test_a_probe_output_written_wrong_fails_its_node_with_a_reason_not_a_traceback(raw):
    """Fields of the wrong kind read as missing: the node fails naming what is missing."""
    raw.node("cold_import", "gpu001", {"node": "gpu001", "seconds": "3.2"})
    raw.node("storage", "gpu002", {"node": "gpu002", "mount_check": {"rc": "x"}, "targets": 7})
    raw.put(layout.SRUN, {"gpu003": {"rc": 0, "seconds": "slow"}, "gpu001": [], "gpu002": 5})
    found = collect.collect(raw, NODES, ["slurm", "storage"])
    failures = {(c.node, c.test): c.reason for c in found.checks if c.verdict is Verdict.FAIL}
    assert failures == {
        ("gpu001", "storage.cold_import"): "the probe recorded no time",
        ("gpu002", "storage.mount"): "the mount check could not run: exit None",
        ("gpu001", "slurm.srun"): "srun on the node failed: exit None",
        ("gpu002", "slurm.srun"): "srun on the node failed: exit None",
        ("gpu003", "slurm.srun"): "srun on the node ran but its time was not recorded",
    }
    assert [m for m in found.measures if m.test == "slurm.srun_s"] == []


def test_a_number_json_has_not_is_no_measurement_and_the_report_reads_back(raw, monkeypatch):
    """NaN and Infinity (Python's json writes and reads them; no comparison fails on NaN)
    read as missing, like any field of the wrong kind: the node fails naming what is
    missing, never passes, and the report Kiln writes is one `kiln report show` reads."""
    monkeypatch.setenv("KILN_STATE_DIR", str(raw.parent / "state"))
    raw.node("cold_import", "gpu001", {"node": "gpu001", "seconds": float("nan")})
    raw.put(
        layout.SRUN,
        {
            "gpu001": {"rc": 0, "stdout": "", "stderr": "", "seconds": 0.4},
            "gpu002": {"rc": 0, "stdout": "", "stderr": "", "seconds": 0.4},
            "gpu003": {"rc": 0, "stdout": "", "stderr": "", "seconds": float("inf")},
        },
    )
    broken = bench(8, ["gpu002"])
    for point in broken["results"]:
        point["busbw_gbps"] = float("nan")
    raw.node("collectives_node", "gpu002", broken)
    found, _, nodes = run(raw)
    failures = {(c.node, c.test): c.reason for c in found.checks if c.verdict is Verdict.FAIL}
    assert failures == {
        ("gpu001", "storage.cold_import"): "the probe recorded no time",
        ("gpu003", "slurm.srun"): "srun on the node ran but its time was not recorded",
    }
    # The benchmark's points without a bandwidth read as 0 GB/s: below the profile's floor.
    single = {
        m.node: m.value for m in found.measures if m.test == "collectives.all_reduce.single_node"
    }
    assert single["gpu002"] == 0.0
    assert {n: v.verdict for n, v in nodes.items()} == dict.fromkeys(NODES, Verdict.FAIL)
    report = make_report(raw)
    write.write_all(report)
    assert document.load(report.id).to_json() == report.to_json()


def mpi_judgements(raw, profile="h100-sxm-8x-ib400"):
    _, judgements, nodes = run(raw, profile)
    mine = {(j.node, j.test): j for j in judgements if j.test.startswith("slurm.mpi")}
    return mine, nodes


def test_the_mpi_check_judges_each_node_by_its_best_pair(raw):
    mine, nodes = mpi_judgements(raw)
    assert {key: (j.verdict, j.value) for key, j in mine.items()} == {
        ("gpu001", "slurm.mpi"): (Verdict.PASS, None),
        ("gpu002", "slurm.mpi"): (Verdict.PASS, None),
        ("gpu003", "slurm.mpi"): (Verdict.PASS, None),
        # gpu001 is in gpu001-gpu002 (2.1 us, 24.0 GB/s) and gpu003-gpu001 (2.2, 24.4)
        ("gpu001", "slurm.mpi_latency_us"): (Verdict.PASS, 2.1),
        ("gpu001", "slurm.mpi_bandwidth"): (Verdict.PASS, 24.4),
        ("gpu002", "slurm.mpi_latency_us"): (Verdict.PASS, 2.0),
        ("gpu002", "slurm.mpi_bandwidth"): (Verdict.PASS, 24.0),
        ("gpu003", "slurm.mpi_latency_us"): (Verdict.PASS, 2.0),
        ("gpu003", "slurm.mpi_bandwidth"): (Verdict.PASS, 24.4),
    }
    assert mine[("gpu001", "slurm.mpi")].reason == "slurm.mpi: a rank started through PMIx"
    assert set(nodes) == set(NODES)


def test_a_node_slow_with_both_neighbours_is_the_outlier(raw):
    # gpu003's two pairs (gpu002-gpu003, gpu003-gpu001) are slow; its neighbours each
    # have one good pair.
    raw.put(layout.MPI, mpi_run(mpi_output(latency=(2.0, 9.0, 9.5), bandwidth=(24, 3, 3))))
    mine, nodes = mpi_judgements(raw)
    slow = {key for key, j in mine.items() if j.verdict is not Verdict.PASS}
    assert slow == {("gpu003", "slurm.mpi_latency_us"), ("gpu003", "slurm.mpi_bandwidth")}
    assert nodes["gpu003"].verdict is Verdict.FAIL
    assert nodes["gpu001"].verdict is Verdict.PASS and nodes["gpu002"].verdict is Verdict.PASS


def test_a_node_that_cannot_start_a_rank_fails_by_name(raw):
    failed = "srun: error: gpu002: task 1: Exited with exit code 1"
    alone = {
        "gpu001": {"rc": 0, "stdout": "{}", "stderr": ""},
        "gpu002": {"rc": 1, "stdout": "", "stderr": failed},
        "gpu003": {"rc": 0, "stdout": "{}", "stderr": ""},
    }
    raw.put(layout.MPI, mpi_run(stdout="", rc=1, stderr=failed, alone=alone))
    mine, nodes = mpi_judgements(raw)
    assert nodes["gpu002"].verdict is Verdict.FAIL
    assert mine[("gpu002", "slurm.mpi")].reason == (
        f"slurm.mpi: an MPI rank does not start on the node: {failed}"
    )
    assert mine[("gpu001", "slurm.mpi")].verdict is Verdict.PASS
    assert nodes["gpu001"].verdict is Verdict.PASS and nodes["gpu003"].verdict is Verdict.PASS
    assert not [key for key in mine if key[1] != "slurm.mpi"]  # nothing was measured


def test_a_run_that_fails_only_across_the_nodes_warns_every_node(raw):
    alone = {n: {"rc": 0, "stdout": "{}", "stderr": ""} for n in NODES}
    raw.put(layout.MPI, mpi_run(stdout="", rc=1, stderr="x\nsrun: error: Timed out", alone=alone))
    mine, nodes = mpi_judgements(raw)
    for node in NODES:
        assert mine[(node, "slurm.mpi")].verdict is Verdict.WARN
        assert nodes[node].verdict is Verdict.WARN
    assert mine[("gpu001", "slurm.mpi")].reason == (
        "slurm.mpi: the MPI run across the nodes failed (srun: error: Timed out); "
        "each node runs it alone"
    )


def test_the_mpi_check_where_it_is_not_built_or_did_not_run(raw):
    two = mpi_output().replace('"ranks": 3', '"ranks": 2').replace(', "gpu003"]', "]")
    raw.put(layout.MPI, mpi_run(stdout=two, unbuilt=["gpu003"]))
    mine, _ = mpi_judgements(raw)
    assert mine[("gpu003", "slurm.mpi")].reason == (
        "slurm.mpi: Kiln's MPI check is not built here (the mpi role)"
    )
    assert mine[("gpu001", "slurm.mpi")].verdict is Verdict.PASS
    raw.put(layout.MPI, {"skipped": "no node under test has it"})
    found = collect.collect(raw, NODES, SUITES)
    assert "MPI check skipped: no node under test has it" in found.notes
    assert not [c for c in found.checks if c.test == "slurm.mpi"]
    layout.Layout(raw).path(layout.MPI).unlink()
    found = collect.collect(raw, NODES, SUITES)
    assert {c.reason for c in found.checks if c.test == "slurm.mpi"} == {
        "no MPI check result (the run stopped before it?)"
    }
    raw.put(layout.MPI, mpi_run(stdout="MPI_Init failed\n"))
    found = collect.collect(raw, NODES, SUITES)
    assert {c.reason for c in found.checks if c.test == "slurm.mpi"} == {
        "the MPI check printed no report: MPI_Init failed"
    }


def test_the_mpi_records_read_whole():
    run_record = layout.MpiRun.from_json(mpi_run(alone={"gpu001": {"rc": 1, "stderr": "e"}}))
    assert run_record.across() == layout.Command(rc=0, stdout=mpi_output(), stderr="", seconds=1.9)
    assert run_record.each() == {"gpu001": layout.Command(rc=1, stdout="", stderr="e")}
    report = layout.MpiReport.from_json(json.loads(mpi_output()))
    assert report.to_json() == json.loads(mpi_output())
    assert report.pair_list()[0] == layout.MpiPair("gpu001", "gpu002", 2.1, 24.0)


def test_compare_lines_up_two_clusters_by_role_and_place(write_inventory):
    """After a migration renamed every node: the old cluster's gpu00N is compared with
    the new one's gpx00N, multi-node and pair runs included, whatever the host order."""
    old = inventory.load(write_inventory(cluster_inventory(compute=("gpu[001:003]",)), name="old"))
    new = inventory.load(
        write_inventory(
            cluster_inventory(controllers=("ctl-b",), compute=("gpx003", "gpx001", "gpx002")),
            name="new",
        )
    )
    assert new.positions(["ctl-b", "gpx001", "gpx002", "gpx003"]) == {
        "ctl-b": "slurm_controller 1",
        "gpx001": "slurm_compute 1",
        "gpx002": "slurm_compute 2",
        "gpx003": "slurm_compute 3",
    }

    def kept(spec, rates, multi, pair):
        nodes = sorted(rates)
        return document.Report(
            id=ids.new_id(),
            started=document.now(),
            inventory=str(spec.path),
            profile=None,
            suites=["storage", "collectives"],
            nodes=nodes,
            positions=spec.positions(nodes),
            judgements=[
                Judgement(n, "storage.seq_write", "/shared", v, "MB/s", verdict, "")
                for n, (v, verdict) in rates.items()
            ]
            + [
                Judgement(multi[0], MULTI, "16 ranks", multi[1], "GB/s", Verdict.PASS, ""),
                Judgement(pair, "collectives.pairwise", "all_reduce", None, "", Verdict.FAIL, ""),
            ],
        )

    ok = (1000.0, Verdict.PASS)
    before = kept(
        old,
        {"gpu001": ok, "gpu002": ok, "gpu003": ok},
        ("gpu[001-003]", 300.0),
        "gpu001,gpu003",
    )
    after = kept(
        new,
        {"gpx001": ok, "gpx002": ok, "gpx003": (200.0, Verdict.FAIL)},
        ("gpx[001-003]", 310.0),
        "gpx001,gpx003",
    )
    fleet, write_test, pair = compare.FLEET, "storage.seq_write", "collectives.pairwise"
    C = compare.Change
    assert compare.compare(before, after) == [
        C(fleet, write_test, "/shared", 1000.0, 1000.0, "MB/s", "pass", "fail"),
        C("gpx001", write_test, "/shared", 1000.0, 1000.0, "MB/s", "pass", "pass", "gpu001"),
        C("gpx001,gpx003", pair, "all_reduce", None, None, "", "fail", "fail", "gpu001,gpu003"),
        C("gpx002", write_test, "/shared", 1000.0, 1000.0, "MB/s", "pass", "pass", "gpu002"),
        C("gpx003", write_test, "/shared", 1000.0, 200.0, "MB/s", "pass", "fail", "gpu003"),
        C("gpx[001-003]", MULTI, "16 ranks", 300.0, 310.0, "GB/s", "pass", "pass", "gpu[001-003]"),
    ]


LAB_NODES = ["kiln-compute01", "kiln-compute02"]
SHOW_NODE = Path(__file__).parent.parent / "fixtures" / "slurm" / "show-node-oneliner-24.11.txt"


def test_a_node_kiln_health_drained_fails_with_its_reason_and_an_operators_drain_warns(tmp_path):
    """The lab, captured, after the passive health check drained kiln-compute02 (autofs
    stopped) and an operator drained kiln-compute01: Kiln's own check found a fault
    (fail, exit 5, the check keeps its drain to resume it); the operator's drain is
    maintenance (warn)."""
    scontrol = SHOW_NODE.read_text()
    plan = drain.plan(scontrol, LAB_NODES)
    health_reason = (
        "kiln-health: mounts: shared /shared: autofs could not mount "
        "kiln-storage:/shared (server kiln-storag"
    )
    operators = "RMA 4711: replace the fan"
    assert plan.to_dict() | {"states": {}} == {
        "states": {},
        "test": [],
        "resume_to_test": [],
        "skipped": {
            "kiln-compute01": f"drained by someone else: {operators}",
            "kiln-compute02": f"drained by Kiln's health check: {health_reason}",
        },
    }
    raw = Raw(layout.make(tmp_path / "raw").root)
    raw.put(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan.to_dict()})
    found = collect.collect(raw, LAB_NODES, [])
    report = document.Report(
        id="20261126-172200-abcd",
        started="2026-11-26T17:22:00+00:00",
        inventory="inv",
        profile="lab-cpu",
        suites=[],
        nodes=LAB_NODES,
        judgements=assess.judge(found, profiles.load("lab-cpu")),
    )
    actions = validate.conclude(report, found, LAB_NODES, no_drain=False)
    assert markdown.render(report).split("## Nodes\n\n")[1].split("\n\n")[0].splitlines() == [
        "| node | verdict | reason |",
        "|---|---|---|",
        "| kiln-compute01 | warn | slurm.state: not tested: drained by someone else: "
        f"{operators} |",
        "| kiln-compute02 | fail | slurm.state: not tested: drained by Kiln's health check: "
        f"{health_reason} |",
    ]
    # Neither drain is Kiln validate's to change: the health check resumes its own.
    assert actions.to_dict() == {
        "drain": {},
        "resume": [],
        "left": {"kiln-compute02": f"already drained by Kiln's health check ({health_reason})"},
    }
    assert (report.verdict, report.exit_code) == (Verdict.FAIL, ExitCode.VALIDATION_FAILED)


def test_the_health_checks_drain_prefixes_are_the_node_programs_own():
    from kiln_node import slurm_state
    from tests.node_scripts import health as passive
    from tests.node_scripts import health_active as active

    assert (
        passive.REASON_PREFIX.strip(),
        active.REASON_PREFIX.strip(),
    ) == slurm_state.HEALTH_PREFIXES[:2]
    assert slurm_state.HEALTH_PREFIXES == ("kiln-health:", "kiln-active:", "kiln-repair:")
    active_drain = NodeState("n", "IDLE+DRAIN", "kiln-active: dcgm_diag: level 2 pcie GPU 0")
    assert (active_drain.drained_by_health, active_drain.drained_by_kiln) == (True, False)


def test_a_node_nothing_was_judged_on_is_unchecked_and_never_resumed():
    """A node with no result but a skipped one was not checked: never a pass, not
    drained for it, not resumed from Kiln's drain either, and the report exits 3."""
    judgements = [
        Judgement("gpu001", "slurm.state", "", None, "", Verdict.PASS, "slurm.state: IDLE"),
        Judgement("gpu002", "collectives.run", "", None, "", Verdict.SKIP, "one rank"),
    ]
    nodes = ["gpu001", "gpu002"]
    report = document.Report(
        id="r", started="s", inventory="inv", profile=None, suites=[], nodes=nodes,
        judgements=judgements,
    )  # fmt: skip
    found = collect.Collected(nodes)
    found.states = {"gpu002": NodeState("gpu002", "IDLE+DRAIN", "kiln: slurm.srun: failed")}
    actions = validate.conclude(report, found, nodes, no_drain=False)
    assert report.node_verdicts == {
        "gpu001": {"verdict": "pass", "reasons": []},
        "gpu002": {"verdict": "unchecked", "reasons": ["nothing was checked on the node"]},
    }
    assert actions.to_dict() == {"drain": {}, "resume": [], "left": {}}
    assert (report.verdict, report.exit_code) == (Verdict.UNCHECKED, ExitCode.NOT_CHECKED)


def test_counts_say_node_in_the_singular_and_a_summary_counts_what_failed(
    tmp_path, monkeypatch, capsys
):
    """`kiln report show` (validate's summary) on two nodes of which one failed, and
    `kiln report list` with a one-node report beside it."""
    from tests.cli.test_bad_input import kiln

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    for run, nodes in (("20261123-120000-aaaa", ["gpu001"]),
                       ("20261124-120000-bbbb", ["gpu001", "gpu002"])):  # fmt: skip
        report = document.Report(id=run, started="s", inventory="inv", profile=None,
                              suites=["storage"], nodes=nodes)  # fmt: skip
        for node in nodes:
            verdict = Verdict.FAIL if node == "gpu002" else Verdict.PASS
            report.judgements.append(
                Judgement(node, "storage.mount", "/shared", None, "", verdict, "mount")
            )
        report.judge_nodes()
        write.write_all(report)
    code, out, err = kiln(["report", "show", "20261124-120000-bbbb"], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    assert out.splitlines()[-2:] == ["fail gpu002: mount", "FAIL 2 nodes: 1 fail, 1 pass"]
    code, out, err = kiln(["report", "show", "20261123-120000-aaaa"], capsys)
    assert out.splitlines()[-1] == "PASS 1 node"
    code, out, err = kiln(["report", "list"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "20261124-120000-bbbb  fail          2 nodes  -",
        "20261123-120000-aaaa  pass           1 node  -",
    ]
