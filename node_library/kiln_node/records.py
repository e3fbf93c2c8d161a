"""The validate role's records of a run, written on the node where each is made (the
first controller, or a node under test) by this one program, then brought back to the
control node (roles/validate/tasks/bring.yml, collect.yml). Each file is JSON, private
(0600), written whole beside itself and renamed, so a reader never sees half a record.
kiln.validation.results owns their names and reads them.

    write   a record given as a JSON object on stdin (it may be large: a plan of every
            node), over the file, or merged into what it holds (--merge)
    note    one text (after --) under --name, merged into the file
    run     run a command (after --) and record its stdout, a JSON object, merged with
            --json; exits with the command's status, so that a failed launcher fails
            its task
    step    run an srun step (after --) and record how it ended (`step`) under --name,
            merged into the file (the other steps' outcomes and notes stay)
    munge   decode the controller's credential (on stdin) with unmunge, and record the
            outcome (rc and unmunge's STATUS line, or its error)

Run as `python3 -m kiln_node.records` beside the node library.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from kiln_node import commands

# How much of a failed step's stderr the report keeps (its last lines say why).
STDERR_TAIL = 2000
# srun steps end by their own --time; this only keeps a lost step from holding the run.
STEP_TIMEOUT_S = 7 * 86400
MUNGE_TIMEOUT_S = 30


def step(rc: int | None, stderr: str) -> dict:
    """How an srun step ended, as the report needs it (results.Step)."""
    return {"rc": rc, "stderr": (stderr or "")[-STDERR_TAIL:]}


def write(path: str, record: dict, merge: bool = True) -> dict:
    """`record` into the file at `path` (over what it held, when `merge`), made private
    and whole; the record written."""
    target = Path(path)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    held = read(target) if merge else {}
    whole = {**held, **record}
    partial = target.with_name(f".{target.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(whole, handle, sort_keys=True)
    partial.replace(target)
    return whole


def read(path: Path) -> dict:
    """A record written before; {} where there is none or it is no JSON object."""
    try:
        held = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return held if isinstance(held, dict) else {}


def munge_outcome(credential: str, timeout: float = MUNGE_TIMEOUT_S) -> dict:
    """unmunge's verdict on the controller's credential: its exit status and its STATUS
    line (else its error), as results.Munge reads it."""
    done = commands.record(["unmunge"], timeout, stdin=credential)
    lines = [line for line in done["stdout"].splitlines() if line.startswith("STATUS:")]
    return {"rc": done["rc"], "status": lines[0] if lines else done["stderr"]}


def _run(args: argparse.Namespace) -> int:
    done = commands.record(args.command, STEP_TIMEOUT_S)
    try:
        printed = json.loads(done["stdout"])
    except ValueError:
        printed = None
    if isinstance(printed, dict):
        write(args.out, {**printed, **json.loads(args.json)}, merge=False)
    sys.stderr.write(done["stderr"])
    return 1 if done["rc"] is None else done["rc"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["write", "note", "run", "step", "munge"])
    parser.add_argument("--out", required=True, help="the record's file on this node")
    parser.add_argument("--merge", action="store_true", help="write: keep what it holds")
    parser.add_argument("--json", default="{}", help="run: a JSON object to add")
    parser.add_argument("--name", default="", help="note, step: the key in the record")
    given = sys.argv[1:] if argv is None else list(argv)
    # Everything after the first -- is the text or the command, as it is.
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    args.command = given[cut + 1 :]
    if args.action == "write":
        write(args.out, json.loads(sys.stdin.read()), merge=args.merge)
    elif args.action == "note":
        write(args.out, {args.name: " ".join(args.command)})
    elif args.action == "run":
        return _run(args)
    elif args.action == "step":
        done = commands.record(args.command, STEP_TIMEOUT_S)
        write(args.out, {args.name: step(done["rc"], done["stderr"])})
    else:
        write(args.out, munge_outcome(sys.stdin.read()), merge=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
