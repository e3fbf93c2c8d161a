import re

import pytest

from kiln import hostlist
from kiln.hostlist import compress, expand


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["gpu001", "gpu002", "gpu003"], "gpu[001-003]"),
        (["gpu003", "gpu001", "gpu002", "gpu001"], "gpu[001-003]"),
        (["gpu001", "gpu002", "gpu004", "gpu005", "gpu009"], "gpu[001-002,004-005,009]"),
        ([f"gpu{i:03d}" for i in range(1, 129)], "gpu[001-128]"),
        (["node1", "node2", "node10"], "node[1-2,10]"),
        (["login", "gpu01", "cpu7"], "cpu7,gpu01,login"),
        (["kiln-compute01", "kiln-compute02"], "kiln-compute[01-02]"),
        (["a1b2", "a1b3"], "a1b[2-3]"),
        (["gpu001", "gpu1000"], "gpu001,gpu1000"),
        ([], ""),
    ],
)
def test_compress(names, expected):
    assert compress(names) == expected


def test_round_trip():
    names = [f"gpu{i:03d}" for i in (1, 2, 3, 7, 99, 100)] + ["login1", "head01"]
    assert sorted(expand(compress(names))) == sorted(names)


def test_expand():
    assert expand("gpu[001-003,007],login1") == ["gpu001", "gpu002", "gpu003", "gpu007", "login1"]
    assert expand("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    with pytest.raises(ValueError, match="unbalanced"):
        expand("gpu[001-003")
    with pytest.raises(ValueError, match="bad range"):
        expand("gpu[a-b]")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("c[3-1]", "reversed range 3-1 in 'c[3-1]'"),
        ("c[0-99999999]", "range 0-99999999 in 'c[0-99999999]' names more than 1,000,000"),
        ("a[0-999]b[0-9999]", "hostlist 'a[0-999]b[0-9999]' names more than 1,000,000 hosts"),
    ],
)
def test_reversed_and_unbounded_ranges_are_refused(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        hostlist.expand(text)
