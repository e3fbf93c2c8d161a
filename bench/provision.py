#!/usr/bin/env python3
"""Wall time of the lab's first provision and of a no-op re-provision, against the time
`apt-get install` takes for the same packages, how both grow with the lab, and the
control machine's CPU seconds per host (run by hand).

    .venv/bin/python bench/provision.py [--compute N] [--distro RELEASE]
                                        [--sizes 8,16] [--no-apt] [--keep]
                                        [--slices 1,2,4]

Brings up a lab named "bench" (separate from the default lab) of N compute nodes (lab
nodes: N + a controller and a storage node), provisions it twice and, unless --no-apt,
takes it down and up again to time plain `apt-get update && apt-get install` of the
packages the first provision added, on every node at once, through the same apt cache.
--sizes (lab nodes) then times a first and a no-op provision on a lab of each size: the
growth curve, from the first lab's size. --slices then re-provisions the first lab
unsliced and in each number of slices (`kiln provision --slices N`), each followed by
`kiln drift`, which must find nothing (the same end state); issue 63's figure is
`--compute 14 --no-apt --slices 1,2,4` (16 lab nodes). Prints one JSON object: the timings, the
changed counts, issue 19's three ratios and, for every provision, the control machine's
CPU seconds (`kiln` and all it started: ansible-playbook, its workers, Mitogen's
processes, ssh) split into Kiln's own process, ansible-playbook's main process (the
strategy and result processing: one core, whatever the forks) and the rest (workers),
per host. The lab's nodes are containers, not children of `kiln`: their CPU is not
counted. Takes the lab down unless --keep. Record the figures in docs/performance.md
with the date and the host.
"""

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

LAB = "bench"
# Lab nodes besides the compute nodes: the controller and the storage node.
FIXED_NODES = 2
# Every package's name, one per line: what a node has before and after provisioning.
LIST_PACKAGES = "dpkg-query -W -f '${Package}\\n'"


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


def lab_up(
    options: argparse.Namespace, compute: int | None = None, *more: str
) -> tuple[float, str]:
    """Bring up (or complete) the bench lab: seconds it took and its inventory. MORE:
    further `kiln lab up` options (`--image NAME`)."""
    compute = options.compute if compute is None else compute
    up_s, up = timed(
        "lab", "up", "--name", LAB, "--compute", str(compute), "--distro", options.distro, *more
    )
    if up.returncode != 0:
        sys.exit(f"lab up {' '.join(more)} failed: {up.stderr.strip()}")
    return up_s, up.stdout.strip().splitlines()[-1].removeprefix("inventory: ")


def lab_down() -> None:
    kiln("lab", "down", "--name", LAB)


def finish(options: argparse.Namespace, figures: dict) -> None:
    """Take the lab down (unless --keep) and print the figures with the machine's."""
    if not options.keep:
        lab_down()
    figures.setdefault("nodes", options.compute + FIXED_NODES)
    figures.update(
        distro=options.distro,
        cpus=os.cpu_count(),
        host=platform.platform(),
    )
    print(json.dumps(figures, indent=2))


TICKS = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): index 1
    is the parent's PID, 11 and 12 the process's own user and system ticks."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def own_cpu(pid: int) -> float:
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS


def ansible_mains(kiln_pid: int) -> list[int]:
    """ansible-playbook's main processes: those ansible-runner started under `kiln` (one,
    or one per part of a sliced run running now; their workers and Mitogen's processes
    are their children, with the same command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int(stat_fields(int(entry.name))[1]) != kiln_pid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if any(arg.endswith(b"ansible-playbook") for arg in argv[:2]):
            found.append(int(entry.name))
    return found


class CpuWatch:
    """Samples `kiln`'s and ansible-playbook's own CPU seconds while a run goes (the last
    sample before each exits: at most a fifth of a second short); a sliced run's main
    processes, one per part, are added up."""

    def __init__(self, kiln_pid: int):
        self.kiln_pid = kiln_pid
        self.kiln_s = 0.0
        self.mains: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    @property
    def ansible_main_s(self) -> float:
        return sum(self.mains.values())

    def sample(self) -> None:
        while not self.done.wait(0.2):
            try:
                self.kiln_s = own_cpu(self.kiln_pid)
            except (OSError, ValueError):
                return  # kiln exited
            for main in ansible_mains(self.kiln_pid):
                with contextlib.suppress(OSError, ValueError):  # exited between two samples
                    self.mains[main] = own_cpu(main)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def measured(*args: str) -> tuple[float, dict, subprocess.CompletedProcess]:
    """One `kiln` run: wall seconds, the control machine's CPU seconds (total of the
    process tree, Kiln's own process, ansible-playbook's main process) and the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "kiln", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch = CpuWatch(process.pid)
    out, err = process.communicate()
    watch.stop()
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = {"total_s": total, "kiln_s": watch.kiln_s, "ansible_main_s": watch.ansible_main_s}
    run = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return seconds, cpu, run


def per_host(cpu: dict, hosts: int) -> dict:
    """CPU seconds per host, with the workers' share (the rest of the tree)."""
    rest = cpu["total_s"] - cpu["kiln_s"] - cpu["ansible_main_s"]
    split = {**cpu, "workers_s": rest}
    return {key: round(value / hosts, 3) for key, value in split.items()}


def provision(inventory: str, label: str, *options: str) -> tuple[float, int]:
    """One `kiln provision`: seconds and changed tasks; a failed run ends the bench. The
    control machine's CPU per host goes to CPU_PER_HOST under the label."""
    seconds, cpu, run = measured("provision", "-i", inventory, "--json", *options)
    if run.returncode != 0:
        sys.exit(f"{label} failed (exit {run.returncode}): {run.stderr.strip()[-500:]}")
    report = json.loads(run.stdout)
    CPU_PER_HOST[label] = per_host(cpu, len(report["hosts"]))
    return seconds, sum(h["changed"] for h in report["hosts"].values())


# Filled by provision(): each run's control-machine CPU seconds per host.
CPU_PER_HOST: dict[str, dict] = {}


def lab_hosts(inventory: str) -> dict:
    """The lab's generated inventory (`kiln lab up` prints its hosts.yml)."""
    return yaml.safe_load(Path(inventory).read_text())["all"]


def nodes(inventory: str) -> list[str]:
    groups = lab_hosts(inventory)["children"].values()
    return sorted(name for group in groups for name in group["hosts"])


def on_node(node: str, command: str) -> subprocess.CompletedProcess:
    return kiln("lab", "ssh", "--name", LAB, node, "--", command)


def packages(inventory: str) -> dict[str, set[str]]:
    """Each node's installed packages."""
    names = nodes(inventory)
    with ThreadPoolExecutor(len(names)) as pool:
        listed = pool.map(lambda n: on_node(n, LIST_PACKAGES).stdout.split(), names)
    return {name: set(found) for name, found in zip(names, listed, strict=True)}


def apt_proxy(inventory: str) -> str | None:
    return lab_hosts(inventory)["vars"].get("base_apt_proxy")


def apt_install_command(names: set[str], proxy: str | None) -> str:
    """apt-get update and install of the names the archive has (the rest came from
    Kiln's artifact URLs, the lab's stand-ins), in one shell command for a fresh node."""
    proxy_option = f"-o Acquire::http::Proxy={proxy} " if proxy else ""
    listed = " ".join(sorted(names))
    return (
        "export DEBIAN_FRONTEND=noninteractive;"
        f" apt-get {proxy_option}update -qq >/dev/null"
        f" && wanted=$(for p in {listed}; do apt-cache show --no-all-versions $p"
        " >/dev/null 2>&1 && echo $p; done)"
        f" && apt-get {proxy_option}install -y -qq --no-install-recommends $wanted >/dev/null"
    )


def apt_baseline(options: argparse.Namespace, added: dict[str, set[str]], proxy: str | None):
    """Seconds for plain apt-get to install `added` on fresh nodes, all at once."""
    lab_down()
    lab_up(options)
    with ThreadPoolExecutor(len(added)) as pool:
        start = time.monotonic()
        runs = list(
            pool.map(lambda n: on_node(n, apt_install_command(added[n], proxy)), sorted(added))
        )
        seconds = time.monotonic() - start
    failed = [r.stderr.strip()[-300:] for r in runs if r.returncode != 0]
    if failed:
        sys.exit(f"apt-get baseline failed: {failed[0]}")
    return seconds


def first_and_noop(options: argparse.Namespace, size: int) -> dict:
    """A lab of `size` nodes from scratch: its first and no-op provision."""
    lab_down()
    _, inventory = lab_up(options, compute=size - FIXED_NODES)
    first_s, first_changed = provision(inventory, f"first provision of {size} nodes")
    noop_s, noop_changed = provision(inventory, f"no-op provision of {size} nodes")
    return {
        "nodes": size,
        "first_s": round(first_s, 1),
        "first_changed": first_changed,
        "noop_s": round(noop_s, 1),
        "noop_changed": noop_changed,
    }


def drift_clean(inventory: str, label: str) -> None:
    """`kiln drift` after LABEL: every node as declared, or the bench ends."""
    run = kiln("drift", "-i", inventory, "--json")
    if run.returncode != 0:
        sys.exit(f"drift after {label} (exit {run.returncode}): {run.stdout[-500:]}")


def sliced(inventory: str, counts: list[int], nodes: int) -> list[dict]:
    """A re-provision in each number of slices (the lab provisioned once, unsliced:
    --slices refuses a cluster never provisioned), each followed by `kiln drift`: the
    same end state whatever the slices. Unsliced first, as the reference."""
    rows = []
    for count in [0, *counts]:
        label = (
            f"provision of {nodes} nodes in {count} slice(s)"
            if count
            else (f"unsliced re-provision of {nodes} nodes")
        )
        seconds, changed = provision(inventory, label, *(["--slices", str(count)] * bool(count)))
        drift_clean(inventory, label)
        rows.append({"slices": count, "wall_s": round(seconds, 1), "changed": changed})
    return rows


def growth(curve: list[dict], key: str) -> float:
    """Wall time's growth from the smallest lab to the largest over the node count's:
    under 1 is sub-linear."""
    small, large = curve[0], curve[-1]
    return round((large[key] / small[key]) / (large["nodes"] / small["nodes"]), 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="", help="more lab node counts for the curve: 8,16")
    parser.add_argument("--no-apt", action="store_true", help="skip the apt-get baseline")
    parser.add_argument(
        "--slices",
        default="",
        help="also re-provision in each number of slices, drift-checked: 1,2,4",
    )
    options = lab_options(parser)
    up_s, inventory = lab_up(options)
    figures: dict = {"lab_up_s": round(up_s, 1)}
    before = packages(inventory)
    first_s, figures["first_provision_changed"] = provision(
        inventory, f"first provision of {options.compute + FIXED_NODES} nodes"
    )
    noop_s, figures["reprovision_changed"] = provision(
        inventory, f"no-op provision of {options.compute + FIXED_NODES} nodes"
    )
    figures.update(first_provision_s=round(first_s, 1), reprovision_s=round(noop_s, 1))
    figures["ratios"] = {"noop_over_first": round(noop_s / first_s, 3)}
    if options.slices:
        counts = [int(count) for count in options.slices.split(",")]
        rows = sliced(inventory, counts, options.compute + FIXED_NODES)
        figures["slices"] = rows
        by_count = {row["slices"]: row["wall_s"] for row in rows}
        if 1 in by_count:
            figures["ratios"].update(
                {f"slices_{c}_over_1": round(by_count[c] / by_count[1], 3) for c in counts}
            )
    if not options.no_apt:
        after = packages(inventory)
        added = {node: after[node] - before[node] for node in after}
        figures["packages_added"] = {node: len(names) for node, names in added.items()}
        apt_s = apt_baseline(options, added, apt_proxy(inventory))
        figures["apt_get_s"] = round(apt_s, 1)
        figures["ratios"]["first_over_apt_get"] = round(first_s / apt_s, 3)
    if options.sizes:
        # The lab measured above is the curve's first point.
        curve = [
            {
                "nodes": options.compute + FIXED_NODES,
                "first_s": figures["first_provision_s"],
                "first_changed": figures["first_provision_changed"],
                "noop_s": figures["reprovision_s"],
                "noop_changed": figures["reprovision_changed"],
            }
        ]
        curve += [first_and_noop(options, int(size)) for size in options.sizes.split(",")]
        figures["curve"] = curve
        figures["ratios"].update(
            first_growth=growth(curve, "first_s"), noop_growth=growth(curve, "noop_s")
        )
    figures["controller_cpu_per_host"] = CPU_PER_HOST
    finish(options, figures)


if __name__ == "__main__":
    main()
