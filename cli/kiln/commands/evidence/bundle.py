"""`kiln evidence NODE`: the node's evidence bundle (kiln_node.evidence, run on the node
by the repair role's kiln-evidence), brought into the run's own directory."""

import shutil
import tempfile
from pathlib import Path

from kiln import paths
from kiln.errors import ExitCode, KilnError
from kiln.inventory.spec import ClusterSpec
from kiln.run.display import Displays

PLAYBOOK = "evidence.yml"


def collect(spec: ClusterSpec, node: str, display: Displays) -> Path:
    """The bundle's path on the control node, under the run's directory."""
    from kiln.run.execute import RunRequest, run_playbook

    paths.state_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=paths.state_dir(), prefix="evidence-") as tmp:
        summary = run_playbook(
            RunRequest(PLAYBOOK, spec, limit=node, display=display, extravars={"evidence_dir": tmp})
        )
        found = sorted(Path(tmp).glob("evidence-*.tar.gz"))
        if not found:
            why = "; ".join(f"{f.task}: {f.message}" for f in summary.failures) or "none fetched"
            raise KilnError(
                f"{node}: no evidence bundle: {why} (kiln runs show {summary.run})",
                ExitCode.HOSTS_FAILED,
            )
        target = paths.runs_dir() / summary.run / "evidence"
        target.mkdir(parents=True, exist_ok=True)
        return Path(shutil.move(str(found[-1]), target / found[-1].name))
