"""Playbooks that bring one file per node back to the control node (`kiln nccl show`,
`kiln health`): run one with a temporary directory for the files, then read what each
node left there, or say why it left nothing."""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import files, paths
from kiln.errors import ExitCode, KilnError
from kiln.inventory.spec import ClusterSpec
from kiln.run.display import Displays
from kiln.run.events import RunSummary


@dataclass
class Gathered:
    summary: RunSummary
    texts: dict[str, str] = field(default_factory=dict)  # node -> the file it brought back
    errors: dict[str, str] = field(default_factory=dict)  # node -> why it brought none

    def json(self, node: str) -> Any:
        """The JSON `node` brought back; one line naming it when that is no JSON Kiln
        can read (cut short, nested past Python's limit: kiln.files.loads), exit 4."""
        try:
            return files.loads(self.texts[node])
        except ValueError as exc:
            raise KilnError(
                f"{node}: what it brought back is not JSON Kiln can read ({exc}) "
                f"(kiln runs show {self.summary.run})",
                ExitCode.HOSTS_FAILED,
            ) from None


def gather(
    playbook: str,
    spec: ClusterSpec,
    nodes: list[str],
    display: Displays,
    directory_variable: str,
    extravars: dict[str, Any] | None = None,
) -> Gathered:
    """Run PLAYBOOK on NODES; it writes `{{ DIRECTORY_VARIABLE }}/<node>.json`."""
    from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: only when running

    paths.state_dir().mkdir(parents=True, exist_ok=True)
    prefix = playbook.removesuffix(".yml") + "-"
    with tempfile.TemporaryDirectory(dir=paths.state_dir(), prefix=prefix) as tmp:
        summary = run_playbook(
            RunRequest(
                playbook=playbook,
                inventory=spec,
                limit=",".join(nodes),
                display=display,
                extravars={directory_variable: tmp, **(extravars or {})},
            )
        )
        failures = {f.host: f"{f.task}: {f.message}" for f in summary.failures}
        gathered = Gathered(summary)
        for name in nodes:
            found = Path(tmp) / f"{name}.json"
            if found.is_file():
                gathered.texts[name] = files.read_text(found, f"{name}.json from {name}")
            else:
                # A run that failed outside any host (a playbook that does not parse)
                # says why in its summary; a host that never ran the task says nothing.
                gathered.errors[name] = (
                    failures.get(name) or summary.error or "the run brought nothing back"
                )
    return gathered


def from_controller(
    playbook: str,
    spec: ClusterSpec,
    display: Displays,
    directory_variable: str,
    runs_there: str,
    read: str,
    extravars: dict[str, Any] | None = None,
) -> tuple[str, Any]:
    """(the first controller, the JSON it brought back) of a playbook that reads what
    RUNS_THERE keeps there; one line naming READ and the run when it brought nothing."""
    controllers = spec.group("slurm_controller")
    if not controllers:
        raise KilnError(f"{spec.path}: no host in slurm_controller, where {runs_there}")
    controller = controllers[0]
    gathered = gather(playbook, spec, [controller], display, directory_variable, extravars)
    if controller not in gathered.texts:
        raise KilnError(
            f"{controller}: {read} could not be read: "
            f"{gathered.errors[controller]} (kiln runs show {gathered.summary.run})",
            ExitCode.HOSTS_FAILED,
        )
    return controller, gathered.json(controller)
