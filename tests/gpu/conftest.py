"""`make gpu-check`: Kiln's node-side programs and library run against the live GPU
machine, each compared with what nvidia-smi says directly (tests/gpu/machine.py).

Needs an NVIDIA GPU with its driver loaded, python3 with PyTorch (burn-in, the NCCL
benchmark) and nvcc with NCCL's headers (nccl-tests); no Slurm, apt, systemd or network.
On a machine without a GPU every test skips, saying why. Settings (environment):

  KILN_GPU_RECORD_DIR        where the outputs are recorded (default
                             tests/fixtures/gpu/<model>-<driver>/)
  KILN_GPU_BURN_SECONDS      the burn-in round (default 120)
  KILN_NCCL_TESTS_TARBALL    nccl-tests' release tarball (v<version>.tar.gz as GitHub or a
  KILN_NCCL_TESTS_SHA256     mirror serves it) and its sha256: without them the build
                             test skips
  KILN_GPU_SMI_TIMEOUT       seconds nvidia-smi may take (default 30)
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.roles.nvidia_driver import hardware
from tests.gpu import machine as gm

# The node programs put Kiln's node library first on sys.path: the one installed at
# kiln_node.INSTALL_DIR, unless KILN_NODE_LIBRARY names another. Here it is this
# checkout's, even on a machine Kiln provisioned (whose installed copy may be older);
# every program the suite starts inherits it.
os.environ["KILN_NODE_LIBRARY"] = str(gm.REPO / "node_library")

FILES = {
    "detect": gm.REPO / "roles/nvidia_driver/files/kiln-gpu-detect",
    "health": gm.REPO / "roles/health/files/kiln-health",
    "fingerprint": gm.REPO / "roles/base/files/kiln-fingerprint",
    "nccl_probe": gm.REPO / "roles/nccl_env/files/kiln-nccl-probe",
    "burn": gm.REPO / "roles/validate/files/kiln-burn-stress",
    "torch_bench": gm.REPO / "roles/validate/files/kiln-torch-bench",
    "metrics": gm.REPO / "roles/monitoring/files/kiln-metrics",
}


def run_program(
    name: str, *args: str, timeout: float, env: dict | None = None
) -> subprocess.CompletedProcess:
    """A node program as the roles install it, run by this python3 (the one with torch),
    with Kiln's node library importable as on a node."""
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(gm.REPO / "node_library"), environment.get("PYTHONPATH", "")) if p
    )
    return subprocess.run(
        [sys.executable, str(FILES[name]), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )


@pytest.fixture(scope="session")
def detected() -> dict:
    """kiln-gpu-detect's report: it runs on any Linux machine."""
    done = run_program("detect", timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def gpu_machine(detected) -> gm.Machine:
    try:
        return gm.probe(len(hardware.detect(detected.get("pci") or []).gpus))
    except gm.NotAGpuMachine as exc:
        pytest.skip(f"not a GPU machine: {exc}")
    except gm.BrokenGpuMachine as exc:
        pytest.exit(f"gpu-check: {exc}", returncode=3)


# What the tests that run Kiln's own CLI or inventory model import beyond the standard
# library (pyproject.toml's dependencies): a CUDA image with torch usually lacks pydantic.
CONTROL_SIDE = ("pydantic", "click", "rich", "yaml")


@pytest.fixture(scope="session")
def kiln_dependencies() -> None:
    """Fails in one line, not at an import deep in Kiln, where this python3 lacks Kiln's
    own dependencies; docs/gpu.md says how to bring their wheels offline."""
    missing = [name for name in CONTROL_SIDE if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(
            f"gpu-check: {sys.executable} lacks Kiln's Python dependencies "
            f"({', '.join(missing)}): bring their wheels as docs/gpu.md says "
            '("On a real GPU") and put them on PYTHONPATH',
            pytrace=False,
        )


@pytest.fixture(scope="session")
def summary() -> list[str]:
    """Lines for the record's README: the figures measured."""
    return []


@pytest.fixture(scope="session")
def record(gpu_machine, summary):
    directory = os.environ.get("KILN_GPU_RECORD_DIR") or str(
        gm.REPO / "tests" / "fixtures" / "gpu" / gpu_machine.slug
    )
    found = gm.Record(Path(directory), gpu_machine, socket.gethostname())
    yield found
    found.close(summary)
