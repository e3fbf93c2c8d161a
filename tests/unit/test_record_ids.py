"""Naming a kept run: by id, unique prefix or 'latest', with one-line errors."""

import re
from pathlib import Path

import pytest

from kiln.errors import InputError
from kiln.run.ids import new_id, pick

KNOWN = ["20261122-2300-b", "20261122-2200-a2", "20261122-2200-a1"]  # newest first


def test_pick_by_id_prefix_and_latest():
    assert pick(KNOWN, "latest", "run", Path("/s"), "kiln runs list") == KNOWN[0]
    assert pick(KNOWN, "20261122-2200-a1", "run", Path("/s"), "kiln runs list") == KNOWN[2]
    assert pick(KNOWN, "20261122-23", "run", Path("/s"), "kiln runs list") == KNOWN[0]


def test_pick_refuses_unknown_and_ambiguous_names():
    with pytest.raises(InputError, match=r"no run 'x' in /s \(see `kiln runs list`\)"):
        pick(KNOWN, "x", "run", Path("/s"), "kiln runs list")
    with pytest.raises(InputError, match=r"'20261122-2200' is ambiguous: .*a2, .*a1"):
        pick(KNOWN, "20261122-2200", "validation run", Path("/s"), "kiln report list")
    with pytest.raises(InputError, match="no run 'latest'"):
        pick([], "latest", "run", Path("/s"), "kiln runs list")


def test_new_ids_sort_by_time_and_carry_the_label():
    assert re.fullmatch(r"\d{8}-\d{6}-site-[0-9a-f]{4}", new_id("site"))
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", new_id())
