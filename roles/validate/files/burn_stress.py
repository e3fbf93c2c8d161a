#!/usr/bin/env python3
"""Kiln's burn-in stress for one node, launched by `srun` (one task per node) or by hand.

Matrix products on every GPU at once (a thread each: torch releases the GIL while a
GPU works), sized to fill most of its memory, for one round; or on the CPU (the lab).
Per device it records the TFLOP/s achieved in each interval. On GPUs it also records
nvidia-smi's samples over the round (temperature, power, SM clock, clock-event
reasons) and, before and after, the error counters (ECC, remapped rows) and the
kernel's XID lines. Everything is kept as printed: `kiln burn-in` parses and judges it
(kiln.validation.burn_in_samples), so the rules are tested on recorded outputs.
"""

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import threading
import time

# Kiln's node library: kiln_node.INSTALL_DIR, or another copy named by KILN_NODE_LIBRARY.
sys.path.insert(0, os.environ.get("KILN_NODE_LIBRARY") or "/usr/local/lib/kiln")
from kiln_node import commands, nvidia_smi

# The fields of the samples, as recorded on a loaded H100 (../shared/fixtures/gpu).
SAMPLE_FIELDS = (
    "index,timestamp,temperature.gpu,temperature.memory,power.draw,clocks.current.sm,"
    "clocks.current.memory,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap,"
    "clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,"
    "clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,"
    "utilization.gpu,ecc.errors.uncorrected.volatile.total"
)
ECC_FIELDS = "index,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total"
REMAPPED_FIELDS = (
    "gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,"
    "remapped_rows.pending,remapped_rows.failure"
)
SMI_TIMEOUT_S = 20


def smi(*args: str) -> str:
    """nvidia-smi's output, or '' where it is missing or fails (the field stays empty)."""
    return commands.stdout(["nvidia-smi", *args], SMI_TIMEOUT_S)


def xid_lines() -> list[str]:
    """The kernel's NVRM Xid lines so far (dmesg keeps its own time stamps, so a line
    seen after the round and not before is new)."""
    return nvidia_smi.xid_lines(commands.run(["dmesg"], SMI_TIMEOUT_S).stdout)


def counters() -> dict:
    return {
        "ecc": smi(f"--query-gpu={ECC_FIELDS}", "--format=csv"),
        "remapped": smi(f"--query-remapped-rows={REMAPPED_FIELDS}", "--format=csv"),
        "xids": xid_lines(),
    }


class Sampler:
    """nvidia-smi printing a line per GPU every interval, read as it comes."""

    def __init__(self, interval_s: float):
        self.text: list[str] = []
        try:
            self.process = subprocess.Popen(
                [
                    "nvidia-smi",
                    f"--query-gpu={SAMPLE_FIELDS}",
                    "--format=csv",
                    f"-lms={int(interval_s * 1000)}",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:
            self.process = None
            return
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process and self.process.stdout
        for line in self.process.stdout:
            self.text.append(line)

    def stop(self) -> str:
        if self.process:
            self.process.terminate()
            try:
                self.process.wait(timeout=SMI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.reader.join(timeout=SMI_TIMEOUT_S)
        return "".join(self.text)


def stress(
    torch,
    device: str,
    size: int,
    dtype,
    memory_fraction: float,
    seconds: float,
    interval_s: float,
    started: float,
    out: dict,
) -> None:
    """Matrix products on one device until `seconds` have passed; TFLOP/s per interval."""
    try:
        operands = operand_sets(torch, device, size, dtype, memory_fraction)
        flops = 2 * size**3
        intervals, done, mark = [], 0, time.monotonic()
        end = mark + seconds
        index = 0
        while True:
            a, b, c = operands[index % len(operands)]
            torch.matmul(a, b, out=c)
            if device != "cpu":
                # Without a wait, launches queue up (on an H100, 10 s intervals lasted
                # 17 s: the queue drained at the interval's end) and the round overran.
                torch.cuda.synchronize(device)
            index += 1
            done += 1
            now = time.monotonic()
            if now - mark >= interval_s or now >= end:
                intervals.append(
                    [round(time.time() - started, 2), done * flops / (now - mark) / 1e12]
                )
                done, mark = 0, now
                if now >= end:
                    break
        out["intervals"] = intervals
    except Exception as exc:  # any failure of a device (out of memory, Xid) is its result
        out["error"] = f"{type(exc).__name__}: {exc}"


def operand_sets(torch, device: str, size: int, dtype, memory_fraction: float) -> list:
    """Enough (a, b, c) sets to fill `memory_fraction` of the GPU's free memory (the
    products cycle through them, so all of that memory is read and written); one on CPU."""
    each = 3 * size * size * torch.tensor([], dtype=dtype).element_size()
    count = 1
    if device != "cpu" and memory_fraction > 0:
        free, _total = torch.cuda.mem_get_info(device)
        count = max(1, int(free * memory_fraction // each))
    sets = []
    for _ in range(count):
        a = torch.randn(size, size, device=device).to(dtype)
        b = torch.randn(size, size, device=device).to(dtype)
        sets.append((a, b, torch.empty(size, size, device=device, dtype=dtype)))
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--size", type=int, default=16384, help="matrix size (n of n x n)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's own)")
    parser.add_argument("--memory-fraction", type=float, default=0.8)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds per figure")
    parser.add_argument("--out", help="write the JSON here (default: print it)")
    args = parser.parse_args(argv)

    result: dict = {
        "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0],
        "kind": args.device,
        "seconds": args.seconds,
        "size": args.size,
        "dtype": args.dtype,
        "devices": {},
        "error": "",
    }
    if args.device == "cpu" and args.threads:
        # BLAS libraries size their own thread pools at load time (Debian's torch uses
        # OpenBLAS): pin them before torch is imported, not only torch's own pool.
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(args.threads)
    try:
        import torch
    except ImportError as exc:
        result["error"] = f"torch is not importable with {sys.executable}: {exc}"
        return write(result, args.out)
    devices = ["cpu"]
    if args.device == "cuda":
        if not torch.cuda.is_available():
            result["error"] = "torch sees no GPU (torch.cuda.is_available() is false)"
            return write(result, args.out)
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        result["before"] = counters()
    elif args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    # The round's clock starts with the load: figures and samples are timed from here.
    started = time.time()
    result["started"] = started
    result["started_local"] = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    sampler = Sampler(args.interval) if args.device == "cuda" else None
    outs = {d: {"intervals": [], "error": ""} for d in devices}
    threads = [
        threading.Thread(
            target=stress,
            args=(
                torch,
                d,
                args.size,
                dtype,
                args.memory_fraction,
                args.seconds,
                args.interval,
                started,
                outs[d],
            ),
        )
        for d in devices
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if sampler:
        result["samples"] = sampler.stop()
        result["after"] = counters()
    for device, out in outs.items():
        name = torch.cuda.get_device_name(device) if device != "cpu" else "cpu"
        result["devices"][device.removeprefix("cuda:")] = {"name": name, **out}
    return write(result, args.out)


def write(result: dict, path: str | None) -> int:
    text = json.dumps(result)
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    else:
        print(text)
    return 1 if result["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
