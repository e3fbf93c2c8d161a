#!/usr/bin/env python3
"""Wall time of `kiln drift` on a provisioned lab against a no-op provision (run by hand).

    .venv/bin/python bench/drift.py [--compute N] [--distro RELEASE] [--rounds N]
                                    [--keep]

Brings up a lab named "bench" (separate from the default lab), provisions it, then
runs a no-op `kiln provision` and `kiln drift` in turn, ROUNDS times each (alternating,
so a slow spell of the host falls on both), and prints one JSON object with every
timing, the changed counts and whether drift was found. Takes the lab down unless
--keep. Record the figures in docs/performance.md with the date and the host.
"""

import argparse
import json
import statistics
import sys

from provision import finish, lab_options, lab_up, timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    options = lab_options(parser)
    _, inventory = lab_up(options)
    first_s, first = timed("provision", "-i", inventory, "--json")
    if first.returncode != 0:
        sys.exit(f"first provision failed (exit {first.returncode}): {first.stderr.strip()}")
    figures: dict = {"first_provision_s": round(first_s, 1), "noop_provision_s": [], "drift_s": []}
    for _ in range(options.rounds):
        seconds, run = timed("provision", "-i", inventory, "--json")
        changed = sum(h["changed"] for h in json.loads(run.stdout)["hosts"].values())
        figures["noop_provision_s"].append(round(seconds, 1))
        figures.setdefault("noop_changed", []).append(changed)
        seconds, run = timed("drift", "-i", inventory, "--json")
        figures["drift_s"].append(round(seconds, 1))
        figures.setdefault("drift_exit", []).append(run.returncode)
    noop, drift = (statistics.median(figures[k]) for k in ("noop_provision_s", "drift_s"))
    figures.update(
        median_noop_provision_s=noop,
        median_drift_s=drift,
        drift_over_noop=round(drift / noop, 2),
    )
    finish(options, figures)


if __name__ == "__main__":
    main()
