#!/usr/bin/env python3
"""Kiln's execution environment, built and run: the collection's site playbook from the
image, through ansible-navigator, against a lab (run by hand).

    .venv/bin/python bench/execution_environment.py [--inventory PATH] [--no-build]
                                   [--compute N] [--distro RELEASE] [--keep]

Builds the EE's base image (`kiln lab image --ee-base`, debootstrap), the collection and
the kiln wheel (`make collection`) and the image kiln-ee:VERSION (ansible-builder),
timing each; --no-build uses the images already there. Then, on the lab at --inventory
(a lab's hosts.yml), or else on a lab named "bench" it brings up (as bench/provision.py
does), runs `ansible-navigator run kiln.cluster.site` with the image as its execution
environment twice, and prints one JSON object: the build times, the image's size, each
run's wall time and changed tasks per host, and whether the second run changed nothing.
Takes a lab it brought up down unless --keep. Record the figures in docs/ansible.md
with the date and the host.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provision import finish, lab_options, lab_up, timed

import kiln
from kiln import paths

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
IMAGE = f"localhost/kiln-ee:{kiln.__version__}"
# The operator's own connection settings, as an AWX job template has them (the same
# as tests/e2e/test_lab.py's parity run), and the callback docs/ansible.md recommends.
ANSIBLE_SETTINGS = {
    "ANSIBLE_PIPELINING": "True",
    "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s",
    "ANSIBLE_FORKS": "8",
    "ANSIBLE_CALLBACKS_ENABLED": "kiln.cluster.preload_filters",
}
EVENT_MARKER = re.compile(r"\x1b\[K(?:[A-Za-z0-9+/=]*\x1b\[\d+D\x1b\[K)?")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run_timed(argv: list[str], what: str) -> float:
    """Run a build step; its seconds. A failed step ends the bench with its output's tail."""
    start = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    return time.monotonic() - start


def build(context: Path) -> dict:
    """The base image, the collection and the EE image, each timed."""
    base_s, base = timed("lab", "image", "--ee-base", "--rebuild")
    if base.returncode != 0:
        sys.exit(f"EE base image failed: {base.stderr.strip()}")
    collection_s = run_timed(["make", "collection"], "make collection")
    builder = [str(VENV_BIN / "ansible-builder"), "build", "-f", "execution-environment.yml"]
    builder += ["--context", str(context), "--container-runtime", "podman", "-t", IMAGE]
    ee_s = run_timed(builder, "ansible-builder build")
    return {
        "base_image_s": round(base_s, 1),
        "collection_s": round(collection_s, 1),
        "ee_image_s": round(ee_s, 1),
    }


def image_size_mb() -> float:
    size = subprocess.run(
        ["podman", "image", "inspect", IMAGE, "--format", "{{.Size}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return round(int(size.stdout) / 1e6, 1)


def local_sources(inventory: Path) -> set[Path]:
    """The folders of file:// download URLs in the inventory's variables (the lab's
    stand-ins for enroot, pyxis...): the roles fetch them on the control node, the EE."""
    found = set()
    for path in inventory.rglob("*.yml"):
        for url in re.findall(r"file://(/[^\s'\"]+)", path.read_text()):
            source = Path(url)
            found.add(source if source.is_dir() else source.parent)
    return found


def navigator_command(inventory: Path, state_dir: Path, log: Path) -> list[str]:
    """ansible-navigator running the site playbook in the image: on the host's network
    (the lab's addresses are on a podman network of the host), as root (the lab key and
    the state directory are root's, 0600/0700), with the state directory (the lab's key,
    the download cache) and the inventory's local download sources mounted at their own
    paths; navigator mounts the inventory's directory itself."""
    argv = [str(VENV_BIN / "ansible-navigator"), "run", "kiln.cluster.site", "-i", str(inventory)]
    argv += ["--ee", "true", "--eei", IMAGE, "--ce", "podman", "--pull-policy", "never"]
    argv += ["--mode", "stdout", "--dc", "false", "--pae", "false", "--lf", str(log)]
    argv += ["--co=--net=host", "--co=--user=0"]
    folder = inventory if inventory.is_dir() else inventory.parent
    mounts = {state_dir} - {folder} | local_sources(folder)
    for mount in sorted(mounts):
        argv += ["--eev", f"{mount}:{mount}:ro" if mount != state_dir else f"{mount}:{mount}"]
    for name in (*ANSIBLE_SETTINGS, "KILN_STATE_DIR"):
        argv += ["--penv", name]  # --senv cannot carry a value with spaces or "="
    return argv


def navigator_env(state_dir: Path) -> dict[str, str]:
    """The environment the --penv names pass into the EE."""
    return {**os.environ, **ANSIBLE_SETTINGS, "KILN_STATE_DIR": str(state_dir)}


def site_run(argv: list[str], env: dict[str, str], label: str) -> dict:
    """One run: its seconds and changed tasks per host; a failed run ends the bench."""
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=3600)
    seconds = time.monotonic() - start
    # ansible-runner's event markers (escape sequences) sit between the lines.
    out = EVENT_MARKER.sub("", done.stdout)
    recap = {host: (int(c), int(u), int(f)) for host, c, u, f in RECAP.findall(out)}
    if done.returncode != 0 or not recap:
        sys.exit(f"{label} failed (exit {done.returncode}): {(done.stdout + done.stderr)[-3000:]}")
    return {"s": round(seconds, 1), "changed": {host: c for host, (c, _, _) in recap.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inventory", type=Path, help="an existing lab's hosts.yml")
    parser.add_argument("--no-build", action="store_true", help="use the images already built")
    options = lab_options(parser)
    if not Path("/dev/mqueue").is_dir():
        # Checked by ansible-navigator before it starts an EE with podman.
        sys.exit(
            "ansible-navigator needs /dev/mqueue:"
            " mkdir /dev/mqueue && mount -t mqueue mqueue /dev/mqueue"
        )
    with tempfile.TemporaryDirectory(prefix="kiln-ee-") as tmp:
        figures: dict = {"image": IMAGE}
        if not options.no_build:
            figures["build"] = build(Path(tmp) / "context")
        figures["image_mb"] = image_size_mb()
        if options.inventory:
            inventory = options.inventory.resolve()
            options.keep = True  # not ours to take down
        else:
            up_s, hosts = lab_up(options)
            figures["lab_up_s"] = round(up_s, 1)
            inventory = Path(hosts)
        state_dir = paths.state_dir().resolve()
        argv = navigator_command(inventory, state_dir, Path(tmp) / "nav.log")
        figures["command"] = " ".join(argv)
        env = navigator_env(state_dir)
        first = site_run(argv, env, "first run")
        second = site_run(argv, env, "second run")
    figures.update(
        first=first,
        second=second,
        second_changed_nothing=set(second["changed"].values()) == {0},
        nodes=len(first["changed"]),
    )
    finish(options, figures)


if __name__ == "__main__":
    main()
