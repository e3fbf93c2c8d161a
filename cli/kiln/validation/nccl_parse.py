"""Parse nccl-tests output: the text table all_reduce_perf and friends print, and the
JSON file they write with -J.

The text parser takes whole logs (preamble, device lines, several tests one after the
other, `srun --label` prefixes) as well as a bare paste of the table rows; it keeps both
the out-of-place and in-place columns, `#wrong` (None when the run printed N/A: no
validation), and the footer lines (out-of-bounds count and the average bus bandwidth,
with FAILED where nccl-tests printed it).
"""

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kiln.errors import InputError
from kiln.files import loads, read_text

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)
_LABEL = re.compile(r"^\s*\d+:\s?")  # srun --label
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_SETUP = re.compile(
    r"#\s*nThread\s+\d+\s+nGpus\s+\d+\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)"
    r"(?:\s+step:\s*(\d+)\((factor|bytes)\))?"
)
_DEVICE = re.compile(
    r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)"
)
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVERAGE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)\s*(OK|FAILED)?")
_TIMESTAMP = re.compile(r"\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
# A result row starts with its size: a whole number (a negative one is a malformed row,
# refused, not a line to pass over). ASCII digits: str.isdigit() takes "٣" too.
_ROW = re.compile(r"-?[0-9]+")
NOTHING_MEASURED = "a header and a footer but no result row: nothing was measured"


class NcclTestsError(InputError):
    """Output that cannot be read as nccl-tests output; names the file and line."""


@dataclass
class Measure:
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: float | None  # None: the run did not validate (N/A)


@dataclass
class Row:
    size: int  # bytes
    count: int
    type: str
    redop: str
    root: str
    out_of_place: Measure | None
    in_place: Measure | None

    def best_busbw(self) -> float:
        return max(m.busbw for m in (self.out_of_place, self.in_place) if m is not None)

    def wrong(self) -> float:
        return sum(m.wrong or 0 for m in (self.out_of_place, self.in_place) if m is not None)


@dataclass
class Run:
    """One test (all_reduce_perf, ...) as one log or JSON file shows it."""

    source: str  # file name, with the test's place in it when a log holds several
    collective: str | None
    rows: list[Row] = field(default_factory=list)
    ranks: int | None = None
    hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # GPU model per rank
    max_bytes: int | None = None  # what the run was asked to reach
    step: tuple[int, bool] = (2, True)  # (step, is a factor), from -f / -i
    out_of_bounds: int | None = None
    out_of_bounds_failed: bool = False
    average_busbw: float | None = None
    average_failed: bool = False
    errors: list[str] = field(default_factory=list)

    def next_size(self, size: int) -> int:
        step, is_factor = self.step
        return size * step if is_factor else size + step

    @property
    def finished(self) -> bool:
        """The footer was printed (a run that died prints none)."""
        return self.out_of_bounds is not None


def collective_of(name: str) -> str | None:
    """all_reduce from 'all_reduce_perf', './build/all_reduce_perf_mpi' or a file name."""
    base = Path(name).name.lower().replace("-", "_")
    for collective in sorted(COLLECTIVES, key=len, reverse=True):
        if collective in base or collective.replace("_", "") in base:
            return collective
    return None


def parse_file(path: Path, collective: str | None = None) -> list[Run]:
    text = read_text(path, errors="replace")
    if text.lstrip().startswith("{"):
        return [parse_json(text, str(path), collective)]
    return parse_text(text, str(path), collective)


def parse_text(text: str, source: str, collective: str | None = None) -> list[Run]:
    runs: list[Run] = []
    run: Run | None = None
    fallback = collective or collective_of(source)

    def current() -> Run:
        nonlocal run
        if run is None or run.finished:
            run = Run(source=source, collective=fallback)
            runs.append(run)
        return run

    for number, raw in enumerate(text.splitlines(), 1):
        line = _LABEL.sub("", raw, count=1).rstrip()
        if not line.strip():
            continue
        if match := _STARTING.match(line):
            run = None
            current().collective = collective or collective_of(match[1]) or fallback
        elif match := _SETUP.match(line):
            here = current()
            here.max_bytes = int(match[2])
            if match[3]:
                here.step = (int(match[3]), match[4] == "factor")
        elif match := _DEVICE.match(line):
            here = current()
            here.ranks = max(here.ranks or 0, int(match[1]) + 1)
            here.devices.append(match[3].strip())
            if match[2] not in here.hosts:
                here.hosts.append(match[2])
        elif match := _OUT_OF_BOUNDS.match(line):
            here = current()
            if not here.rows:  # a benchmark that measured nothing is no result, never a pass
                raise NcclTestsError(f"{source}:{number}: {NOTHING_MEASURED}")
            here.out_of_bounds = int(match[1])
            here.out_of_bounds_failed = match[2] == "FAILED" or int(match[1]) > 0
        elif match := _AVERAGE.match(line):
            target = run if run is not None else current()
            target.average_busbw = float(match[1])
            target.average_failed = match[2] == "FAILED"
        elif line.lstrip().startswith("# error:"):
            current().errors.append(line.split(":", 1)[1].strip())
        elif _ROW.fullmatch(line.split()[0]):
            current().rows.append(_row(line, source, number))
        # Anything else (NCCL INFO lines, mpirun chatter, comments) is not ours to judge.
    runs = [r for r in runs if r.rows or r.finished]
    if not runs:
        raise NcclTestsError(f"{source}: no nccl-tests result rows found")
    return runs


def _row(line: str, source: str, number: int) -> Row:
    """size count type redop root, then time algbw busbw #wrong for out-of-place and
    in-place (four more per-iteration columns each with -R; a timestamp with -T)."""
    tokens = _TIMESTAMP.sub("", line).split()
    body = tokens[5:]
    try:
        if len(body) == 16:  # per-iteration columns
            out, inp = _measure(body[0:4]), _measure(body[8:12])
        elif len(body) == 8:
            out, inp = _measure(body[0:4]), _measure(body[4:8])
        elif len(body) == 4:  # trace replay: in-place only
            out, inp = None, _measure(body)
        else:
            raise ValueError(f"{len(body)} result columns")
        return _sized(Row(int(tokens[0]), int(tokens[1]), *tokens[2:5], out, inp))
    except (ValueError, IndexError) as exc:
        raise NcclTestsError(
            f"{source}:{number}: not an nccl-tests result row ({exc}): {line.strip()[:80]!r}"
        ) from None


def _sized(row: Row) -> Row:
    """A size and a count are byte and element counts: never negative."""
    for name in ("size", "count"):
        if getattr(row, name) < 0:
            raise ValueError(f"{name} {getattr(row, name)} is negative")
    return row


def _measure(columns: list[str]) -> Measure:
    time_us, algbw, busbw, wrong = columns
    return _checked(
        Measure(
            float(time_us), float(algbw), float(busbw), None if wrong == "N/A" else float(wrong)
        )
    )


def _checked(measure: Measure) -> Measure:
    """nan passes every comparison (and nccl-tests writes "nan" for it): a time or a
    bandwidth that is not a finite, non-negative number is no result, nor is such a
    count of wrong values (nan is true: it would read as corruption of nan values)."""
    for name in ("time_us", "algbw", "busbw"):
        value = getattr(measure, name)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name.removesuffix('_us')} {value!r} is no measurement")
    if measure.wrong is not None and not (math.isfinite(measure.wrong) and measure.wrong >= 0):
        raise ValueError(f"#wrong {measure.wrong!r} is no count")
    return measure


def parse_json(text: str, source: str, collective: str | None = None) -> Run:
    """The -J file: {"args": [...], "config": {"devices": [...]}, "results": [...],
    "out_of_bounds": {...}, "average_bus_bandwidth": {...}}."""
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        raise NcclTestsError(
            f"{source}:{exc.lineno}: not nccl-tests JSON ({exc.msg}; a run cut short?)"
        ) from None
    except ValueError as exc:  # JSON Python cannot hold (kiln.files.loads)
        raise NcclTestsError(f"{source}: not nccl-tests JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise NcclTestsError(f"{source}: not nccl-tests JSON (no results list)")
    args = data.get("args") or [""]
    run = Run(source=source, collective=collective or collective_of(str(args[0])))
    run.collective = run.collective or collective_of(source)
    try:
        _json_config(run, data.get("config") or {})
    except (AttributeError, OverflowError, TypeError, ValueError) as exc:
        raise NcclTestsError(f"{source}: config: unexpected entry ({exc})") from None
    for index, result in enumerate(data["results"]):
        try:
            row = Row(
                int(result["size"]),
                int(result["count"]),
                str(result.get("type", "")),
                str(result.get("redop", "")),
                str(result.get("root", "")).strip(),
                _json_measure(result.get("out_of_place")),
                _json_measure(result.get("in_place")),
            )
            run.rows.append(_sized(row))
        except (KeyError, OverflowError, TypeError, ValueError) as exc:
            raise NcclTestsError(f"{source}: results[{index}]: unexpected entry ({exc})") from None
    try:
        if bounds := data.get("out_of_bounds"):
            run.out_of_bounds = int(bounds.get("count", 0))
            run.out_of_bounds_failed = run.out_of_bounds > 0 or bounds.get("okay") in (
                False,
                "false",
            )
        if average := data.get("average_bus_bandwidth"):
            run.average_busbw = float(average.get("bandwidth"))
            # nccl-tests writes booleans as "true"/"false", and "unchecked" without -G
            run.average_failed = average.get("okay") in (False, "false")
    except (AttributeError, OverflowError, TypeError, ValueError) as exc:
        raise NcclTestsError(f"{source}: footer: unexpected entry ({exc})") from None
    # nccl-tests 2.19 writes ncclGetLastError()'s text even when it is empty: [""]
    run.errors = [text for e in data.get("errors") or [] if (text := str(e).strip())]
    if not run.rows:
        raise NcclTestsError(
            f"{source}: {'no result row' if not run.finished else NOTHING_MEASURED}"
        )
    return run


def _json_config(run: Run, config: dict) -> None:
    """The -J file's sweep and devices."""
    if (maximum := config.get("maximum_bytes")) is not None:
        run.max_bytes = int(maximum)
    if config.get("step_bytes"):
        run.step = (int(config["step_bytes"]), False)
    elif config.get("step_factor"):
        run.step = (int(config["step_factor"]), True)
    for device in config.get("devices") or []:
        run.ranks = max(run.ranks or 0, int(device.get("rank", 0)) + 1)
        run.devices.append(str(device.get("device_info", "")).strip())
        if (host := device.get("hostname")) and host not in run.hosts:
            run.hosts.append(str(host))


def _json_measure(entry: dict | None) -> Measure | None:
    if entry is None:
        return None
    wrong = entry.get("nwrong")
    return _checked(
        Measure(
            float(entry.get("time", entry.get("cpu_time", 0.0))),
            float(entry["alg_bw"]),
            float(entry["bus_bw"]),
            None if wrong is None else float(wrong),
        )
    )
