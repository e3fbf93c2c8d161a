"""`kiln repair`: the repair loop (the repair role's kiln-repair on the first controller)
as the control node sees it: the breaker, the nodes in repair and their last step, the
history; `kiln repair reset` closes the breaker.

The controller's program decides and acts; this module reads its records with the same
kiln_node code (kiln_node.repair_records)."""

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from kiln.errors import ExitCode, KilnError
from kiln.inventory.spec import ClusterSpec
from kiln.run.display import Displays
from kiln_node import repair_decision, repair_records, slurm_state
from kiln_node.repair_records import Breaker, Entry

PLAYBOOK = "repair_status.yml"


@dataclass
class InRepair:
    node: str
    state: str  # Slurm's
    reason: str
    step: str = ""  # the last action of its episode (history), or "" (none yet)
    outcome: str = ""
    since: str = ""


@dataclass
class Status:
    controller: str
    breaker: Breaker
    history: list[Entry]
    nodes: list[InRepair] = field(default_factory=list)
    slurm_error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "controller": self.controller,
            "breaker": asdict(self.breaker),
            "nodes": [asdict(n) for n in self.nodes],
            "slurm_error": self.slurm_error,
        }


def stamp(when: float | None) -> str:
    if when is None:
        return ""
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")


def in_repair(nodes_text: str, history: list[Entry]) -> list[InRepair]:
    """Nodes drained by Kiln's checks, not answering Slurm, or sent to RMA, each with
    the last action of its open episode."""
    found = []
    for name, state in sorted(slurm_state.parse(nodes_text).items()):
        rma = state.reason.startswith(slurm_state.RMA_PREFIX)
        if not (rma or repair_decision.out_by_kiln(state)):
            continue
        mine = [e for e in history if e.node == name]
        last = mine[-1] if mine and (rma or mine[-1].step not in repair_decision.ENDS) else None
        found.append(
            InRepair(name, state.state, state.reason, last.step if last else "",
                     last.outcome if last else "", stamp(last.time) if last else "")
        )  # fmt: skip
    return found


def read(spec: ClusterSpec, display: Displays, reset: bool = False) -> Status:
    """The first controller's records (after closing the breaker, with reset)."""
    from kiln.run.gather import from_controller

    controller, data = from_controller(
        PLAYBOOK, spec, display, "repair_dir", "kiln-repair runs", "the repair records",
        {"repair_reset": reset},
    )  # fmt: skip
    where = f"{controller}:repair_state_dir"
    try:
        history = repair_records.parse_history(data["history"], f"{where}/history.jsonl")
    except repair_records.RecordError as exc:
        raise KilnError(str(exc), ExitCode.HOSTS_FAILED) from None
    breaker = (
        Breaker(False)
        if data["breaker"] is None
        else repair_records.parse_breaker(data["breaker"], f"{where}/breaker.json")
    )
    status = Status(controller, breaker, history, slurm_error=data["nodes_error"])
    status.nodes = in_repair(data["nodes"], history)
    return status
