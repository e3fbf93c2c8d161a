"""`kiln nccl show`'s library: the NCCL settings each compute node's jobs get, where each came
from (the preset, an override, the file, the environment), and the groups whose nodes
do not all agree."""

from dataclasses import dataclass, field
from typing import Any

from kiln import files
from kiln.inventory.spec import ClusterSpec
from kiln.roles import nccl_env
from kiln.run.display import Displays
from kiln.run.events import RunSummary
from kiln.run.gather import gather

PLAYBOOK = "nccl_show.yml"
# Groups every inventory has: comparing them says nothing a named group would not.
IMPLICIT_GROUPS = ("all", "ungrouped")


@dataclass
class NodeSettings:
    node: str
    preset: str = ""
    settings: list[nccl_env.Effective] = field(default_factory=list)
    note: str = ""  # what is missing: no file, no record of Kiln's
    error: str = ""  # why the node could not be read

    def to_json(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "settings": [vars(e) for e in self.settings],
            "note": self.note,
            "error": self.error,
        }


@dataclass
class Shown:
    nodes: list[NodeSettings]
    differences: list[str]
    summary: RunSummary

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": {n.node: n.to_json() for n in self.nodes},
            "differences": self.differences,
            "run": self.summary.run,
        }


def read_node(node: str, raw: dict[str, Any]) -> NodeSettings:
    """A node's settings from what the playbook brought back."""
    fact = files.loads(raw["fact"]) if raw.get("fact", "").strip() else {}
    environment = dict(
        line.partition("=")[::2] for line in raw.get("environment", []) if "=" in line
    )
    settings = nccl_env.effective(raw.get("conf", ""), fact, environment)
    shown = NodeSettings(node, fact.get("preset", ""), settings)
    if not raw.get("conf"):
        shown.note = f"no {nccl_env.CONF}: the nccl_env role has not run here"
    elif not fact:
        shown.note = f"{nccl_env.CONF} was not written by Kiln"
    return shown


def show(spec: ClusterSpec, nodes: list[str], display: Displays) -> Shown:
    """Read the given compute nodes."""
    gathered = gather(PLAYBOOK, spec, nodes, display, "nccl_show_dir")
    shown = [
        read_node(name, gathered.json(name))
        if name in gathered.texts
        else NodeSettings(name, error=gathered.errors[name])
        for name in nodes
    ]
    groups = {g: m for g, m in spec.groups.items() if g not in IMPLICIT_GROUPS}
    readable = {n.node: n.settings for n in shown if not n.error}
    return Shown(shown, nccl_env.differences(readable, groups), gathered.summary)
