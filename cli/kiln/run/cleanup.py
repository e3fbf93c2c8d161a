"""Stop what a canceled run left behind.

ansible-runner cancels a run by killing the process group of ansible-playbook, but
ansible-core's task workers start sessions of their own (setsid), so they, and the
commands they run on a local connection, outlive it. Every process of a run carries
KILN_RUN=<run id> in its environment; this finds them by it and stops them.
"""

import contextlib
import os
import signal
import time
from pathlib import Path

MARKER = "KILN_RUN"


def processes_of(run_id: str, proc: Path = Path("/proc")) -> list[int]:
    wanted = f"{MARKER}={run_id}".encode()
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def stop(run_id: str, grace_s: float = 3.0) -> list[int]:
    """SIGTERM every process of the run, then SIGKILL what is left; returns the pids."""
    pids = processes_of(run_id)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and processes_of(run_id):
        time.sleep(0.1)
    for pid in processes_of(run_id):
        _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
