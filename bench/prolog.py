#!/usr/bin/env python3
"""Wall time of kiln-prolog (Slurm's Prolog and Epilog) on a healthy node (run by hand).

    .venv/bin/python bench/prolog.py [--runs N] [--gpus N] [--fixture DIR] [--mounts N]
                                     [--real]

By default every command is a stand-in on a PATH of its own, so what is timed is Kiln's
part (Python's start, the node library's import, parsing and judging, the marker and the
metrics file): `nvidia-smi` prints the recorded `nvidia-smi -q -x` of FIXTURE (the H200
of tests/fixtures/gpu by default) with its one GPU repeated to --gpus GPUs on their own
bus addresses, `dmesg` prints that node's recorded kernel log (no XID: healthy), and a
mount check answers for --mounts mounts at once. The stand-ins' own time is measured
apart (`standins_ms`) and is part of the total.

--real uses the node's own nvidia-smi and dmesg (run as root on a GPU machine): the
figure a job start pays there. The mount check and the node library are the node's
where Kiln's health role installed them; elsewhere (a machine for `make gpu-check`) no
mount is checked and the checkout's library is used, and the output says which.

Prints one JSON object: the runs' milliseconds for the Prolog and the Epilog, their
median and 95th percentile, and the machine. Record the figures in docs/performance.md
with the date and the host. No test asserts them.
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "roles" / "health" / "files" / "kiln-prolog"
FIXTURES = REPO / "tests" / "fixtures" / "gpu"
KERNEL_LOG = FIXTURES / "h100-80gb-hbm3-vm" / "dmesg-nvrm.txt"
INSTALLED_MOUNT_CHECK = "/usr/local/sbin/kiln-mount-check"
INSTALLED_LIBRARY = "/usr/local/lib/kiln"


def many_gpus(xml: str, gpus: int) -> str:
    """The recording with its one <gpu> block repeated, each on bus 00000000:NN:00.0."""
    block = re.search(r"\t<gpu id=.*?</gpu>\n", xml, re.S)
    if not block:
        sys.exit("no <gpu> block in the recording")
    recorded = re.search(r'id="([^"]+)"', block.group()).group(1)
    copies = "".join(
        block.group().replace(recorded, f"00000000:{0x18 + 0x10 * i:02X}:00.0") for i in range(gpus)
    )
    text = xml.replace(block.group(), copies)
    return re.sub(
        r"<attached_gpus>\d+</attached_gpus>", f"<attached_gpus>{gpus}</attached_gpus>", text
    )


def stand_ins(where: Path, xml: str, mounts: int) -> dict:
    """nvidia-smi, dmesg and kiln-mount-check stand-ins; the settings that use them."""
    bin_dir = where / "bin"
    bin_dir.mkdir()
    (where / "smi.xml").write_text(xml)
    ok_lines = "".join(f"echo 'OK m{i} /m{i}: glusterfs storage:/m{i}'\n" for i in range(mounts))
    scripts = {
        "nvidia-smi": f"exec cat {where / 'smi.xml'}\n",
        "dmesg": f"exec cat {KERNEL_LOG}\n",
        "kiln-mount-check": ok_lines,
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return {
        "nvidia_smi": str(bin_dir / "nvidia-smi"),
        "mount_check": str(bin_dir / "kiln-mount-check"),
    }


CPU: list[float] = []  # each timed run's CPU milliseconds (its children's included)


def timed_ms(argv: list[str], env: dict) -> float:
    """Wall milliseconds; the run's CPU milliseconds go to CPU (on a loaded host the
    wall time waits for a core, the CPU time does not)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    took = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    if done.returncode != 0:
        sys.exit(f"{argv[0]} exited {done.returncode}: {done.stdout}{done.stderr}")
    return took


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    cpu = CPU[-len(values) :]
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "median_cpu_ms": round(statistics.median(cpu), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "runs_ms": [round(v, 1) for v in values],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--mounts", type=int, default=2)
    parser.add_argument("--fixture", type=Path, default=FIXTURES / "h200-141gb-580.159.04")
    parser.add_argument("--real", action="store_true", help="the node's own commands")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        settings = {
            "gpus": options.gpus,
            "prolog_timeout": 10,
            "check_timeout": 10,
            "job_marker": str(where / "marker.json"),
            "metrics_dir": str(where / "metrics"),
        }
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        figures: dict = {"mode": "real" if options.real else "stand-ins"}
        if options.real:
            # A GPU machine Kiln has not provisioned (make gpu-check's) has no mounts
            # declared and no installed library: its GPU commands are still the node's.
            settings["nvidia_smi"] = shutil.which("nvidia-smi") or "nvidia-smi"
            if Path(INSTALLED_MOUNT_CHECK).exists():
                settings["mount_check"] = INSTALLED_MOUNT_CHECK
            if not Path(INSTALLED_LIBRARY).is_dir():
                env["KILN_NODE_LIBRARY"] = str(REPO / "node_library")
            figures.update(
                mount_check=settings.get("mount_check", "none (no Kiln mounts here)"),
                node_library=env.get("KILN_NODE_LIBRARY", INSTALLED_LIBRARY),
            )
        else:
            xml = many_gpus((options.fixture / "nvidia-smi-q.xml").read_text(), options.gpus)
            settings.update(stand_ins(where, xml, options.mounts))
            env["PATH"] = f"{where / 'bin'}:{env['PATH']}"
            env["KILN_NODE_LIBRARY"] = str(REPO / "node_library")
            figures["standins_ms"] = summary(
                [timed_ms([settings["nvidia_smi"]], env) for _ in range(options.runs)]
            )["median_ms"]
        (where / "health.json").write_text(json.dumps(settings))
        base = [
            sys.executable,
            str(PROGRAM),
            "--config",
            str(where / "health.json"),
            "--node",
            "bench",
        ]
        env.update(SLURM_JOB_ID="1", SLURM_JOB_GPUS=f"0-{options.gpus - 1}")
        for phase, extra in (("prolog", []), ("epilog", ["--epilog"])):
            figures[phase] = summary([timed_ms(base + extra, env) for _ in range(options.runs)])
        figures["python_start_ms"] = summary(
            [timed_ms([sys.executable, "-c", "pass"], env) for _ in range(options.runs)]
        )["median_ms"]
    figures.update(
        gpus=options.gpus,
        mounts=options.mounts if not options.real else "the node's",
        fixture=options.fixture.name if not options.real else "",
        cpus=os.cpu_count(),
        host=platform.platform(),
        python=platform.python_version(),
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
