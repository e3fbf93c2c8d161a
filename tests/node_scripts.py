"""The node-side Python scripts the roles ship (`roles/ROLE/files/NAME.py`), imported
as modules so tests can call their functions; they run on nodes as plain scripts."""

import importlib.machinery
import importlib.util
from types import ModuleType

from tests.conftest import REPO


def load(role: str, name: str) -> ModuleType:
    """roles/ROLE/files/NAME.py, or NAME itself for a script installed without `.py`."""
    path = REPO / "roles" / role / "files" / f"{name}.py"
    if not path.exists():
        path = path.with_suffix("")
    loader = importlib.machinery.SourceFileLoader(f"kiln_node_{name.replace('-', '_')}", str(path))
    spec = importlib.util.spec_from_file_location(loader.name, path, loader=loader)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node_probe = load("validate", "node_probe")
probe_launcher = load("validate", "probe_launcher")
torch_bench = load("validate", "torch_bench")
gpu_detect = load("nvidia_driver", "kiln-gpu-detect")
health = load("health", "kiln-health")
health_active = load("health", "kiln-health-active")
fingerprint = load("base", "kiln-fingerprint")
repair = load("repair", "kiln-repair")
