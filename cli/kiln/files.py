"""Files at the edge of Kiln: reading what operators give, writing Kiln's own.

Reading: every file Kiln reads, named on a command line (inventories, dumps, nccl-tests
output, profiles, reports, `-e @FILE`) or its own state (run records and their events,
rollout records, the lock's holder), goes through `read_bytes` (`read_text`,
`read_json`). It reads regular files only (a FIFO would block forever, `/dev/zero`
never ends) and at most a bound (MAX_INPUT_BYTES, or the caller's smaller one). Every
JSON Kiln reads, from a file or an answer, is parsed by `loads`: what Python cannot hold
(nesting past its recursion limit, an integer of over 4,300 digits) and NaN are one
line (a ValueError), never a crash.

Writing: records and reports hold node names, reasons and facts from every node: 0600
in a 0700 state directory. A full disk leaves the old file (or none), never a 0-byte
one, and says so in one line.
"""

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Literal

from kiln.errors import ExitCode, InputError, KilnError

# Above the largest file an operator gives Kiln: the ibnetdiscover dump of a 16,384-node
# fabric with 8 rails is 89 MB (docs/topology.md), of 100,000 nodes about 550 MB; a
# hosts.yml listing 1,000,000 hosts with their addresses about 70 MB.
MAX_INPUT_BYTES = 1024 * 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_text(
    path: Path, label: str | None = None, errors: Literal["strict", "replace"] = "strict"
) -> str:
    """A text file Kiln is given, or one line saying why it cannot be read. `errors`:
    "replace" for command output read leniently (a stray byte in a log)."""
    label = label or str(path)
    data = read_bytes(path, label)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not a text file (byte {exc.start} is not UTF-8)") from None


def read_json(path: Path, label: str | None = None, limit: int | None = None) -> Any:
    """A JSON file Kiln wrote itself (at most `limit` bytes), strict (`loads`), or
    InputError naming it and why in one line."""
    label = label or str(path)
    try:
        return loads(read_bytes(path, label, limit), strict=True)
    except ValueError as exc:
        raise InputError(f"{label}: not JSON Kiln can read ({exc})") from None


class NotJson(ValueError):
    """JSON that Kiln cannot read: the message says why, in one line."""


def loads(data: str | bytes, strict: bool = False, **options: Any) -> Any:
    """json.loads, with what Python cannot hold a NotJson (a ValueError) with a one-line
    reason, never a crash: nesting deeper than its recursion allows (RecursionError),
    an integer of over 4,300 digits (int_max_str_digits). `strict`: NaN and Infinity,
    which Python's json writes and JSON has not, are refused too (Kiln's own files,
    written by json_text). Text that is no JSON at all (cut short) stays json's
    JSONDecodeError, a ValueError too."""
    if strict:
        options.setdefault("parse_constant", _no_constant)
    try:
        return json.loads(data, **options)
    except RecursionError:
        raise NotJson("nested too deeply") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # the digits limit, bad UTF-8, a NaN
        raise NotJson(str(exc).split(";")[0].split("\n")[0]) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def read_bytes(path: Path, label: str | None = None, limit: int | None = None) -> bytes:
    """A regular file of at most `limit` bytes (MAX_INPUT_BYTES), or InputError naming
    what it is."""
    label = label or str(path)
    limit = MAX_INPUT_BYTES if limit is None else limit
    try:
        # Refused before it is opened: opening a device can do something (a tape
        # rewinds, a watchdog arms).
        refuse_irregular(os.stat(path).st_mode, label)
        # O_NONBLOCK: should a FIFO be swapped in since, opening it does not wait for a
        # writer, and fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{label}: cannot read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            found = os.fstat(fd)
            refuse_irregular(found.st_mode, label)
            if found.st_size > limit:
                raise InputError(_too_large(label, limit))
            data = handle.read(limit + 1)  # a file that grew since: still bound
        except OSError as exc:
            raise InputError(f"{label}: cannot read: {exc.strerror}") from None
    if len(data) > limit:
        raise InputError(_too_large(label, limit))
    return data


def _irregular(mode: int) -> str:
    """What a file of this mode is when it is not a regular file ("a FIFO"), else ""."""
    return next((kind for test, kind in _KINDS if test(mode)), "")


def refuse_irregular(mode: int, label: str) -> None:
    if kind := _irregular(mode):
        raise InputError(f"{label}: cannot read: {kind}, not a regular file")


def _too_large(label: str, limit: int) -> str:
    units = [
        (unit, 2**power) for unit, power in (("GiB", 30), ("MiB", 20)) if limit % 2**power == 0
    ]
    size = f"{limit // units[0][1]} {units[0][0]}" if units else f"{limit:,} bytes"
    return f"{label}: cannot read: over {size} (Kiln's limit for a file)"


def json_text(data: Any, indent: int | None = 2) -> str:
    """What Kiln writes as JSON for others to read (reports, records, --json): strict
    JSON. Python writes NaN and Infinity, which JSON has not and strict readers refuse;
    the parsers keep them out of every figure (a non-finite measurement is no
    measurement), so one here is a bug: a ValueError (one line, exit 1), never an
    invalid file."""
    return json.dumps(data, indent=indent, allow_nan=False)


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a temporary file, then a rename), mode 0600."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    _write_atomic(path, text)


def output_path(path: Path, option: str = "-o") -> Path:
    """An output file given on the command line, checked before any work is done: its
    directory must exist (a typo there should not make directories), and it must be a
    regular file or none: the file is replaced whole, and replacing a device or a FIFO
    (`-o /dev/null`, as root) would put a plain file in its place."""
    if path.is_dir():
        raise InputError(f"{option} {path}: is a directory; name a file")
    if path.exists() and (kind := _irregular(path.stat().st_mode)):
        raise InputError(f"{option} {path}: {kind}, not a regular file")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise InputError(f"{option} {path}: no directory {parent}")
    return path


def write_output(path: Path, text: str) -> None:
    """Write an output file the operator named (`-o`), whole or not at all, with the
    mode their umask gives a new file; it replaces the file a link points to."""
    target = path.resolve()
    output_path(target)
    _write_atomic(target, text, mode=0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """`text` in a temporary file beside `path` (mkstemp: 0600), then renamed over it."""
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        if temporary:
            Path(temporary).unlink(missing_ok=True)
        raise cannot_write(path, exc) from None


def cannot_write(path: Path, exc: OSError) -> KilnError:
    """The one line for a file Kiln could not write (exit 1)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return KilnError(f"cannot write {path}: no space left on the device", ExitCode.FAILED)
    return KilnError(f"cannot write {path}: {exc.strerror or exc}", ExitCode.FAILED)
