#!/usr/bin/env python3
"""A compute node booted from a Kiln-built image against a raw one: the first provision
of each when it is added to a provisioned cluster (issue 63 item 4, run by hand).

    .venv/bin/python bench/image.py [--compute N] [--distro RELEASE] [--keep]

In one run, on a lab named "bench": the lab of N compute nodes (default 2) brought up
and provisioned; `kiln image build` from its inventory (on its network, where its apt
proxy answers); then one compute node added raw (`kiln lab up --compute N+1`) and one
from the image (`kiln lab up --compute N+2 --image TAG`), each provisioned as docs/
slurm.md adds a node (`kiln provision --limit 'slurm_controller:NODE'`). Prints one JSON
object: each add's wall time, the control machine's CPU (as bench/provision.py splits
it), the changed counts on the new node, the image node's changed tasks by name, the
ratio image / raw (issue 63's target: at most 0.25), the image run's ten slowest tasks,
what the image node booted with (its image, a machine-id and SSH host key of its own),
and `kiln drift` on the image node (nothing to change: exit 0). Takes the lab down and
removes the image unless --keep. Record the figures in docs/performance.md.
"""

import argparse
import json
import subprocess
import sys
import tempfile

from provision import (
    FIXED_NODES,
    LAB,
    finish,
    kiln,
    lab_options,
    lab_up,
    measured,
    on_node,
    per_host,
)

from kiln.run import record
from kiln.run.events import RESULT_EVENTS

TAG = "localhost/kiln-image:bench"


def on_host(run: str, host: str) -> tuple[list[str], float]:
    """The names of the tasks that changed something on HOST in RUN, in run order, and
    the seconds HOST's task results took, summed (its share of the run, without the
    controllers' tasks the run also holds)."""
    kept, run_dir = record.find(run)
    names, seconds = [], 0.0
    for event in record.load_events(run_dir, record=kept):
        data = event.get("event_data") or {}
        if data.get("host") != host or event.get("event") not in RESULT_EVENTS:
            continue
        seconds += float(data.get("duration") or 0.0)
        if event.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            role = data.get("role")
            names.append(f"{role} : {data.get('task')}" if role else str(data.get("task")))
    return names, seconds


def add_node(inventory: str, node: str, label: str) -> dict:
    """`kiln provision` of the controllers and NODE, as a node is added (docs/slurm.md)."""
    seconds, cpu, run = measured(
        "provision", "-i", inventory, "--limit", f"slurm_controller:{node}", "--json"
    )
    if run.returncode != 0:
        sys.exit(f"{label} failed (exit {run.returncode}): {run.stderr.strip()[-500:]}")
    report = json.loads(run.stdout)
    changed, node_s = on_host(report["run"], node)
    return {
        "run": report["run"],
        "wall_s": round(seconds, 1),
        "cpu_s": {key: round(value, 2) for key, value in cpu.items()},
        "cpu_per_host_s": per_host(cpu, len(report["hosts"])),
        "changed": {host: counts["changed"] for host, counts in report["hosts"].items()},
        "changed_tasks": changed,
        "node_task_s": round(node_s, 1),
    }


def booted(node: str) -> dict:
    """What the node booted with: its image (podman's), its machine-id and host key."""
    image = subprocess.run(
        ["podman", "inspect", "--format", "{{.ImageName}}", node],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    short = node.removeprefix(f"{LAB}-")
    return {
        "image": image,
        "machine_id": on_node(short, "cat /etc/machine-id").stdout.strip(),
        "host_key": on_node(
            short, "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
        ).stdout.split()[1:2],
        "keygen": on_node(short, "systemctl show -P Result kiln-ssh-keygen").stdout.strip(),
    }


def slowest(run: str) -> list[dict]:
    shown = kiln("runs", "show", run, "--slowest", "10", "--json")
    return json.loads(shown.stdout).get("slowest", []) if shown.returncode == 0 else []


def progress(figures: dict) -> None:
    """The figures so far, on stderr: a bench that stops half way keeps what it measured."""
    print(json.dumps(figures), file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    options = lab_options(parser)
    compute = options.compute
    _, inventory = lab_up(options, compute)
    first_s, first_cpu, run = measured("provision", "-i", inventory, "--json")
    if run.returncode != 0:
        sys.exit(f"first provision failed (exit {run.returncode}): {run.stderr[-500:]}")
    figures: dict = {
        "first_provision": {
            "nodes": compute + FIXED_NODES,
            "wall_s": round(first_s, 1),
            "cpu_s": {key: round(value, 2) for key, value in first_cpu.items()},
        }
    }
    progress(figures)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-image-") as out:
        build_s, build_cpu, built = measured(
            "image", "build", "-i", inventory, "-o", out, "--network", f"kiln-{LAB}",
            "--tag", TAG, "--json",
        )  # fmt: skip
    if built.returncode != 0:
        sys.exit(f"image build failed (exit {built.returncode}): {built.stderr[-500:]}")
    manifest = json.loads(built.stdout)["manifest"]
    figures["image_build"] = {
        "wall_s": round(build_s, 1),
        "cpu_s": {key: round(value, 2) for key, value in build_cpu.items()},
        "image": manifest["image"],
    }

    raw, from_image = (f"{LAB}-compute{n:02d}" for n in (compute + 1, compute + 2))
    up_s, _ = lab_up(options, compute + 1)
    figures["raw"] = {"node": raw, "lab_up_s": round(up_s, 1), **booted(raw)}
    figures["raw"].update(add_node(inventory, raw, f"provision of the raw {raw}"))
    progress(figures)
    up_s, _ = lab_up(options, compute + 2, "--image", TAG)
    figures["image"] = {"node": from_image, "lab_up_s": round(up_s, 1), **booted(from_image)}
    figures["image"].update(add_node(inventory, from_image, f"provision of {from_image}"))
    figures["image"]["slowest"] = slowest(figures["image"]["run"])

    progress(figures)
    drift = kiln("drift", "-i", inventory, "--limit", from_image, "--json")
    drifted = json.loads(drift.stdout) if drift.stdout.strip() else {}
    figures["drift_on_image_node"] = {
        "exit": drift.returncode,
        "drift": drifted.get("drift"),
        "unchecked": drifted.get("unchecked"),
        "tasks": {h: [t["task"] for t in ts] for h, ts in drifted.get("hosts", {}).items()},
        "stderr": drift.stderr.strip()[-300:],
    }
    figures["ratio_image_over_raw"] = {
        "wall": round(figures["image"]["wall_s"] / figures["raw"]["wall_s"], 3),
        "node_task_s": round(
            figures["image"]["node_task_s"] / max(figures["raw"]["node_task_s"], 0.1), 3
        ),
        "kiln_cpu": round(
            figures["image"]["cpu_s"]["kiln_s"] / figures["raw"]["cpu_s"]["kiln_s"], 3
        ),
        "total_cpu": round(
            figures["image"]["cpu_s"]["total_s"] / figures["raw"]["cpu_s"]["total_s"], 3
        ),
    }
    figures["nodes"] = compute + 2 + FIXED_NODES
    if not options.keep:
        subprocess.run(["podman", "rmi", "--force", TAG], capture_output=True, check=False)
    finish(options, figures)


if __name__ == "__main__":
    main()
