#!/usr/bin/env python3
"""How long one control machine takes to provision 1,000 and 10,000 nodes, projected
from `bench/provision.py --sizes 8,16`'s figures (run by hand).

    .venv/bin/python bench/projection.py BENCH.json [--waves QUIET.json]
                                         [--cores 16,64] [--nodes 1000,10000]

The method (docs/performance.md, "One control machine, projected"):
- The control machine's CPU seconds of a run, total and ansible-playbook's main process
  alone, are fitted as a + b x nodes over the measured labs (least squares): b is what
  each more host costs, a what a run costs whatever its size.
- The main process (the strategy, every result) runs on one core; the workers share
  the rest. CPU bound: max(main, total / cores).
- Ansible runs a task on at most `forks` hosts at once and waits for the task to end
  everywhere before the next (the linear strategy, Mitogen's included): every task
  takes ceil(nodes / forks) waves, each as long as the task on one node. Wave bound:
  ceil(nodes / forks) x the run's wall time on the smallest lab (an upper bound on one
  node's time: the lab's nodes share two cores), or on the lab of --waves (another
  bench/provision.py output: a run on a machine doing nothing else).
- The projection is the larger of the two bounds; forks = 4 x cores (a worker mostly
  waits on its node), at most 256 (each worker is a forked ansible-playbook of about
  60 MB).
Prints one JSON object: the fits and, per run kind, cores and node count, the two
bounds and the projection in minutes.
"""

import argparse
import json
import math
import sys

MAX_FORKS = 256
FORKS_PER_CORE = 4


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares a + b x n over (n, y) points: (a, b)."""
    count = len(points)
    mean_n = sum(n for n, _ in points) / count
    mean_y = sum(y for _, y in points) / count
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    slope = sum((n - mean_n) * (y - mean_y) for n, y in points) / spread
    return mean_y - slope * mean_n, slope


def runs(figures: dict, kind: str) -> list[tuple[int, dict]]:
    """(nodes, CPU seconds per host) of each measured run of a kind (first, no-op)."""
    found = []
    for label, per_host in figures["controller_cpu_per_host"].items():
        if label.startswith(f"{kind} provision of "):
            nodes = int(label.removeprefix(f"{kind} provision of ").split()[0])
            found.append((nodes, per_host))
    return sorted(found, key=lambda item: item[0])


def forks_for(cores: int) -> int:
    return min(MAX_FORKS, FORKS_PER_CORE * cores)


def fits(figures: dict, kind: str) -> dict[str, tuple[float, float]]:
    """A run's CPU seconds as a + b x nodes: the whole tree's and the main process's."""
    measured = runs(figures, kind)
    return {
        share: fit([(n, per_host[share] * n) for n, per_host in measured])
        for share in ("total_s", "ansible_main_s")
    }


def project(fitted: dict, wave_s: float, cores: int, nodes: int) -> dict:
    """Both bounds and the projection for one control machine, in minutes."""
    (a, b), (c, d) = fitted["total_s"], fitted["ansible_main_s"]
    cpu_s = max(c + d * nodes, (a + b * nodes) / cores)
    waves_s = math.ceil(nodes / forks_for(cores)) * wave_s
    return {
        "cpu_bound_min": round(cpu_s / 60, 1),
        "wave_bound_min": round(waves_s / 60, 1),
        "projected_min": round(max(cpu_s, waves_s) / 60, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("figures", help="bench/provision.py's JSON output")
    parser.add_argument("--waves", help="bench/provision.py output for the wave lengths")
    parser.add_argument("--cores", default="16,64")
    parser.add_argument("--nodes", default="1000,10000")
    options = parser.parse_args()
    with open(options.figures) as handle:
        figures = json.load(handle)
    if "controller_cpu_per_host" not in figures:
        sys.exit("no controller_cpu_per_host: run bench/provision.py --sizes 8,16")
    lab = figures
    if options.waves:
        with open(options.waves) as handle:
            lab = json.load(handle)
    waves = {"first": lab["first_provision_s"], "no-op": lab["reprovision_s"]}
    out: dict = {"fits": {}, "projection": {}}
    for kind, wave_s in waves.items():
        fitted = fits(figures, kind)
        out["fits"][kind] = {
            share: {"per_run": round(a, 1), "per_host": round(b, 3)}
            for share, (a, b) in fitted.items()
        }
        for cores in (int(c) for c in options.cores.split(",")):
            for nodes in (int(n) for n in options.nodes.split(",")):
                key = f"{kind}, {nodes} nodes, {cores} cores, {forks_for(cores)} forks"
                out["projection"][key] = project(fitted, wave_s, cores, nodes)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
