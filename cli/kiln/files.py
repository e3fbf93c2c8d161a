"""Writing Kiln's own files: whole or not at all, readable by their owner only.

Records and reports hold node names, reasons and facts from every node: 0600 in a
0700 state directory. A full disk leaves the old file (or none), never a 0-byte one,
and says so in one line.
"""

import errno
import os
import tempfile
from pathlib import Path

from kiln.errors import ExitCode, InputError, KilnError


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a temporary file, then a rename), mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            message = f"cannot write {path}: no space left on the device"
            raise KilnError(message, ExitCode.FAILED) from None
        raise KilnError(f"cannot write {path}: {exc.strerror}", ExitCode.FAILED) from None


def read_text(path: Path, label: str | None = None) -> str:
    """A text file Kiln is given, or one line saying why it cannot be read."""
    label = label or str(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not a text file (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read: {exc.strerror}") from None
