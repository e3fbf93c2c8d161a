"""Read a validation run's raw results (what validate.yml brought back, laid out as
kiln.validation.results says) into findings, one collector per suite (`slurm_suite`,
`storage_suite`, `collectives_suite`), each named by its kiln.validation.registry
entry. A finding is a measured value (judged later against the profile and the
fleet) or a check that already has its verdict (a mount that is missing fails
whatever the profile).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import files, hostlist
from kiln.validation import drain, fio, nccl_judge, nccl_parse, registry
from kiln.validation import results as layout
from kiln.validation.nccl_judge import PLATEAU_BYTES
from kiln.validation.results import Layout
from kiln.validation.verdicts import Verdict


@dataclass
class Measure:
    node: str
    test: str
    subject: str
    value: float


@dataclass
class Check:
    node: str
    test: str
    subject: str
    verdict: Verdict
    reason: str


@dataclass
class Curve:
    """busbw against message size, for the report's plots."""

    node: str
    collective: str
    points: list[tuple[int, float]]


@dataclass
class Collected:
    nodes: list[str]
    states: dict[str, drain.NodeState] = field(default_factory=dict)
    measures: list[Measure] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, node: str, test: str, subject: str, reason: str) -> None:
        self.checks.append(Check(node, test, subject, Verdict.FAIL, reason))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def skipped_checks(skipped: dict[str, str]) -> list[Check]:
    """The nodes the plan left out (node -> why, Plan.skipped) as slurm.state checks:
    a warn when the reason says nothing against the node, else a fail."""
    return [
        Check(node, "slurm.state", "", drain.skipped_verdict(why), f"not tested: {why}")
        for node, why in skipped.items()
    ]


def collect(results: Path, nodes: list[str], suites: list[str]) -> Collected:
    """A run's findings: each node's Slurm state, or why the plan left it out; then
    each suite asked for through its collector (kiln.validation.registry names it), in
    the registry's order, on the nodes the suites ran on."""
    found = Collected(nodes)
    state = layout.SlurmState.from_json(Layout(results).load(layout.SLURM_STATE))
    found.states = drain.parse_states(state.scontrol)
    skipped_nodes = skipped(results)
    for node in nodes:
        if node in skipped_nodes:
            found.checks += skipped_checks({node: skipped_nodes[node]})
        elif node in found.states:
            seen = found.states[node]
            note = f" ({seen.reason})" if seen.reason else ""
            found.checks.append(Check(node, "slurm.state", "", Verdict.PASS, seen.state + note))
    tested = [str(n) for n in plan(results).get("test", [])]
    for suite in registry.chosen(suites):
        globals()[suite.collector](found, results, tested)
    return found


def slurm_suite(found: Collected, results: Path, tested: list[str]) -> None:
    srun = layout.Command.by_name(Layout(results).load(layout.SRUN))
    for node in tested:
        outcome = srun.get(node)
        if outcome is None:
            found.fail(node, "slurm.srun", "", "no srun result for the node")
        elif outcome.rc == 0 and outcome.seconds is None:
            found.fail(node, "slurm.srun", "", "srun on the node ran but its time was not recorded")
        elif outcome.rc == 0:
            found.measures.append(Measure(node, "slurm.srun_s", "", outcome.seconds))
        else:
            found.fail(node, "slurm.srun", "", f"srun on the node failed: {outcome.why()}")
        written = Layout(results).load_node(layout.MUNGE, node)
        munge = layout.Munge.from_json(written)
        if written is None:
            found.fail(node, "slurm.munge", "", "no munge result (the node was unreachable?)")
        elif munge.rc == 0:
            found.checks.append(Check(node, "slurm.munge", "", Verdict.PASS, "decodes"))
        else:
            status = munge.status or f"unmunge exited {munge.rc}"
            found.fail(
                node, "slurm.munge", "", f"cannot decode the controller's credential: {status}"
            )
    written = Layout(results).load(layout.MPI)
    if written is None:
        for node in tested:
            found.fail(node, "slurm.mpi", "", "no MPI check result (the run stopped before it?)")
    else:
        _mpi(found, layout.MpiRun.from_json(written), tested)


def _mpi(found: Collected, run: layout.MpiRun, tested: list[str]) -> None:
    """Kiln's MPI check: a rank on every node and the ping-pong around them, or, where
    the run across the nodes failed, which nodes cannot start a rank alone."""
    if run.skipped:
        found.notes.append(f"MPI check skipped: {run.skipped}")
        return
    for node in run.unbuilt:
        found.fail(node, "slurm.mpi", "", "Kiln's MPI check is not built here (the mpi role)")
    ran = [n for n in tested if n not in run.unbuilt]
    across = run.across()
    if across.rc == 0:
        _mpi_report(found, across, ran)
        return
    each = run.each()
    failing = [n for n in ran if n not in each or each[n].rc != 0]
    for node in ran:
        if node in failing:
            why = each[node].why() if node in each else "no result"
            found.fail(node, "slurm.mpi", "", f"an MPI rank does not start on the node: {why}")
        elif failing:
            reason = "a rank starts on the node; the run across the nodes failed with the others"
            found.checks.append(Check(node, "slurm.mpi", "", Verdict.PASS, reason))
        else:
            reason = (
                f"the MPI run across the nodes failed ({across.why()}); each node runs it alone"
            )
            found.checks.append(Check(node, "slurm.mpi", "", Verdict.WARN, reason))


def _mpi_report(found: Collected, across: layout.Command, ran: list[str]) -> None:
    lines = [line for line in across.stdout.splitlines() if line.startswith("{")]
    try:
        report = layout.MpiReport.from_json(files.loads(lines[-1]) if lines else None)
    except ValueError:
        report = layout.MpiReport()
    if report.ranks is None:
        for node in ran:
            found.fail(
                node,
                "slurm.mpi",
                "",
                f"the MPI check printed no report: {_last_line(across.stdout) or across.why()}",
            )
        return
    pairs = report.pair_list()
    for node in ran:
        if node not in report.hosts:
            found.fail(node, "slurm.mpi", "", "no MPI rank reported from the node")
            continue
        found.checks.append(
            Check(node, "slurm.mpi", "", Verdict.PASS, "a rank started through PMIx")
        )
        # A node is as good as its best pair: a slow neighbour does not make it slow.
        mine = [p for p in pairs if node in (p.node, p.peer)]
        latencies = [p.latency_us for p in mine if p.latency_us is not None]
        bandwidths = [p.bandwidth_gbps for p in mine if p.bandwidth_gbps is not None]
        if latencies:
            found.measures.append(Measure(node, "slurm.mpi_latency_us", "", min(latencies)))
        if bandwidths:
            found.measures.append(Measure(node, "slurm.mpi_bandwidth", "", max(bandwidths)))


def storage_suite(found: Collected, results: Path, tested: list[str]) -> None:
    steps = layout.StorageSteps.from_json(Layout(results).load(layout.STORAGE_STEPS))
    if steps.cold_import_skipped:
        found.notes.append(f"cold-import test skipped: {steps.cold_import_skipped}")
    for node in tested:
        data = Layout(results).load_node("storage", node)
        if data is None:
            found.fail(
                node, "storage.run", "", f"no storage result: {steps.step('storage').problem()}"
            )
        else:
            _node_storage(found, node, layout.NodeStorage.from_json(data))
        if steps.cold_import_skipped:
            continue
        written = Layout(results).load_node("cold_import", node)
        cold = layout.ColdImport.from_json(written)
        if written is None:
            why = steps.step("cold_import").problem()
            found.fail(node, "storage.cold_import", "", f"no cold-import result: {why}")
        elif cold.seconds is None or cold.error:
            found.fail(node, "storage.cold_import", "", cold.problem())
        else:
            found.measures.append(Measure(node, "storage.cold_import_s", "", cold.seconds))


_FIO_RUNS = (
    ("seq_write", "write", "storage.seq_write"),
    ("seq_read", "read", "storage.seq_read"),
    ("rand_read", "read", "storage.rand_read_iops"),
)


def _node_storage(found: Collected, node: str, data: layout.NodeStorage) -> None:
    check = data.check()
    if check.rc not in (0, 1):
        found.fail(node, "storage.mount", "", f"the mount check could not run: {check.why()}")
    for mount in check.entries():
        verdict = {"OK": Verdict.PASS, "WARN": Verdict.WARN}.get(mount.status, Verdict.FAIL)
        reason = mount.reason
        if verdict is Verdict.FAIL:
            reason += "; not benchmarked"
        found.checks.append(Check(node, "storage.mount", mount.path, verdict, reason))
    for target in data.target_list():
        if target.error:
            found.fail(node, "storage.io", target.path, target.error)
            continue
        for key, direction, test in _FIO_RUNS:
            run = target.fio(key)
            try:
                parsed = fio.parse(run.json, f"{node}:{target.path} {key}")
            except fio.FioError as exc:
                found.fail(node, "storage.io", target.path, _last_line(run.stderr) or exc.message)
                continue
            side = getattr(parsed, direction)
            if side is None:
                why = f"fio reported no {direction} for {key}"
                found.fail(node, "storage.io", target.path, why)
                continue
            value = side.iops if test.endswith("iops") else side.bw_mbps
            found.measures.append(Measure(node, test, target.path, value))
        small = target.small_files()
        if small.seconds > 0:
            found.measures.append(
                Measure(node, "storage.metadata_ops", target.path, small.ops / small.seconds)
            )


def plateau_busbw(
    results: list[layout.Point], collective: str
) -> tuple[float, list[tuple[int, float]]]:
    """Best busbw among sizes of 1 GiB and more (or the largest sizes a short sweep has:
    the top quarter), and the whole curve."""
    points = sorted((r.size_bytes, r.busbw_gbps) for r in results if r.collective == collective)
    if not points:
        return 0.0, []
    floor = min(PLATEAU_BYTES, points[-1][0])
    top = [bw for size, bw in points if size >= floor]
    return max(top), points


def collectives_suite(found: Collected, results: Path, tested: list[str]) -> None:
    steps = layout.CollectivesSteps.from_json(Layout(results).load(layout.COLLECTIVES_STEPS))
    # With one rank per node the within-node runs were not scheduled (no link to cross).
    within = [] if steps.single_node_skipped else tested
    if steps.single_node_skipped:
        found.notes.append(steps.single_node_skipped)
    if steps.nccl_tests_skipped:
        found.notes.append(f"nccl-tests skipped: {steps.nccl_tests_skipped}")
    else:
        outputs = layout.NcclTests.from_json(Layout(results).load(layout.NCCL_TESTS))
        _nccl_tests(found, outputs, tested, within)
    # On a GPU profile, a node neither benchmark measured was not checked: never a pass.
    for node in tested:
        if node in steps.unmeasured:
            why = str(steps.unmeasured[node])
            found.checks.append(Check(node, "collectives.run", "", Verdict.UNCHECKED, why))
    if steps.torch_skipped:
        found.notes.append(f"Kiln's collectives benchmark skipped: {steps.torch_skipped}")
        return
    for node in within:
        doc = Layout(results).load_node("collectives_node", node)
        if doc is None:
            why = steps.step("single_node").problem()
            found.fail(node, "collectives.run", "single node", f"no benchmark result: {why}")
            continue
        _bench(found, node, layout.Benchmark.from_json(doc), "single_node")
    if len(tested) > 1:
        docs = [Layout(results).load_node("collectives_all", n) for n in tested]
        doc = next((d for d in docs if d), None)
        group = hostlist.compress(tested)
        if doc is None:
            why = steps.step("multi_node").problem()
            found.fail(group, "collectives.run", "all nodes", f"no benchmark result: {why}")
        else:
            _bench(found, group, layout.Benchmark.from_json(doc), "multi_node")


def _bench(found: Collected, node: str, doc: layout.Benchmark, scope: str) -> None:
    if doc.ranks == 1:
        found.notes.append(f"{node} {scope}: {nccl_judge.ONE_RANK}")
        return
    points = doc.points()
    for collective in sorted({p.collective for p in points}):
        best, curve = plateau_busbw(points, collective)
        subject = f"{doc.ranks} ranks, {doc.backend}"
        found.measures.append(Measure(node, f"collectives.{collective}.{scope}", subject, best))
        found.curves.append(Curve(node, collective, curve))


def plan(results: Path) -> dict[str, Any]:
    """The plan the run recorded before the suites (drain.Plan as a dict), or {}."""
    return layout.SlurmState.from_json(Layout(results).load(layout.SLURM_STATE)).plan


def missing_prerequisites(results: Path) -> list[str]:
    """What a suite asked for by name lacks, when the run stopped for it."""
    return layout.Prerequisites.from_json(Layout(results).load(layout.PREREQUISITES)).missing


def skipped(results: Path) -> dict[str, str]:
    """Nodes the run did not test, and why (from the plan it recorded)."""
    return plan(results).get("skipped", {})


def pair_results(results: Path, pairs: list[tuple[str, str]], limit: float) -> dict:
    """pair -> whether its all_reduce plateau met `limit` (a pair that did not run fails)."""
    found = layout.Pair.by_name(Layout(results).load(layout.PAIRS))
    outcome = {}
    for pair in pairs:
        ran = found.get(",".join(pair))
        doc = ran.benchmark() if ran else None
        best = plateau_busbw(doc.points(), "all_reduce")[0] if doc else 0.0
        outcome[pair] = best >= limit
    return outcome


def _nccl_tests(
    found: Collected, data: layout.NcclTests, tested: list[str], within: list[str]
) -> None:
    """nccl-tests' text output per node (`within`) and across nodes, judged on the
    plateau, with its correctness checks (wrong values, FAILED, a run cut short) as
    failures."""
    outputs = [(node, "single_node", data.within(node)) for node in within]
    if len(tested) > 1:
        outputs.append((hostlist.compress(tested), "multi_node", data.across()))
    for node, scope, by_collective in outputs:
        if not by_collective:
            found.fail(node, "collectives.nccl_tests", scope, "no nccl-tests output")
        for collective, outcome in sorted(by_collective.items()):
            problem = ""
            try:
                runs = nccl_parse.parse_text(outcome.stdout, f"{node} {collective}", collective)
            except nccl_parse.NcclTestsError as exc:
                runs, problem = [], exc.message
            if not any(run.rows for run in runs):
                # srun's own words first: they say why nothing was printed
                why = _last_line(outcome.stderr) or problem or f"exit {outcome.rc}"
                found.fail(node, "collectives.nccl_tests", collective, f"no results: {why}")
                continue
            run = next(run for run in runs if run.rows)
            result = nccl_judge.judge([run], None)[0]
            if result.verdict is Verdict.SKIP:
                found.notes += [f"{node} {collective} (nccl-tests): {n}" for n in result.notes]
                continue
            value = result.best_busbw_gbps
            if value is None:
                value = result.largest_size_busbw_gbps or 0.0
            subject = f"nccl-tests, {run.ranks or '?'} ranks"
            found.measures.append(
                Measure(node, f"collectives.{collective}.{scope}", subject, value)
            )
            found.curves.append(
                Curve(
                    node, f"{collective} (nccl-tests)", [(r.size, r.best_busbw()) for r in run.rows]
                )
            )
            for reason in result.reasons:
                found.fail(node, "collectives.nccl_tests", collective, reason)


def benchmark_ran(results: Path) -> bool:
    """Whether Kiln's torch benchmark ran (pairwise runs use it)."""
    written = Layout(results).load(layout.COLLECTIVES_STEPS)
    return bool(written) and not layout.CollectivesSteps.from_json(written).torch_skipped
