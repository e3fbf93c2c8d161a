"""fio JSON parsing (tests/fixtures/fio: read, 4 write jobs, randrw group, a failed job)."""

from pathlib import Path

import pytest

from kiln.validation import fio
from kiln.validation.fio import FioError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fio"


def parse(name: str) -> fio.FioResult:
    return fio.parse((FIXTURES / name).read_text(), name)


def test_sequential_read():
    result = parse("seq_read.json")
    assert result.write is None and result.read is not None
    assert result.read.bw_mbps == 1200.0
    assert result.read.iops == pytest.approx(1144.4)
    assert result.read.p99_clat_ms == 35.0


def test_jobs_are_summed_and_notes_before_the_json_skipped():
    result = parse("seq_write_4jobs.json")
    assert result.jobs == ["seq_write"] * 4 and result.read is None
    assert result.write is not None
    assert result.write.bw_mbps == 1000.0  # 4 x 250 MB/s
    assert result.write.io_bytes == 4 << 30
    assert result.write.p99_clat_ms == 63.0  # the worst job


def test_mixed_group():
    result = parse("randrw_group.json")
    assert result.read is not None and result.write is not None
    assert (result.read.iops, result.write.iops) == (10240.0, 2560.0)
    assert result.read.p99_clat_ms == 2.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fio: pid=1, err=2/file:filesetup.c", "no fio JSON found"),
        ('{"jobs": [', "not fio JSON"),
        ('{"fio version": "fio-3.33", "jobs": []}', "without jobs"),
    ],
)
def test_bad_output(text, message):
    with pytest.raises(FioError, match=message):
        fio.parse(text, "x")


def test_a_job_error_is_reported():
    with pytest.raises(FioError, match=r"failed\.json: fio reported seq_read: error 5"):
        parse("failed.json")
