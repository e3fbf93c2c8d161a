"""kiln.files: what operators give is read only from regular files, within a bound;
Kiln's state is written whole or not at all, owner-only."""

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path

import pytest

from kiln import files, paths
from kiln.errors import ExitCode, InputError, KilnError


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


# --- reading what operators give ---------------------------------------------------------


def test_a_regular_file_is_read_whole(tmp_path):
    path = tmp_path / "nccl.txt"
    path.write_bytes(b"# nThread 1\n\xff\n")
    assert files.read_text(path, errors="replace") == "# nThread 1\n\ufffd\n"
    with pytest.raises(InputError) as info:
        files.read_text(path)
    assert info.value.message == f"{path}: not a text file (byte 12 is not UTF-8)"


def _socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: os.mkfifo(p), "a FIFO"),
        (lambda p: p.mkdir(), "a directory"),
        (_socket, "a socket"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_unread(tmp_path, make, kind):
    path = tmp_path / "given"
    kept = make(path)
    with pytest.raises(InputError) as info:
        files.read_text(path, "given")
    assert info.value.message == f"given: cannot read: {kind}, not a regular file"
    if kept:
        kept.close()


def test_a_fifo_swapped_in_after_the_check_is_refused_without_waiting(tmp_path, monkeypatch):
    """Between the stat and the open, the regular file became a FIFO: O_NONBLOCK opens it
    without waiting for a writer, and fstat refuses it."""
    path = tmp_path / "given"
    path.write_text("x")
    real_open = os.open

    def swapped(name, flags, *args):
        path.unlink()
        os.mkfifo(path)
        return real_open(name, flags, *args)

    monkeypatch.setattr(os, "open", swapped)
    with pytest.raises(InputError) as info:
        files.read_text(path, "given")
    assert info.value.message == "given: cannot read: a FIFO, not a regular file"


def test_a_file_over_the_limit_is_refused_by_its_size_or_as_it_is_read(tmp_path, monkeypatch):
    huge = tmp_path / "huge"
    with huge.open("wb") as out:
        out.truncate(files.MAX_INPUT_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(InputError) as info:
        files.read_text(huge, "huge")
    assert info.value.message == "huge: cannot read: over 1 GiB (Kiln's limit for a file)"
    # /proc files say they are empty: the read itself stops at the limit.
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 10)
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(InputError) as info:
        files.read_text(Path("/proc/self/status"), "status")
    assert info.value.message == "status: cannot read: over 10 bytes (Kiln's limit for a file)"


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(InputError) as info:
        files.read_text(tmp_path / "nope", "nope")
    assert info.value.message == "nope: cannot read: No such file or directory"


# --- output files the operator names (-o) -----------------------------------------------


def test_an_output_file_is_written_whole_with_the_umask_mode(tmp_path):
    out = tmp_path / "topology.conf"
    old = os.umask(0o027)
    try:
        files.write_output(out, "first\n")
        files.write_output(out, "second\n")
    finally:
        os.umask(old)
    assert out.read_text() == "second\n"
    assert oct(out.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topology.conf"]


def test_an_output_through_a_link_replaces_the_file_it_points_to(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "topology.conf").write_text("old\n")
    (tmp_path / "topology.conf").symlink_to(tmp_path / "real" / "topology.conf")
    files.write_output(tmp_path / "topology.conf", "new\n")
    assert (tmp_path / "topology.conf").is_symlink()
    assert (tmp_path / "real" / "topology.conf").read_text() == "new\n"


def test_an_output_needs_its_directory(tmp_path):
    with pytest.raises(InputError) as info:
        files.output_path(tmp_path / "none" / "x.html")
    assert info.value.message == f"-o {tmp_path}/none/x.html: no directory {tmp_path}/none"
    with pytest.raises(InputError) as info:
        files.output_path(tmp_path)
    assert info.value.message == f"-o {tmp_path}: is a directory; name a file"


def test_an_output_is_never_a_device_or_a_fifo_it_would_replace(tmp_path):
    """The output is written beside and renamed over: over `-o /dev/null`, as root, that
    would leave a plain file where the device was. Refused, the file kept as it was.
    (A device of the test's own, never the machine's /dev/null.)"""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    cases = [(tmp_path / "fifo", "a FIFO"), (tmp_path / "link", "a FIFO")]
    with contextlib.suppress(PermissionError):  # making a device needs root
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        cases.append((tmp_path / "null", "a character device"))
    for given, kind in cases:
        with pytest.raises(InputError) as info:
            files.write_output(given, "text\n")
        assert info.value.message == f"-o {given.resolve()}: {kind}, not a regular file"
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    if (tmp_path / "null").exists():
        assert stat.S_ISCHR(os.stat(tmp_path / "null").st_mode)
    left = {"fifo", "link"} | ({"null"} if len(cases) == 3 else set())
    assert {p.name for p in tmp_path.iterdir()} == left  # no temporary beside them


def test_an_output_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "report.html"
    out.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(KilnError) as info:
        files.write_output(out, "new")
    assert (info.value.message, info.value.exit_code) == (
        f"cannot write {out}: no space left on the device",
        ExitCode.FAILED,
    )
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    assert out.read_text() == "old"


def test_a_state_directory_that_cannot_be_made_names_the_file(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(KilnError) as info:
        files.write_private(tmp_path / "runs" / "x" / "kiln.json", "{}")
    message = f"cannot write {tmp_path}/runs/x/kiln.json: no space left on the device"
    assert info.value.message == message


# --- JSON: what Python cannot hold is one line, never a crash -----------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (DEEP, "nested too deeply"),
        (
            '{"a": ' + "1" * 5000 + "}",
            "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits",
        ),
        (
            bytes(range(128, 256)),
            "'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte",
        ),
    ],
)
def test_json_python_cannot_hold_is_a_value_error_of_one_line(text, why):
    with pytest.raises(files.NotJson) as info:
        files.loads(text)
    assert str(info.value) == why


def test_nan_is_json_only_where_kiln_reads_others_json():
    """Python's json writes NaN; Kiln's own files (json_text) never hold one."""
    assert files.loads('{"x": NaN}')["x"] != files.loads('{"x": NaN}')["x"]  # a float NaN
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(files.NotJson, match=f"^{constant} is not a JSON value$"):
            files.loads(f'{{"x": {constant}}}', strict=True)


def test_text_cut_short_stays_jsons_own_error():
    with pytest.raises(files.json.JSONDecodeError):
        files.loads('{"a": ')


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (DEEP, "not JSON Kiln can read (nested too deeply)"),
        ('{"a": NaN}', "not JSON Kiln can read (NaN is not a JSON value)"),
        ('{"a": ', "not JSON Kiln can read (Expecting value: line 1 column 7 (char 6))"),
        (None, "cannot read: a FIFO, not a regular file"),
        ("x" * 11, "cannot read: over 10 bytes (Kiln's limit for a file)"),
    ],
)
def test_a_json_file_is_read_by_the_file_rules_or_named_in_one_line(tmp_path, content, why):
    path = tmp_path / "state.json"
    if content is None:
        os.mkfifo(path)
    else:
        path.write_text(content)
    with pytest.raises(InputError) as info:
        files.read_json(path, limit=10 if why.startswith("cannot read: over") else None)
    assert info.value.message == f"{path}: {why}"


def test_the_lock_file_is_never_a_fifo_and_its_holder_never_a_crash(tmp_path, monkeypatch):
    """The lock's holder is read only to say who holds it: a list or nesting past
    Python's limit there reads as nobody; a FIFO in the lock's place is refused."""
    from kiln import lock

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    inventory = tmp_path / "inv"
    path = lock.lock_file(inventory)
    path.parent.mkdir(parents=True)
    for holder in ("[1, 2]", DEEP, '{"pid": NaN}'):
        path.write_text(holder)
        assert "(starting)" in lock._held_by(inventory, path).message
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(InputError) as info, lock.held(inventory, "kiln site"):
        pass
    assert info.value.message == f"{path}: cannot read: a FIFO, not a regular file"


def test_what_a_node_brought_back_is_read_as_json_or_named_in_one_line():
    """kiln.run.gather: the files a playbook brings back (a rollout's look at Slurm,
    `kiln health --schedule`, `kiln nccl show`, an accounting dump)."""
    from kiln.run.events import RunSummary
    from kiln.run.gather import Gathered

    gathered = Gathered(RunSummary("20261123-120000-x-abcd", "x.yml", "successful"))
    gathered.texts = {"ctl1": '{"states": ""}', "ctl2": DEEP, "ctl3": '{"a": '}
    assert gathered.json("ctl1") == {"states": ""}
    for node, why in [("ctl2", "nested too deeply"), ("ctl3", "Expecting value: line 1 column 7")]:
        with pytest.raises(KilnError) as info:
            gathered.json(node)
        assert info.value.exit_code == ExitCode.HOSTS_FAILED
        assert info.value.message.startswith(
            f"{node}: what it brought back is not JSON Kiln can read ({why}"
        )
        assert info.value.message.endswith("(kiln runs show 20261123-120000-x-abcd)")


def test_a_lab_plan_that_is_no_file_or_no_plan_is_one_line(tmp_path, monkeypatch):
    from kiln.lab import cluster

    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    plan = paths.lab_state_dir("lab1") / "lab.json"
    plan.parent.mkdir(parents=True)
    for text, why in [
        ("[1]", "not a lab Kiln wrote (TypeError: list indices must be integers or slices"),
        ('{"name": "lab1"}', "not a lab Kiln wrote (KeyError: 'nodes')"),
        (DEEP, "not JSON Kiln can read (nested too deeply)"),
    ]:
        plan.write_text(text)
        with pytest.raises(InputError) as info:
            cluster.load_plan("lab1")
        assert info.value.message.startswith(f"{plan}: {why}")
