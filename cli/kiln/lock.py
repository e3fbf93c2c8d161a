"""One run at a time per inventory: two `kiln provision` (or `validate`) on one cluster
would run dpkg twice at once and restart each other's daemons.

The lock is a file in the state directory held with flock(2) for the life of the
command, so a killed run never leaves it stale; the file says who holds it.
"""

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from kiln import files, paths
from kiln.errors import ExitCode, InputError, KilnError
from kiln.files import cannot_write


class Lock:
    """A held lock; `running` records the run id once the run has one."""

    def __init__(self, fd: int, path: Path, holder: dict[str, object]) -> None:
        self._fd = fd
        self._path = path
        self._holder = holder
        self._write()

    def running(self, run_id: str) -> None:
        self._holder["run"] = run_id
        self._write()

    def _write(self) -> None:
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(self._holder).encode(), 0)
        except OSError as exc:  # a full disk
            raise cannot_write(self._path, exc) from None


# Who holds the lock: a few fields of JSON.
HOLDER_BYTES = 64 * 1024


def lock_file(inventory: Path) -> Path:
    digest = hashlib.sha256(str(inventory.absolute()).encode()).hexdigest()[:16]
    return paths.state_dir() / "locks" / f"inventory-{digest}.lock"


@contextlib.contextmanager
def held(inventory: Path, command: str) -> Iterator[Lock]:
    """Hold the inventory's lock, or fail at once (exit 7) saying who holds it."""
    path = lock_file(inventory)
    with contextlib.suppress(FileNotFoundError):  # a device is refused before it is opened
        files.refuse_irregular(os.stat(path).st_mode, str(path))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # O_NONBLOCK: a FIFO put in its place since opens without waiting, and is refused.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY, 0o600)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    try:
        files.refuse_irregular(os.fstat(fd).st_mode, str(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _held_by(inventory, path) from None
        holder = {
            "pid": os.getpid(),
            "command": command,
            "inventory": str(inventory.absolute()),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            yield Lock(fd, path, holder)
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing releases the flock


def _held_by(inventory: Path, path: Path) -> KilnError:
    try:
        holder = files.loads(files.read_bytes(path, limit=HOLDER_BYTES) or b"{}", strict=True)
    except (InputError, ValueError):  # no file, not a regular file, not JSON
        holder = {}
    if not isinstance(holder, dict):
        holder = {}
    who = ", ".join(f"{key} {holder[key]}" for key in ("pid", "run", "started") if holder.get(key))
    command = holder.get("command", "another kiln command")
    return KilnError(
        f"{inventory}: {command} is running on this inventory ({who or 'starting'}); "
        "wait for it to end",
        ExitCode.LOCKED,
    )
