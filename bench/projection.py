#!/usr/bin/env python3
"""How long Kiln takes to provision 1,000 and 10,000 nodes, projected from
`bench/provision.py`'s figures (run by hand): one run on one control machine, and a
no-op in slices (`kiln provision --slices N`) on one machine or on M machines
(`--part`, docs/performance.md "Several control machines").

    .venv/bin/python bench/projection.py BENCH.json [--waves QUIET.json]
                                         [--cores 16,64] [--nodes 1000,10000]
                                         [--machines 1,4] [--slices 1,2,4,8,16,32]

bench/results/2026-11-29-lab.json and 2026-12-02-lab.json hold what the projections of
those days read.

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
- In slices (no-op only: a first provision cannot be sliced), each of M machines runs
  S slices side by side, the compute nodes cut into S x M slices of n nodes. A slice is
  one run: main c' + d x n (d from the fit; c' what one more slice cost in the bench's
  sliced runs, which holds its own start), the machine's CPU S x (a' + b x n); its
  forks are the machine's divided among its S slices. Then the tail, run once: the
  controllers' run (its wall time in the bench's sliced runs, plus reading every
  compute node's cached facts, FACTS_READ_S_PER_NODE) and the Slurm checks (a wave of
  them per ceil(n / forks)). The best S is taken for each M.
Prints one JSON object: the fits and, per run kind, cores and node count, the two
bounds and the projection in minutes; then the sliced no-op's.
"""

import argparse
import json
import math
import sys

MAX_FORKS = 256
FORKS_PER_CORE = 4
# What one task reading every compute node's cached facts costs the controllers' run,
# per node: 24.1 s wall for 10,000 nodes (8 KB of facts each, jsonfile cache; 3.7 s for
# 1,000), measured 2026-11-29 on this host (docs/performance.md).
FACTS_READ_S_PER_NODE = 0.0024


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


def slice_costs(figures: dict) -> dict[str, float]:
    """What one more slice costs (CPU seconds: total and main process) and the tail's
    wall seconds, from the bench's sliced runs of its largest lab."""
    sliced = {}
    for label, per_host in figures["controller_cpu_per_host"].items():
        words = label.split()
        if label.startswith("provision of ") and "slice(s)" in label:
            nodes, count = int(words[2]), int(words[5])
            sliced.setdefault(nodes, {})[count] = per_host
    nodes = max(sliced)
    fewest, most = min(sliced[nodes]), max(sliced[nodes])

    def per_slice(share: str) -> float:
        more = (sliced[nodes][most][share] - sliced[nodes][fewest][share]) * nodes
        return more / (most - fewest)

    parts = figures["parts_wall_s"][f"{nodes} nodes in {most} slices"]
    slurm = [s for name, s in parts.items() if name.startswith("slurm-")]
    return {
        "total_s": per_slice("total_s"),
        "ansible_main_s": per_slice("ansible_main_s"),
        "controllers_wall_s": parts["controllers"],
        "slurm_check_wall_s": max(slurm),
    }


def project_sliced(
    fitted: dict, costs: dict, wave_s: float, cores: int, nodes: int, machines: int, slices: int
) -> dict:
    """A no-op on MACHINES control machines of CORES, SLICES side by side on each."""
    per_slice = math.ceil(nodes / (slices * machines))
    b, d = fitted["total_s"][1], fitted["ansible_main_s"][1]
    main_s = costs["ansible_main_s"] + d * per_slice
    machine_cpu_s = slices * (costs["total_s"] + b * per_slice)
    cpu_s = max(main_s, machine_cpu_s / cores)
    waves = math.ceil(per_slice / max(1, forks_for(cores) // slices))
    slice_s = max(cpu_s, waves * wave_s)
    controllers_s = costs["controllers_wall_s"] + FACTS_READ_S_PER_NODE * nodes
    checks_s = waves * costs["slurm_check_wall_s"]
    return {
        "slices_per_machine": slices,
        "nodes_per_slice": per_slice,
        "cpu_bound_min": round(cpu_s / 60, 1),
        "wave_bound_min": round(waves * wave_s / 60, 1),
        "tail_min": round((controllers_s + checks_s) / 60, 1),
        "projected_min": round((slice_s + controllers_s + checks_s) / 60, 1),
    }


def best_sliced(
    fitted: dict,
    costs: dict,
    wave_s: float,
    cores: int,
    nodes: int,
    machines: int,
    choices: list[int],
) -> dict:
    """The number of slices per machine (of CHOICES) that projects the shortest no-op."""
    found = [
        project_sliced(fitted, costs, wave_s, cores, nodes, machines, slices)
        for slices in choices
        if slices * machines <= nodes
    ]
    return min(found, key=lambda projected: projected["projected_min"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("figures", help="bench/provision.py's JSON output")
    parser.add_argument("--waves", help="bench/provision.py output for the wave lengths")
    parser.add_argument("--cores", default="16,64")
    parser.add_argument("--nodes", default="1000,10000")
    parser.add_argument("--machines", default="1,4")
    parser.add_argument("--slices", default="1,2,4,8,16,32")
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
    if "parts_wall_s" in figures:
        costs = slice_costs(figures)
        fitted = fits(figures, "no-op")
        choices = [int(s) for s in options.slices.split(",")]
        out["slice_costs"] = {name: round(value, 1) for name, value in costs.items()}
        out["sliced_no_op"] = {}
        for machines in (int(m) for m in options.machines.split(",")):
            for cores in (int(c) for c in options.cores.split(",")):
                for nodes in (int(n) for n in options.nodes.split(",")):
                    key = f"{nodes} nodes, {machines} machine(s) of {cores} cores"
                    out["sliced_no_op"][key] = best_sliced(
                        fitted, costs, waves["no-op"], cores, nodes, machines, choices
                    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
