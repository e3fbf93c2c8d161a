#!/usr/bin/env python3
"""Kiln's torch.distributed collectives benchmark, launched by `srun` (or by hand).

One process per rank. Under srun the rank, world size and local rank come from
SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID; the rendezvous address is the first host
of the job (--master-addr, or MASTER_ADDR). With the nccl backend each rank drives the
GPU of its local rank; with gloo, ranks run on CPU (the lab).

For each collective and message size: warm-up calls, then timed calls each preceded by
a barrier, so a rank that arrives late does not count against the others. The time of a
call is the slowest rank's; algbw = bytes / time and busbw = algbw x factor, with the
factors nccl-tests uses (all_reduce 2(n-1)/n; all_gather and reduce_scatter (n-1)/n).
Rank 0 prints one JSON document, or writes it to --out.
"""

import argparse
import datetime
import functools
import json
import os
import socket
import sys
import time
import warnings

# Kiln's node library: kiln_node.INSTALL_DIR, or another copy named by KILN_NODE_LIBRARY.
sys.path.insert(0, os.environ.get("KILN_NODE_LIBRARY") or "/usr/local/lib/kiln")
from kiln_node import commands

SCONTROL_TIMEOUT_S = 30

FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}


def bus_factor(collective: str, ranks: int) -> float:
    return FACTORS[collective](ranks)


def sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def collective_call(dist, collective: str, buffer, world: int):
    """One call of the collective on `buffer` (all ranks' data; a 1/world shard each)."""
    if collective == "all_reduce":
        return functools.partial(dist.all_reduce, buffer)
    shard = buffer[: buffer.numel() // world].clone()
    if collective == "all_gather":
        return functools.partial(dist.all_gather_into_tensor, buffer, shard)
    return functools.partial(dist.reduce_scatter_tensor, shard, buffer)


def master_address() -> str:
    """The host rank 0 runs on: under srun, the first host of the step as Slurm expands
    its node list (block distribution puts rank 0 there); else MASTER_ADDR."""
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if nodelist:
        hosts = commands.run(
            ["scontrol", "show", "hostnames", nodelist], SCONTROL_TIMEOUT_S
        ).stdout.split()
        if hosts:
            return hosts[0]
    return os.environ.get("MASTER_ADDR", "127.0.0.1")


def gather_hostnames(torch, dist, world: int, device) -> list[str]:
    """Every rank's host name (as fixed-size byte tensors: no pickling, no numpy)."""
    mine = socket.gethostname().encode()[:64].ljust(64, b"\0")
    local = torch.tensor(list(mine), dtype=torch.uint8, device=device)
    every = torch.empty(64 * world, dtype=torch.uint8, device=device)
    dist.all_gather_into_tensor(every, local)
    raw = bytes(every.cpu().tolist())
    return [raw[i : i + 64].rstrip(b"\0").decode() for i in range(0, len(raw), 64)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--collectives", default="all_reduce,all_gather,reduce_scatter")
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument(
        "--master-addr", help="rendezvous host (default: the host of rank 0 under srun)"
    )
    parser.add_argument(
        "--init-timeout", type=int, default=300, help="seconds to wait for every rank to join"
    )
    parser.add_argument(
        "--master-port", type=int, default=int(os.environ.get("MASTER_PORT", 29577))
    )
    parser.add_argument(
        "--per-node",
        action="store_true",
        help="each node's ranks form their own group (one srun step tests every node alone)",
    )
    parser.add_argument("--out", help="write the JSON here instead of printing it (rank 0)")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    # torch 2.x renames all_gather_into_tensor and friends; the old names work everywhere
    warnings.filterwarnings("ignore", category=FutureWarning)

    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", 0)))
    world = int(os.environ.get("SLURM_NTASKS", os.environ.get("WORLD_SIZE", 1)))
    local = int(os.environ.get("SLURM_LOCALID", os.environ.get("LOCAL_RANK", 0)))
    if args.per_node:
        # SLURM_TASKS_PER_NODE reads like "8(x2)": every node runs the same count here
        per_node = os.environ.get("SLURM_TASKS_PER_NODE", str(world)).split("(")[0]
        rank, world, args.master_addr = local, int(per_node), "127.0.0.1"
    if world < 2:
        # One rank crosses no link: busbw is 0 and all_reduce a no-op whose time is
        # only the launch latency, so any figure would be meaningless.
        print(
            "torch_bench: 1 rank: no link is crossed; nothing to measure (run 2 or more ranks)",
            file=sys.stderr,
        )
        return 2
    if args.backend == "nccl":
        if not torch.cuda.is_available():
            print(
                "torch_bench: the nccl backend needs a CUDA GPU; none is visible", file=sys.stderr
            )
            return 2
        torch.cuda.set_device(local % torch.cuda.device_count())
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    address = f"tcp://{args.master_addr or master_address()}:{args.master_port}"
    join = functools.partial(
        dist.init_process_group,
        args.backend,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=args.init_timeout),
    )
    try:
        join(init_method=address)
    except RuntimeError as exc:
        # Distribution builds of torch (Debian's) lack libuv, which torch >= 2.4 asks
        # for by default; every rank fails the same way before any socket is opened.
        if "libuv" not in str(exc):
            raise
        join(init_method=address + "?use_libuv=0")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(call) -> float:
        dist.barrier()
        sync()
        start = time.perf_counter()
        call()
        sync()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the call took as long as its slowest rank
        return float(elapsed.item())

    results = []
    element = torch.tensor([], dtype=torch.float32).element_size()
    for collective in args.collectives.split(","):
        for size in sizes(args.min_bytes, args.max_bytes):
            count = max(world, size // element // world * world)
            buffer = torch.ones(count, dtype=torch.float32, device=device)
            call = collective_call(dist, collective, buffer, world)
            for _ in range(args.warmup):
                call()
            times = [timed(call) for _ in range(args.iters)]
            seconds = sorted(times)[len(times) // 2]  # the median call
            nbytes = count * element
            algbw = nbytes / seconds / 1e9
            results.append(
                {
                    "collective": collective,
                    "size_bytes": nbytes,
                    "time_us": round(seconds * 1e6, 2),
                    "algbw_gbps": float(f"{algbw:.6g}"),
                    "busbw_gbps": float(f"{algbw * bus_factor(collective, world):.6g}"),
                }
            )
    hosts = gather_hostnames(torch, dist, world, device)
    if rank == 0:
        document = {
            "benchmark": "kiln-torch-bench",
            "backend": args.backend,
            "ranks": world,
            "hosts": sorted(set(hosts)),
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version()))
            if device.type == "cuda"
            else None,
            "warmup": args.warmup,
            "iters": args.iters,
            "results": results,
        }
        text = json.dumps(document)
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as handle:
                handle.write(text)
        else:
            print(text)
    # Every rank is done once all pass this barrier; then each leaves at once. Tearing
    # gloo down (destroy_process_group, or the interpreter's exit) hung a rank now and
    # then in the lab once the rank serving the rendezvous store had gone.
    dist.barrier()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
