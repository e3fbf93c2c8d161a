#!/usr/bin/python3
"""Kiln's validation probe: the part of `kiln validate` that runs on the cluster.

The validate role copies this file to every node it tests (/usr/local/libexec/kiln/)
and runs it; it needs only Python 3 and, for storage, fio. It measures and records raw
output as JSON; parsing and judging happen on the control node (kiln.validation).

    srun-time   (on the controller) how long `srun true` takes on each node
    tree        (on the controller) write the package tree for the cold-import test
    storage     (on each node, through srun) mount check, then fio and small files
    cold-import (on each node, through srun) all nodes import a package tree at once
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

MOUNT_CHECK = "/usr/local/sbin/kiln-mount-check"
TREE_PACKAGE = "kiln_cold_import"


def run(argv: list[str], timeout: float, stdin: str | None = None) -> dict:
    """A command's outcome as data: rc (None when it timed out), output, seconds."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {
            "rc": None,
            "stdout": "",
            "stderr": f"no answer within {timeout:g}s",
            "seconds": round(time.monotonic() - started, 3),
        }
    except OSError as exc:
        return {"rc": 127, "stdout": "", "stderr": str(exc), "seconds": 0.0}
    return {
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr.strip(),
        "seconds": round(time.monotonic() - started, 3),
    }


# --- srun --------------------------------------------------------------------------------


def srun_time(args: argparse.Namespace) -> dict:
    """Per node, the seconds `srun true` takes there (all nodes at once)."""
    found: dict[str, dict] = {}

    def probe(node: str) -> None:
        argv = [
            "srun",
            "--nodes=1",
            f"--nodelist={node}",
            "--ntasks=1",
            "--time=2",
            "--job-name=kiln-validate",
            "--quiet",
            # a node that cannot take the job now fails instead of queueing
            f"--immediate={max(1, int(args.timeout))}",
        ]
        if args.reservation:
            argv.append(f"--reservation={args.reservation}")
        found[node] = run([*argv, "true"], args.timeout)

    threads = [threading.Thread(target=probe, args=(n,)) for n in args.nodes.split(",")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
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
        argv = [
            "srun",
            f"--reservation={args.reservation}",
            "--nodes=2",
            f"--nodelist={','.join(pair)}",
            f"--ntasks-per-node={args.ranks_per_node}",
            f"--time={args.time}",
            "--immediate=60",
            "--job-name=kiln-validate-pair",
            *args.bench,
            "--master-port",
            str(port),
        ]
        done = run(argv, args.time * 60 + 60)
        lines = [line for line in done["stdout"].splitlines() if line.startswith("{")]
        found[",".join(pair)] = {
            "rc": done["rc"],
            "stderr": done["stderr"][-2000:],
            "result": json.loads(lines[-1]) if lines else None,
        }

    for wave in waves(pairs):
        threads = [
            threading.Thread(target=one, args=(pair, 29600 + index))
            for index, pair in enumerate(wave)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return found


# --- nccl-tests --------------------------------------------------------------------------


def nccl_tests(args: argparse.Namespace) -> dict:
    """nccl-tests' text output for each collective: within each node (all nodes at once,
    one step per node) and across all nodes, launched with `srun --mpi=pmix`."""
    nodes = args.nodes.split(",")
    found: dict = {"single_node": {n: {} for n in nodes}, "multi_node": {}}

    def one(nodelist: list[str], collective: str, into: dict) -> None:
        argv = [
            "srun",
            "--mpi=pmix",
            f"--reservation={args.reservation}",
            f"--nodes={len(nodelist)}",
            f"--nodelist={','.join(nodelist)}",
            f"--ntasks-per-node={args.ranks_per_node}",
            f"--time={args.time}",
            "--immediate=60",
            "--job-name=kiln-validate-nccl-tests",
            *args.container,
            f"{args.bin_dir}/{collective}_perf",
            "-b",
            str(args.min_bytes),
            "-e",
            str(args.max_bytes),
            "-f",
            "2",
            "-g",
            "1",
        ]
        done = run(argv, args.time * 60 + 60)
        into[collective] = {
            "rc": done["rc"],
            "stdout": done["stdout"],
            "stderr": done["stderr"][-2000:],
        }

    # One rank within a node crosses no link: nothing to measure there.
    within = nodes if args.ranks_per_node > 1 else []
    for collective in args.collectives.split(","):
        threads = [
            threading.Thread(target=one, args=([n], collective, found["single_node"][n]))
            for n in within
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if len(nodes) > 1:
            one(nodes, collective, found["multi_node"])
    return found


# --- cold-import tree --------------------------------------------------------------------


def tree(args: argparse.Namespace) -> dict:
    """A package of `modules` small modules in subpackages of 100, which one import of
    `kiln_cold_import.all` loads: many small files, as in `import torch`."""
    root = Path(args.root)
    package = root / TREE_PACKAGE
    marker = package / f".complete-{args.modules}"
    if marker.exists():
        return {"root": str(root), "modules": args.modules, "written": False}
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    subpackages = []
    for first in range(0, args.modules, 100):
        name = f"sub{first // 100:04d}"
        sub = package / name
        sub.mkdir()
        count = min(100, args.modules - first)
        for index in range(count):
            (sub / f"m{index:03d}.py").write_text(
                f'"""Generated by Kiln for the cold-import test."""\nVALUE = {first + index}\n'
                f"def value():\n    return VALUE\n"
            )
        (sub / "__init__.py").write_text(
            "".join(f"from . import m{index:03d}\n" for index in range(count))
        )
        subpackages.append(name)
    (package / "__init__.py").write_text("")
    (package / "all.py").write_text("".join(f"from . import {s}\n" for s in subpackages))
    marker.write_text("")
    return {"root": str(root), "modules": args.modules, "written": True}


# --- storage -----------------------------------------------------------------------------


def fio(directory: Path, name: str, params: dict, extra: list[str]) -> dict:
    argv = [
        "fio",
        f"--name={name}",
        f"--directory={directory}",
        "--output-format=json",
        "--ioengine=psync",
        "--group_reporting",
        f"--numjobs={params['numjobs']}",
        f"--size={params['file_size_mib']}M",
        f"--direct={int(params['direct'])}",
        # the same files for every job below: written once, read twice, then removed
        "--filename_format=kiln.$jobnum.$filenum",
        *extra,
    ]
    result = run(argv, params["timeout_s"])
    return {"rc": result["rc"], "json": result["stdout"], "stderr": result["stderr"][-2000:]}


def small_files(directory: Path, count: int) -> dict:
    """Create, stat and delete `count` 4 KiB files in a two-level tree."""
    base = directory / "meta"
    payload = b"k" * 4096
    started = time.monotonic()
    paths = []
    for index in range(count):
        folder = base / f"d{index % 32:02d}"
        if index < 32:
            folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"f{index:06d}"
        path.write_bytes(payload)
        paths.append(path)
    for path in paths:
        path.stat()
    for path in paths:
        path.unlink()
    shutil.rmtree(base, ignore_errors=True)
    return {"files": count, "ops": 3 * count, "seconds": round(time.monotonic() - started, 3)}


def storage_target(path: str, params: dict, node: str) -> dict:
    directory = Path(path) / ".kiln-validate" / node
    out: dict = {"path": path}
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return {**out, "error": f"cannot write in {path}: {exc.strerror}"}
    block = f"--bs={params['block_size']}"
    try:
        # Checkpoint-like: large blocks, one file per job, flushed before the clock stops.
        out["seq_write"] = fio(
            directory, "seq_write", params, ["--rw=write", block, "--end_fsync=1"]
        )
        out["seq_read"] = fio(directory, "seq_read", params, ["--rw=read", block])
        out["rand_read"] = fio(
            directory,
            "rand_read",
            params,
            [
                "--rw=randread",
                "--bs=4k",
                "--time_based",
                f"--runtime={params['runtime_s']}",
                "--unlink=1",
            ],
        )
        out["metadata"] = small_files(directory, params["metadata_files"])
    except OSError as exc:
        out["error"] = f"I/O error in {directory}: {exc.strerror}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return out


def mount_check(timeout: float) -> tuple[dict, set[str]]:
    """kiln-mount-check's verdict on the node's declared mounts, and the healthy paths."""
    check = run([MOUNT_CHECK, "--json", "--timeout", str(timeout)], timeout + 10)
    try:
        mounts = json.loads(check["stdout"])["mounts"]
    except (ValueError, KeyError, TypeError):
        mounts = []
    healthy = {m["path"] for m in mounts if m.get("status") == "OK" and not m.get("indirect")}
    return {**check, "mounts": mounts}, healthy


def storage(config: dict) -> dict:
    params = config["params"]
    check, healthy = mount_check(params["mount_timeout_s"])
    result: dict = {"node": socket.gethostname(), "mount_check": check, "targets": []}
    # Never benchmark a mount point whose filesystem is not there: that would fill the
    # root disk and measure it instead. Node-local scratch is declared, not automounted.
    paths = [m["path"] for m in check["mounts"] if m["path"] in healthy]
    paths += [p for p in config.get("scratch", []) if os.path.isdir(p)]
    for path in paths:
        result["targets"].append(storage_target(path, params, result["node"]))
    return result


def cold_import(config: dict) -> dict:
    """Wait for the common start time, then time a fresh interpreter importing the tree
    (or the configured module, e.g. torch). The many-nodes-at-once load is the test."""
    result: dict = {"node": socket.gethostname()}
    _, healthy = mount_check(config["mount_timeout_s"])
    if config.get("needs_mount") and config["needs_mount"] not in healthy:
        return {**result, "error": f"{config['needs_mount']} is not mounted"}
    delay = config["start_at"] - time.time()
    if delay > 0:
        time.sleep(delay)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if config.get("root"):
        env["PYTHONPATH"] = config["root"]
    argv = [config.get("python") or sys.executable, "-B", "-c", f"import {config['module']}"]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=config["timeout_s"], check=False
        )
    except subprocess.TimeoutExpired:
        return {**result, "error": f"import {config['module']} took over {config['timeout_s']}s"}
    except OSError as exc:
        return {**result, "error": f"cannot run {argv[0]}: {exc.strerror}"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {**result, "error": f"import {config['module']} failed: {lines[-1]}"}
    return {**result, "module": config["module"], "seconds": round(time.monotonic() - started, 3)}


def main() -> int:
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
        "--container",
        nargs="*",
        default=[],
        help="pyxis options, e.g. --container-image=/shared/nccl-tests.sqsh",
    )
    p = sub.add_parser("tree")
    p.add_argument("--root", required=True)
    p.add_argument("--modules", type=int, default=2000)
    for name in ("storage", "cold-import"):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True, help="the settings, as JSON text")
        p.add_argument("--out", required=True, help="write the result here (node-local)")
    args = parser.parse_args()
    if args.command == "srun-time":
        print(json.dumps(srun_time(args)))
        return 0
    if args.command == "pairs":
        args.bench = [a for a in args.bench if a != "--"]
        print(json.dumps(run_pairs(args)))
        return 0
    if args.command == "nccl-tests":
        print(json.dumps(nccl_tests(args)))
        return 0
    if args.command == "tree":
        print(json.dumps(tree(args)))
        return 0
    config = json.loads(args.config)
    result = storage(config) if args.command == "storage" else cold_import(config)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
