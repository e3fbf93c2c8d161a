"""Running a command with a deadline, as every node program needs: a command that
hangs (a dead mount, a stuck driver) must not hold the program that started it."""

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    rc: int | None  # None when it did not start or ran past its time
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    start_error: OSError | None = None  # why it did not start


def run(argv: list[str], timeout: float, stdin: str | None = None, **options) -> Outcome:
    """The command's outcome; `options` go to Popen (env, user, group...). Past its
    time, its whole process group is killed and not waited for: a process stuck in the
    kernel must not hold the caller."""
    started = time.monotonic()
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            **options,
        )
    except OSError as exc:
        return Outcome(None, "", "", 0.0, start_error=exc)
    try:
        out, err = child.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        return Outcome(None, "", "", round(time.monotonic() - started, 3), timed_out=True)
    return Outcome(child.returncode, out, err, round(time.monotonic() - started, 3))


def stdout(argv: list[str], timeout: float, **options) -> str:
    """The command's stdout when it ran and exited 0; else "" (not installed, failed or
    past its time), for a reader whose field then stays empty."""
    done = run(argv, timeout, **options)
    return done.stdout if done.rc == 0 else ""


def record(argv: list[str], timeout: float, stdin: str | None = None, **options) -> dict:
    """run()'s outcome as the validation probes record it: rc (None when it ran past
    its time, 127 when it did not start), stdout, stderr (stripped), seconds."""
    done = run(argv, timeout, stdin, **options)
    if done.start_error:
        return {"rc": 127, "stdout": "", "stderr": str(done.start_error), "seconds": 0.0}
    if done.timed_out:
        stderr = f"no answer within {timeout:g}s"
        return {"rc": None, "stdout": "", "stderr": stderr, "seconds": done.seconds}
    return {
        "rc": done.rc,
        "stdout": done.stdout,
        "stderr": done.stderr.strip(),
        "seconds": done.seconds,
    }
