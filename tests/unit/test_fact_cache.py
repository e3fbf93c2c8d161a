"""kiln.paths.fact_cache: one place for Ansible's fact cache, the state directory's
facts/ or $KILN_FACT_CACHE (shared by the control machines of one cluster), and its two
users: the runs (kiln.run.execute) and what reads cached facts (kiln.os_support)."""

import json
import stat

import pytest

from kiln import os_support, paths
from kiln.errors import ExitCode, InputError, KilnError


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_the_default_is_the_state_directorys_facts_made_0700(state_dir):
    cache = paths.fact_cache()
    assert cache == state_dir / "facts"
    assert (cache.is_dir(), mode(cache)) == (True, 0o700)


def test_the_override_is_made_0700_with_its_parents(state_dir, monkeypatch, tmp_path):
    shared = tmp_path / "shared" / "kiln-facts"
    monkeypatch.setenv("KILN_FACT_CACHE", str(shared))
    assert paths.fact_cache() == shared
    assert (shared.is_dir(), mode(shared)) == (True, 0o700)
    assert not (state_dir / "facts").exists()


def test_an_existing_override_keeps_its_mode_and_a_relative_one_is_made_absolute(
    state_dir, monkeypatch, tmp_path
):
    """A shared directory's mode is its owner's (a group of operators may share it)."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o750)
    shared.chmod(0o750)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KILN_FACT_CACHE", "shared")
    assert paths.fact_cache() == shared
    assert mode(shared) == 0o750


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{tmp}/file", "$KILN_FACT_CACHE {tmp}/file: not a directory"),
        ("", "$KILN_FACT_CACHE is empty: name a directory, or unset it"),
        ("  ", "$KILN_FACT_CACHE is empty: name a directory, or unset it"),
    ],
)
def test_a_bad_override_is_refused_in_one_line(state_dir, monkeypatch, tmp_path, value, message):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("KILN_FACT_CACHE", value.format(tmp=tmp_path))
    with pytest.raises(InputError) as raised:
        paths.fact_cache()
    assert (raised.value.message, raised.value.exit_code) == (
        message.format(tmp=tmp_path),
        ExitCode.BAD_INPUT,
    )


def test_a_state_directory_whose_facts_is_a_file_is_refused(state_dir):
    (state_dir / "facts").write_text("")
    with pytest.raises(InputError) as raised:
        paths.fact_cache()
    assert raised.value.message == f"the fact cache {state_dir}/facts: not a directory"


def test_an_override_that_cannot_be_made_is_a_write_error(state_dir, monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("KILN_FACT_CACHE", str(tmp_path / "file" / "facts"))
    with pytest.raises(KilnError) as raised:
        paths.fact_cache()
    assert (raised.value.message, raised.value.exit_code) == (
        f"cannot write {tmp_path}/file/facts: Not a directory",
        ExitCode.FAILED,
    )


def test_cached_facts_are_read_from_the_override(state_dir, monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    facts = {"ansible_distribution": "Debian", "ansible_distribution_major_version": "13"}
    (shared / "s1_ctl1").write_text(json.dumps({"__payload__": json.dumps(facts)}))
    monkeypatch.setenv("KILN_FACT_CACHE", str(shared))
    assert os_support.cached_facts(["ctl1", "gpu1"]) == {"ctl1": facts}
    monkeypatch.delenv("KILN_FACT_CACHE")
    assert os_support.cached_facts(["ctl1", "gpu1"]) == {}
