"""The node-side Python scripts the roles ship (`roles/ROLE/files/NAME.py`), imported
as modules so tests can call their functions; they run on nodes as plain scripts."""

import importlib.util
from types import ModuleType

from tests.conftest import REPO


def load(role: str, name: str) -> ModuleType:
    path = REPO / "roles" / role / "files" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"kiln_node_{name}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node_probe = load("validate", "node_probe")
torch_bench = load("validate", "torch_bench")
