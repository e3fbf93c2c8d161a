"""Where the results of one `kiln validate` run lie, for everything that reads or
writes them: the validate role (through the kiln_validate_paths filter), this package's
collect step, and the tests that write fixtures.

On the control node, in the run's results directory:
    slurm_state.json              scontrol's view before the run, and the plan
    prerequisites.json            what a suite asked for by name lacks (the run stopped)
    srun.json                     seconds of `srun true` per node
    munge/NODE.json               the node decoding a controller's credential
    storage/NODE.json             mount check, fio JSON, small-file timings
    cold_import/NODE.json         the import's wall time
    collectives_node/NODE.json    torch benchmark within the node
    collectives_all/NODE.json     torch benchmark across the nodes (on the first node)
    nccl_tests.json               nccl-tests' output, within and across the nodes
    storage_steps.json, collectives_steps.json
                                  how each srun step ended, and why a suite was skipped
    pairs.json                    the pairwise runs
On each node, while the run lasts: NODE_ROOT/RUN/KIND.json for each of NODE_KINDS, which
the role brings back as KIND/NODE.json.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODE_ROOT = "/var/lib/kiln/validate"
SLURM_STATE = "slurm_state.json"
PREREQUISITES = "prerequisites.json"
SRUN = "srun.json"
MUNGE = "munge"
STORAGE_STEPS = "storage_steps.json"
COLLECTIVES_STEPS = "collectives_steps.json"
NCCL_TESTS = "nccl_tests.json"
PAIRS = "pairs.json"
# Written on each node by the probe or the benchmark, then brought back per node.
NODE_KINDS = ("storage", "cold_import", "collectives_node", "collectives_all")


@dataclass(frozen=True)
class Layout:
    """One results directory."""

    root: Path

    def path(self, name: str) -> Path:
        return self.root / name

    def node_path(self, kind: str, node: str) -> Path:
        return self.root / kind / f"{node}.json"

    def load(self, name: str) -> Any:
        return _load(self.path(name))

    def load_node(self, kind: str, node: str) -> Any:
        return _load(self.node_path(kind, node))

    def write(self, name: str, data: Any) -> None:
        _write(self.path(name), data)

    def write_node(self, kind: str, node: str, data: Any) -> None:
        _write(self.node_path(kind, node), data)


def for_role(results_dir: str, run: str) -> dict[str, Any]:
    """Every path the validate role writes, by name (the kiln_validate_paths filter)."""
    root = Path(results_dir)
    return {
        "results": str(root),
        "slurm_state": str(root / SLURM_STATE),
        "prerequisites": str(root / PREREQUISITES),
        "srun": str(root / SRUN),
        "munge": str(root / MUNGE),
        "storage_steps": str(root / STORAGE_STEPS),
        "collectives_steps": str(root / COLLECTIVES_STEPS),
        "nccl_tests": str(root / NCCL_TESTS),
        "pairs": str(root / PAIRS),
        "node_dir": f"{NODE_ROOT}/{run}",
        "node_kinds": list(NODE_KINDS),
    }


def make(root: Path) -> Layout:
    """A new results directory with its per-node folders, private to the operator."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for kind in (MUNGE, *NODE_KINDS):
        (root / kind).mkdir(mode=0o700, exist_ok=True)
    return Layout(root)


def _load(path: Path) -> Any:
    """A result file's JSON; None when it is missing or was cut short (a node that
    stopped mid-write): the collect step reports the missing result."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
