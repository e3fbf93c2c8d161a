"""What the repair loop keeps on the controller: its history (one JSON line per action:
node, time, class, step, outcome, evidence path) and the circuit breaker's state file
(`kiln repair reset` removes it).

Fail closed: a history line that cannot be read stops the decision for every node
(RecordError), and a breaker file that cannot be read counts as an open breaker."""

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone

# What became of a step: a repair step done or failed, a reboot asked of Slurm
# (started: done once the node is back), a re-check passed or failed, an alert raised,
# a step that could not run while the next one can (a restart by ssh, repair_ssh off,
# before the BMC's power cycle).
OUTCOMES = ("done", "failed", "started", "passed", "alerted", "skipped")


class RecordError(ValueError):
    """A record that cannot be read or written; the message is one line."""


@dataclass(frozen=True)
class Entry:
    node: str
    time: float  # seconds since the epoch
    cls: str
    step: str  # a repair step (kiln_node.repair_classes.STEPS), recheck, return, rma, alert
    outcome: str
    evidence: str = ""  # the evidence bundle's path, where one was collected
    detail: str = ""

    def json(self) -> str:
        stamp = datetime.fromtimestamp(self.time, timezone.utc).isoformat(timespec="seconds")
        return json.dumps(
            {"node": self.node, "time": stamp, "class": self.cls, "step": self.step,
             "outcome": self.outcome, "evidence": self.evidence, "detail": self.detail}
        )  # fmt: skip


def _entry(line: str) -> Entry:
    record = json.loads(line)
    if record["outcome"] not in OUTCOMES:
        raise ValueError(f"outcome {record['outcome']!r} is not one of {', '.join(OUTCOMES)}")
    return Entry(
        str(record["node"]),
        datetime.fromisoformat(record["time"]).timestamp(),
        str(record["class"]),
        str(record["step"]),
        record["outcome"],
        str(record.get("evidence", "")),
        str(record.get("detail", "")),
    )


def read_history(path: str) -> list[Entry]:
    """Every entry, oldest first; none when the file does not exist yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RecordError(f"repair history {path}: {exc.strerror}") from exc
    return parse_history(text, path)


def parse_history(text: str, where: str) -> list[Entry]:
    """The history file's text (`kiln repair history` reads it as the controller sent
    it); `where` names it in errors."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(_entry(line))
        except (ValueError, KeyError, TypeError) as exc:
            why = f"repair history {where} line {number}: not a record ({exc})"
            raise RecordError(why) from exc
    return entries


def append_history(path: str, entry: Entry) -> None:
    """One line, written with one append (O_APPEND), so entries of two runs never mix."""
    if entry.outcome not in OUTCOMES:
        raise RecordError(f"outcome {entry.outcome!r} is not one of {', '.join(OUTCOMES)}")
    data = (entry.json() + "\n").encode()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(descriptor, data)
        finally:
            os.close(descriptor)
    except OSError as exc:
        raise RecordError(f"repair history {path}: {exc.strerror}") from exc


# --- the circuit breaker ------------------------------------------------------------


@dataclass(frozen=True)
class Breaker:
    open: bool
    since: float | None = None
    reason: str = ""


def read_breaker(path: str) -> Breaker:
    """No file: closed. A file that cannot be read or is not the breaker's: open, saying
    why (fail closed: the automation stops and alerts until an operator resets it)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_breaker(handle.read(), path)
    except FileNotFoundError:
        return Breaker(False)
    except OSError as exc:
        return Breaker(True, None, f"breaker file {path} unreadable: {exc.strerror}")


def parse_breaker(text: str, where: str) -> Breaker:
    """The breaker file's text: open since when and why; one not the breaker's is open."""
    try:
        record = json.loads(text)
        return Breaker(True, float(record["since"]), str(record["reason"]))
    except (ValueError, KeyError, TypeError) as exc:
        return Breaker(True, None, f"breaker file {where} unreadable: {exc}")


def open_breaker(path: str, now: float, reason: str) -> Breaker:
    """Open it (written whole, then renamed); one already open keeps its first time and
    reason."""
    current = read_breaker(path)
    if current.open and current.since is not None:
        return current
    directory = os.path.dirname(path) or "."
    try:
        with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp") as out:
            json.dump({"since": now, "reason": reason}, out)
        os.replace(out.name, path)
    except OSError as exc:
        raise RecordError(f"breaker file {path}: {exc.strerror}") from exc
    return Breaker(True, now, reason)


def reset_breaker(path: str) -> Breaker:
    """Close it (what `kiln repair reset` does); the state it had."""
    before = read_breaker(path)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    except OSError as exc:
        raise RecordError(f"breaker file {path}: {exc.strerror}") from exc
    return before
