#!/usr/bin/env python3
"""Time from a fault to drained and from a fault to back in service (or RMA), with no
person acting, on a lab with the repair loop on (run by hand; issue 61).

    .venv/bin/python bench/repair.py [--compute N] [--distro RELEASE] [--rounds N] [--keep]

Brings up a lab named "bench", turns the repair loop on (group_vars/all/repair.yml: a
cap of one node, RMA after two failed repairs, 20 s between rounds), provisions it,
then ROUNDS times on the first compute node: stops autofs and waits until Slurm's run
of kiln-health drains it and kiln-repair returns it; stops munged, then hangs slurmd
(SIGSTOP), each until Slurm sets it DOWN (SlurmdTimeout, 30 s in the lab) and kiln-repair
restarts them by ssh and returns it; once, a full disk (a 1 MiB tmpfs over
/var/lib/enroot) until it reaches RMA. Prints one JSON object with every timing.
Takes the lab down unless --keep. Record the figures in docs/health.md ("Repair").
"""

import argparse
import time
from pathlib import Path

import yaml
from provision import finish, lab_options, lab_up, nodes, on_node, timed

SETTINGS = {"repair_enabled": True, "repair_max_unavailable": 1, "repair_rma_after": 2,
            "repair_retry_after_s": 20, "repair_dcgm_level": 0, "repair_minutes": 5,
            "repair_ssh": True}  # fmt: skip
IN_SERVICE = ("DRAIN", "MAINT", "DOWN", "NOT_RESPONDING")


def reason_and_state(node: str) -> tuple[str, str]:
    line = on_node("controller", f"scontrol --oneliner show node {node}").stdout
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    reason = line.split("Reason=", 1)[1] if "Reason=" in line else ""
    return fields.get("State", "UNKNOWN"), reason


def wait(node: str, done, limit: float) -> float:
    """When done(state, reason) held, polled every 2 s; past `limit` seconds, stop."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if done(*reason_and_state(node)):
            return time.monotonic()
        time.sleep(2)
    raise SystemExit(f"{node}: not there after {limit:.0f} s: {reason_and_state(node)}")


def fault(node: str, inject: str, detected, end, limit: float) -> dict:
    broken = time.monotonic()
    on_node(node, inject)
    seen = wait(node, detected, 150)
    ended = wait(node, end, limit)
    return {"to_detected_s": round(seen - broken, 1), "to_end_s": round(ended - broken, 1)}


def back(state: str, reason: str) -> bool:
    return not any(flag in state for flag in IN_SERVICE)


def silent(state: str, reason: str) -> bool:
    return "DOWN" in state or "NOT_RESPONDING" in state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    options = lab_options(parser)
    _, inventory = lab_up(options)
    group_vars = Path(inventory).parent / "group_vars" / "all"
    (group_vars / "repair.yml").write_text(yaml.safe_dump(SETTINGS))
    seconds, run = timed("provision", "-i", inventory)
    if run.returncode != 0:
        raise SystemExit(f"provision failed (exit {run.returncode}): {run.stderr.strip()}")
    node = next(n for n in nodes(inventory) if "compute" in n)
    figures: dict = {"provision_s": round(seconds, 1), "mount": [], "munge": [], "slurmd": [],
                     "disk": None}  # fmt: skip
    for _ in range(options.rounds):
        figures["mount"].append(
            fault(node, "systemctl stop autofs; umount -l /shared 2>/dev/null; true",
                  lambda s, r: "DRAIN" in s and r.startswith("kiln-health: mounts:"), back, 300)
        )  # fmt: skip
        figures["munge"].append(fault(node, "pkill -TERM -x munged", silent, back, 300))
        figures["slurmd"].append(fault(node, "pkill -STOP -x slurmd", silent, back, 300))
    figures["disk"] = fault(node, "mount -t tmpfs -o size=1m bench /var/lib/enroot",
                            lambda s, r: "DRAIN" in s and r.startswith("kiln-health: free_space:"),
                            lambda s, r: r.startswith("kiln-rma:"), 300)  # fmt: skip
    on_node(node, "umount /var/lib/enroot")
    finish(options, figures)


if __name__ == "__main__":
    main()
