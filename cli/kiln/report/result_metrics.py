"""The last `kiln validate` and `kiln burn-in` as textfile metrics (kiln_result_*, in
kiln_node.metrics' catalogue): each node's verdict and its key figures, one file per
campaign (kiln_result_validate.prom, kiln_result_burn_in.prom) that the campaign's
act step (validate_drain.yml) writes on the first controller, whole, each run.

A key figure is a judged value of one node (a pair's or the whole run's figure names
no single node): the busbw of the collectives, a GPU's TFLOP/s under burn-in, the
storage suite's sequential MB/s. Where a run judged one several times (several
mounts, GPUs, rounds or benchmarks), the lowest is kept: the one that decides."""

from dataclasses import dataclass

from kiln.report.document import Report
from kiln.validation.verdicts import Verdict
from kiln_node import metrics


@dataclass(frozen=True)
class Figure:
    prefix: str  # of the judgement's test
    unit: str  # the judgement's unit
    metric: str
    scale: float  # to the metric's base unit


FIGURES = (
    Figure("collectives.", "GB/s", "kiln_result_busbw_bytes_per_second", 1e9),
    Figure("burn_in.tflops", "TFLOP/s", "kiln_result_flops_per_second", 1e12),
    Figure("storage.seq_", "MB/s", "kiln_result_storage_bytes_per_second", 1e6),
)


def file_name(campaign: str) -> str:
    return metrics.RESULTS.format(campaign=campaign)


def gauges(report: Report, campaign: str, finished: float) -> list[metrics.Gauge]:
    """The run's metrics: verdicts, when it finished, then each kind of figure (a
    metric with no sample is left out)."""
    verdict = metrics.gauge("kiln_result_verdict")
    for node in report.nodes:
        shown = Verdict(report.node_verdict(node)["verdict"]).value
        verdict.add(1, campaign=campaign, node=node, verdict=shown)
    last = metrics.gauge("kiln_result_last_run_timestamp_seconds")
    last.add(round(finished), campaign=campaign)
    lowest: dict[tuple[str, str], tuple[Figure, float]] = {}
    order = {node: index for index, node in enumerate(report.nodes)}
    for j in report.judgements:
        figure = _figure(j.test, j.unit)
        if figure and j.node in order and j.value is not None:
            seen = lowest.get((j.node, j.test))
            lowest[(j.node, j.test)] = (figure, min(j.value, seen[1] if seen else j.value))
    figures = {f.metric: metrics.gauge(f.metric) for f in FIGURES}
    for (node, test), (figure, value) in sorted(
        lowest.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])
    ):
        figures[figure.metric].add(
            round(value * figure.scale), campaign=campaign, node=node, test=test
        )
    return [g for g in (verdict, last, *figures.values()) if g.samples]


def _figure(test: str, unit: str) -> Figure | None:
    return next((f for f in FIGURES if test.startswith(f.prefix) and unit == f.unit), None)


def for_controller(report: Report, campaign: str, finished: float) -> dict[str, str]:
    """What validate_drain.yml writes (validate_results): the file's name and text."""
    return {"file": file_name(campaign), "text": metrics.text(gauges(report, campaign, finished))}
