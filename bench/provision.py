#!/usr/bin/env python3
"""Wall time of the lab's first provision and of a re-provision (run by hand).

    .venv/bin/python bench/provision.py [--compute N] [--distro trixie|bookworm] [--keep]

Brings up a lab named "bench" (separate from the default lab), provisions it twice,
prints one JSON object with the timings and the changed counts, and takes the lab
down unless --keep. Record the figures in docs/lab.md with the date and the host.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

LAB = "bench"


def kiln(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kiln", *args], capture_output=True, text=True, check=False
    )


def timed(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    result = kiln(*args)
    return time.monotonic() - start, result


def lab_options(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The bench lab's options, shared with the other lab benchmarks."""
    parser.add_argument("--compute", type=int, default=2)
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--keep", action="store_true")
    return parser.parse_args()


def lab_up(options: argparse.Namespace) -> tuple[float, str]:
    """Bring up the bench lab: seconds it took and its inventory."""
    up_s, up = timed(
        "lab", "up", "--name", LAB, "--compute", str(options.compute), "--distro", options.distro
    )
    if up.returncode != 0:
        sys.exit(f"lab up failed: {up.stderr.strip()}")
    return up_s, up.stdout.strip().splitlines()[-1].removeprefix("inventory: ")


def finish(options: argparse.Namespace, figures: dict) -> None:
    """Take the lab down (unless --keep) and print the figures with the machine's."""
    if not options.keep:
        kiln("lab", "down", "--name", LAB)
    figures.update(
        nodes=options.compute + 2,
        distro=options.distro,
        cpus=os.cpu_count(),
        host=platform.platform(),
    )
    print(json.dumps(figures, indent=2))


def main() -> None:
    options = lab_options(argparse.ArgumentParser())
    up_s, inventory = lab_up(options)
    figures = {"lab_up_s": round(up_s, 1)}
    for label in ("first_provision", "reprovision"):
        seconds, run = timed("provision", "-i", inventory, "--json")
        report = json.loads(run.stdout)
        figures[f"{label}_s"] = round(seconds, 1)
        figures[f"{label}_changed"] = sum(h["changed"] for h in report["hosts"].values())
        figures[f"{label}_exit"] = run.returncode
    finish(options, figures)


if __name__ == "__main__":
    main()
