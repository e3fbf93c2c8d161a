"""`kiln health`: runs `health_check.yml` (kiln-health on each compute node now) and
reads what each node brought back."""

from kiln.health import Health, NodeHealth, read_node
from kiln.inventory.spec import ClusterSpec
from kiln.run.display import Displays
from kiln.run.gather import gather

PLAYBOOK = "health_check.yml"


def check(spec: ClusterSpec, nodes: list[str], display: Displays, no_slurm: bool) -> Health:
    """Run the check on the given compute nodes."""
    gathered = gather(PLAYBOOK, spec, nodes, display, "health_dir", {"health_no_slurm": no_slurm})
    checked = [
        read_node(name, gathered.texts[name])
        if name in gathered.texts
        else NodeHealth(name, error=gathered.errors[name])
        for name in nodes
    ]
    return Health(checked, gathered.summary)
