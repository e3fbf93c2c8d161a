"""Read fio's JSON output (--output-format=json): bandwidth, IOPS and p99 completion
latency per direction, summed over jobs (or the one group with --group_reporting).

fio may print notes before the JSON on the same stream; they are skipped.
"""

import json
from dataclasses import dataclass

from kiln.errors import InputError
from kiln.files import loads


class FioError(InputError):
    """Output that is not fio JSON, or a fio run that reported errors."""


@dataclass
class Direction:
    bw_bytes: float  # bytes per second, all jobs together
    iops: float
    io_bytes: int
    p99_clat_ms: float | None  # worst job's 99th percentile completion latency

    @property
    def bw_mbps(self) -> float:
        return self.bw_bytes / 1e6


@dataclass
class FioResult:
    jobs: list[str]
    read: Direction | None
    write: Direction | None


def parse(text: str, source: str) -> FioResult:
    start = text.find("{")
    if start == -1:
        raise FioError(f"{source}: no fio JSON found")
    try:
        data = loads(text[start:])
    except json.JSONDecodeError as exc:
        raise FioError(f"{source}: not fio JSON ({exc.msg}; a run cut short?)") from None
    except ValueError as exc:  # JSON Python cannot hold (kiln.files.loads)
        raise FioError(f"{source}: not fio JSON ({exc})") from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise FioError(f"{source}: fio JSON without jobs")
    failed = [f"{j.get('jobname')}: error {j['error']}" for j in jobs if j.get("error")]
    if failed:
        raise FioError(f"{source}: fio reported {'; '.join(failed)}")
    return FioResult(
        jobs=[str(j.get("jobname", "")) for j in jobs],
        read=_direction(jobs, "read"),
        write=_direction(jobs, "write"),
    )


def _direction(jobs: list[dict], name: str) -> Direction | None:
    parts = [j[name] for j in jobs if j.get(name, {}).get("io_bytes")]
    if not parts:
        return None
    p99s = [
        float(p["clat_ns"]["percentile"]["99.000000"]) / 1e6
        for p in parts
        if "99.000000" in p.get("clat_ns", {}).get("percentile", {})
    ]
    return Direction(
        bw_bytes=sum(float(p["bw_bytes"]) for p in parts),
        iops=sum(float(p["iops"]) for p in parts),
        io_bytes=sum(int(p["io_bytes"]) for p in parts),
        p99_clat_ms=max(p99s) if p99s else None,
    )
