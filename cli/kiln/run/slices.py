"""`kiln provision --slices N`: which runs a sliced provision is made of.

The compute nodes, in hostlist order, are cut into N contiguous slices: neighbours by
name (a rack, an NVLink domain) stay in one ansible-playbook, so what a node reads from
its peers' facts (IMEX peers, a rack's topology) is gathered by the run it is in.
Then one run for every host that is not a compute node (controllers, login, storage,
monitoring) writes slurm.conf, gres.conf and topology.conf from the compute nodes'
facts in Kiln's fact cache, which the slices filled. Last, each slice's Slurm check:
its nodes, as the controller now sees them.
"""

from dataclasses import dataclass, replace

from kiln import hostlist, os_support
from kiln.errors import InputError
from kiln.inventory import ClusterSpec
from kiln.run.execute import RunRequest

# Each slice's run is told it is one, so its compute nodes do not wait for the
# controller to see them (it may not know a new node until the controllers' run).
SLICE_VAR = "kiln_slice"
# The compute nodes' Slurm state, once the controllers' run is done.
SLURM_STATE_PLAYBOOK = "slurm_state.yml"


@dataclass
class Part:
    name: str  # slice-1, controllers, slurm-1: its directory under the run's parts/
    request: RunRequest
    hosts: list[str]


@dataclass
class Plan:
    slices: int
    note: str | None  # said to the operator: the slices were fewer than asked
    phases: list[list[Part]]  # one after another; the parts of one phase side by side

    @property
    def parts(self) -> list[Part]:
        """Every part, in run order."""
        return [part for phase in self.phases for part in phase]

    def part(self, name: str) -> Part:
        """One part by name: what `--part NAME` runs alone on this control machine."""
        for part in self.parts:
            if part.name == name:
                return part
        names = ", ".join(part.name for part in self.parts)
        raise InputError(f"{name!r}: no such part of {self.slices} slices ({names})")


def split(nodes: list[str], count: int) -> list[list[str]]:
    """NODES (in order) as COUNT contiguous slices whose sizes differ by one at most."""
    size, extra = divmod(len(nodes), count)
    slices, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        slices.append(nodes[start:end])
        start = end
    return slices


def fitted(asked: int, nodes: int) -> tuple[int, str | None]:
    """How many slices NODES compute nodes make when ASKED for, and what to tell the
    operator when that is fewer (no slice is ever empty)."""
    if asked < 1:
        raise InputError(f"{asked} slices: at least 1")
    if asked > nodes:
        return nodes, f"{nodes} compute node(s), so {nodes} slice(s)"
    return asked, None


def _slurm_checked(request: RunRequest) -> bool:
    """Whether the run includes the slurm role's check of each node's state."""
    tags = set(filter(None, (request.tags or "").split(",")))
    skipped = set(filter(None, (request.skip_tags or "").split(",")))
    wanted = not tags or bool(tags & {"slurm", "all"})
    return wanted and "slurm" not in skipped and not request.check


def _provisioned_before(spec: ClusterSpec) -> None:
    """A slice's compute nodes take the munge key from the first controller (munge's
    key host) and wait for its slurmctld, which only a run of the controllers makes:
    on a first provision they would find neither. Facts cached for that controller say
    a run from this control machine has reached it."""
    controller = spec.group("slurm_controller")[0]
    if controller not in os_support.cached_facts([controller]):
        raise InputError(
            f"{controller} has no cached facts (never provisioned from here): provision "
            "the cluster once unsliced; the slices' nodes take the munge key and "
            "slurmctld from it"
        )


def plan(request: RunRequest, slices: int) -> Plan:
    """The runs of `kiln provision --slices SLICES` for REQUEST (site.yml's)."""
    spec: ClusterSpec = request.inventory
    # The command refuses a limit with slices: they split the whole inventory.
    assert not request.limit, "a sliced run has no limit of its own"
    _provisioned_before(spec)
    compute = spec.compute_nodes(None, "provision in slices")
    slices, note = fitted(slices, len(compute))
    members = set(compute)
    # Never empty: an inventory without a slurm_controller is refused when loaded.
    others = sorted((h for h in spec.hosts if h not in members), key=hostlist.sort_key)
    cut = split(compute, slices)

    def part(name: str, hosts: list[str], playbook: str, **changes: object) -> Part:
        limit = ",".join(hosts)
        return Part(name, replace(request, playbook=playbook, limit=limit, **changes), hosts)

    sliced = {**request.extravars, SLICE_VAR: True}
    phases = [
        [
            part(f"slice-{i}", hosts, request.playbook, extravars=sliced)
            for i, hosts in enumerate(cut, 1)
        ],
        [part("controllers", others, request.playbook)],
    ]
    if _slurm_checked(request):
        phases.append(
            [
                part(f"slurm-{i}", hosts, SLURM_STATE_PLAYBOOK, tags=None, skip_tags=None)
                for i, hosts in enumerate(cut, 1)
            ]
        )
    return Plan(slices, note, phases)
