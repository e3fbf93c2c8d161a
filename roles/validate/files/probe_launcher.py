#!/usr/bin/python3
"""Kiln's validation launcher, on the first controller: the srun steps of `kiln
validate` over the nodes under test, each one's outcome printed as JSON (the node-side
work is node_probe.py's). Parsing and judging happen on the control node
(kiln.validation).

    srun-time   how long `srun true` takes on each node
    pairs       Kiln's benchmark on each pair of nodes, pairs without a common node at once
    mpi         Kiln's MPI check across the nodes, through PMIx, then each node alone
    nccl-tests  nccl-tests within each node and across all nodes
"""

import argparse
import json
import os
import sys
import threading

# Kiln's node library: kiln_node.INSTALL_DIR, or another copy named by KILN_NODE_LIBRARY.
sys.path.insert(0, os.environ.get("KILN_NODE_LIBRARY") or "/usr/local/lib/kiln")
from kiln_node import commands, slurm_jobs

run = commands.record


# --- srun --------------------------------------------------------------------------------


def all_at_once(function, calls: list[tuple]) -> None:
    """function(*call) for every call, each in its own thread, until all return."""
    threads = [threading.Thread(target=function, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def reserved_step(
    args: argparse.Namespace,
    nodelist: list[str],
    per_node: int,
    job: str,
    command: list[str],
    pmix: bool = True,
) -> list[str]:
    """srun for one benchmark step in the validation's reservation, its ranks started
    through PMIx unless `pmix` is off (torch's own rendezvous needs none); a node that
    cannot take it now fails within a minute instead of queueing."""
    step = slurm_jobs.Srun(
        nodelist,
        job,
        reservation=args.reservation,
        tasks_per_node=per_node,
        minutes=args.time,
        mpi="pmix" if pmix else "",
    )
    return step.argv(*command)


def srun_time(args: argparse.Namespace) -> dict:
    """Per node, the seconds `srun true` takes there (all nodes at once)."""
    found: dict[str, dict] = {}

    def probe(node: str) -> None:
        step = slurm_jobs.Srun(
            [node],
            "kiln-validate",
            reservation=args.reservation,
            minutes=2,
            # a node that cannot take the job now fails instead of queueing
            immediate_s=max(1, int(args.timeout)),
            quiet=True,
        )
        found[node] = run(step.argv("true"), args.timeout)

    all_at_once(probe, [(n,) for n in args.nodes.split(",")])
    return found


# --- pairs -------------------------------------------------------------------------------


def waves(pairs: list[list[str]]) -> list[list[list[str]]]:
    """Pairs grouped so that no node is in two pairs of one wave (they run together)."""
    out: list[list[list[str]]] = []
    for pair in pairs:
        for wave in out:
            if not any(set(pair) & set(other) for other in wave):
                wave.append(pair)
                break
        else:
            out.append([pair])
    return out


def run_pairs(args: argparse.Namespace) -> dict:
    """The benchmark on each pair; the JSON it prints on rank 0, per pair."""
    found: dict[str, dict] = {}
    pairs = [p.split(",") for p in args.pairs]

    def one(pair: list[str], port: int) -> None:
        command = [*args.bench, "--master-port", str(port)]
        argv = reserved_step(
            args, pair, args.ranks_per_node, "kiln-validate-pair", command, pmix=False
        )
        done = run(argv, args.time * 60 + 60)
        lines = [line for line in done["stdout"].splitlines() if line.startswith("{")]
        found[",".join(pair)] = {
            "rc": done["rc"],
            "stderr": done["stderr"][-2000:],
            "result": json.loads(lines[-1]) if lines else None,
        }

    for wave in waves(pairs):
        all_at_once(one, [(pair, 29600 + index) for index, pair in enumerate(wave)])
    return found


# --- mpi ---------------------------------------------------------------------------------


# Ubuntu 22.04's Slurm 21.08 has only mpi_pmi2, and its Open MPI only PMIx: no node can
# start the check's ranks through srun there, so no node is blamed for it.
NO_PMIX = (
    "this Slurm has no PMIx plugin (srun --mpi=list), so srun cannot start Open MPI's"
    " ranks: MPI programs start with mpirun inside an allocation"
)


def pmix_missing() -> bool:
    """Whether srun lists no pmix plugin; a listing that fails is no answer, and the
    check then runs (and its failure is reported) as anywhere else."""
    listed = run(["srun", "--mpi=list"], 60)
    return listed["rc"] == 0 and "pmix" not in (listed["stdout"] + listed["stderr"]).split()


def mpi_check(args: argparse.Namespace) -> dict:
    """Kiln's MPI check (the mpi role builds it) on every node at once, one rank per
    node, started by srun through PMIx. Where that fails, the check again on each node
    alone (all at once), to tell a node that cannot start MPI ranks from a job that
    fails between nodes. Where this Slurm has no PMIx at all, why it did not run."""
    if pmix_missing():
        return {"skipped": NO_PMIX}
    nodes = args.nodes.split(",")

    def step(nodelist: list[str]) -> dict:
        argv = reserved_step(args, nodelist, 1, "kiln-validate-mpi", [args.program])
        done = run(argv, args.time * 60 + 60)
        return {**done, "stderr": done["stderr"][-2000:]}

    found: dict = {"all": step(nodes), "alone": {}}
    if found["all"]["rc"] != 0:

        def alone(node: str) -> None:
            found["alone"][node] = step([node])

        all_at_once(alone, [(n,) for n in nodes])
    return found


# --- nccl-tests --------------------------------------------------------------------------


def nccl_tests(args: argparse.Namespace) -> dict:
    """nccl-tests' text output for each collective: within each node (all nodes at once,
    one step per node) and across all nodes, launched with `srun --mpi=pmix`."""
    nodes = args.nodes.split(",")
    found: dict = {"single_node": {n: {} for n in nodes}, "multi_node": {}}

    def one(nodelist: list[str], collective: str, into: dict) -> None:
        # pyxis's option, where srun reads it: before the program.
        image = [f"--container-image={args.container_image}"] if args.container_image else []
        command = [
            *image,
            f"{args.bin_dir}/{collective}_perf",
            *("-b", str(args.min_bytes), "-e", str(args.max_bytes), "-f", "2", "-g", "1"),
        ]
        job = "kiln-validate-nccl-tests"
        argv = reserved_step(args, nodelist, args.ranks_per_node, job, command)
        done = run(argv, args.time * 60 + 60)
        into[collective] = {
            "rc": done["rc"],
            "stdout": done["stdout"],
            "stderr": done["stderr"][-2000:],
        }

    # One rank within a node crosses no link: nothing to measure there.
    within = nodes if args.ranks_per_node > 1 else []
    for collective in args.collectives.split(","):
        all_at_once(one, [([n], collective, found["single_node"][n]) for n in within])
        if len(nodes) > 1:
            one(nodes, collective, found["multi_node"])
    return found


def arguments() -> argparse.ArgumentParser:
    """The launcher's command line, as kiln.validation.suites builds it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("srun-time")
    p.add_argument("--nodes", required=True)
    p.add_argument("--reservation", default="")
    p.add_argument("--timeout", type=float, default=30)
    p = sub.add_parser("pairs")
    p.add_argument("--reservation", required=True)
    p.add_argument("--ranks-per-node", type=int, default=1)
    p.add_argument("--time", type=int, default=15, help="minutes per pair")
    p.add_argument("--pairs", nargs="+", required=True, help="a,b c,d ...")
    p.add_argument("bench", nargs=argparse.REMAINDER, help="-- the benchmark's argv")
    p = sub.add_parser("mpi")
    p.add_argument("--nodes", required=True)
    p.add_argument("--reservation", required=True)
    p.add_argument("--program", required=True, help="Kiln's MPI check, built on the nodes")
    p.add_argument("--time", type=int, default=5, help="minutes per run")
    p = sub.add_parser("nccl-tests")
    p.add_argument("--nodes", required=True)
    p.add_argument("--reservation", required=True)
    p.add_argument("--bin-dir", required=True, help="where all_reduce_perf and friends are")
    p.add_argument("--collectives", default="all_reduce,all_gather,reduce_scatter")
    p.add_argument("--ranks-per-node", type=int, default=8)
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--max-bytes", type=int, default=8 << 30)
    p.add_argument("--time", type=int, default=15, help="minutes per run")
    p.add_argument(
        "--container-image",
        default="",
        help="an image with nccl-tests, started through pyxis; empty: on the host",
    )
    return parser


def main() -> int:
    args = arguments().parse_args()
    if args.command == "srun-time":
        print(json.dumps(srun_time(args)))
        return 0
    if args.command == "pairs":
        args.bench = [a for a in args.bench if a != "--"]
        print(json.dumps(run_pairs(args)))
        return 0
    if args.command == "mpi":
        print(json.dumps(mpi_check(args)))
        return 0
    if args.command == "nccl-tests":
        print(json.dumps(nccl_tests(args)))
        return 0
    raise AssertionError(args.command)  # argparse allows no other


if __name__ == "__main__":
    sys.exit(main())
