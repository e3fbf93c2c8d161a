"""What every check of kiln-health shares: its one-line result, the program's deadline
(slurmd kills its HealthCheckProgram after 60 s), and commands run within it."""

import os
import time
from dataclasses import dataclass

from kiln_node import commands


@dataclass
class Result:
    check: str
    status: str  # OK, WARN or FAIL
    reason: str

    def line(self) -> str:
        return f"{self.status} {self.check}: {self.reason}"


class Deadline:
    """Time left for the whole program; each command gets the smaller of its own limit
    and what is left."""

    def __init__(self, total: float, per_command: float):
        self.end = time.monotonic() + total
        self.per_command = per_command

    def budget(self) -> float:
        return max(0.1, min(self.per_command, self.end - time.monotonic()))


class CommandFailed(Exception):
    def __init__(self, argv: list[str], reason: str, returncode: int | None = None, out=""):
        super().__init__(f"{os.path.basename(argv[0])}: {reason}")
        self.returncode = returncode
        self.stdout = out


def run(argv: list[str], deadline: Deadline, stdin: str | None = None) -> str:
    """The command's stdout; CommandFailed when it fails, cannot start or runs past its
    time (kiln_node.commands: then its process group is killed, not waited for)."""
    limit = deadline.budget()
    done = commands.run(argv, limit, stdin)
    if done.start_error:
        raise CommandFailed(argv, done.start_error.strerror or str(done.start_error))
    if done.timed_out:
        raise CommandFailed(argv, f"no answer within {limit:.0f}s")
    if done.rc != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.rc}"])[-1]
        raise CommandFailed(argv, last, done.rc, done.stdout)
    return done.stdout


def check_mounts(config: dict, deadline: Deadline) -> list[Result]:
    """The shared mounts, through kiln-mount-check (kiln-health and kiln-prolog)."""
    try:
        run([config["mount_check"], "--timeout", str(int(deadline.per_command / 2))], deadline)
    except CommandFailed as exc:
        # kiln-mount-check exits 1 with a `FAIL NAME PATH: reason` line per bad mount.
        failing = [line[5:] for line in exc.stdout.splitlines() if line.startswith("FAIL ")]
        return [Result("mounts", "FAIL", "; ".join(failing) if failing else str(exc))]
    return [Result("mounts", "OK", "shared mounts answer")]
