"""kiln.files and the modes of Kiln's state: whole files or none, owner-only."""

import errno
import os

import pytest

from kiln import files, paths
from kiln.errors import ExitCode, KilnError


def test_a_write_is_whole_and_private(tmp_path):
    path = tmp_path / "deep" / "report.json"
    files.write_private(path, "first")
    files.write_private(path, "second")
    assert path.read_text() == "second"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]


def test_a_full_disk_keeps_the_old_file_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "kiln.json"
    files.write_private(path, "old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(KilnError) as info:
        files.write_private(path, "new")
    assert info.value.message == f"cannot write {path}: no space left on the device"
    assert info.value.exit_code == ExitCode.FAILED
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["kiln.json"]


def test_the_state_directory_is_made_owner_only(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    assert oct(paths.state_dir().stat().st_mode & 0o777) == "0o700"
