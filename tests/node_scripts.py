"""The node programs the roles ship (`roles/ROLE/files/kiln-WHAT`, Python without a
suffix), imported as modules so tests can call their functions; they run on nodes as
plain programs."""

import importlib.machinery
import importlib.util
from types import ModuleType

from tests.conftest import REPO


def load(role: str, name: str) -> ModuleType:
    """roles/ROLE/files/NAME, a program without a suffix."""
    path = REPO / "roles" / role / "files" / name
    loader = importlib.machinery.SourceFileLoader(f"kiln_node_{name.replace('-', '_')}", str(path))
    spec = importlib.util.spec_from_file_location(loader.name, path, loader=loader)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node_probe = load("validate", "kiln-validate-probe")
probe_launcher = load("validate", "kiln-probe-launcher")
torch_bench = load("validate", "kiln-torch-bench")
gpu_detect = load("nvidia_driver", "kiln-gpu-detect")
health = load("health", "kiln-health")
health_active = load("health", "kiln-health-active")
prolog = load("health", "kiln-prolog")
fingerprint = load("base", "kiln-fingerprint")
repair = load("repair", "kiln-repair")
repair_step = load("repair", "kiln-repair-step")
