"""Where the results of one `kiln validate` run lie, for everything that reads or
writes them: the validate role (through the kiln_validate_paths filter), this package's
and collect step (tests write their fixtures at the same paths).

On the control node, in the run's results directory:
    slurm_state.json              scontrol's view before the run, and the plan
    prerequisites.json            what a suite asked for by name lacks (the run stopped)
    srun.json                     seconds of `srun true` per node
    mpi.json                      Kiln's MPI check across the nodes (and alone, if that failed)
    munge/NODE.json               the node decoding a controller's credential
    storage/NODE.json             mount check, fio JSON, small-file timings
    cold_import/NODE.json         the import's wall time
    collectives_node/NODE.json    torch benchmark within the node
    collectives_all/NODE.json     torch benchmark across the nodes (on the first node)
    nccl_tests.json               nccl-tests' output, within and across the nodes
    storage_steps.json, collectives_steps.json
                                  how each srun step ended, and why a suite was skipped
    pairs.json                    the pairwise runs
    burn_stress/NODE.json         a burn-in round's stress figures (kiln burn-in)
    burn_in_steps.json            how the round's stress step ended
    health/NODE.json              kiln-health's passive check after the round
A burn-in keeps one such directory per round.
Every file is written on the host where it is made, by Python (kiln_node.records, or the
probe and the benchmarks), then brought back by the role:
- on the first controller, NODE_ROOT/RUN-controller/NAME for each of CONTROLLER_RECORDS,
  brought back as NAME;
- on each node under test, NODE_ROOT/RUN/KIND.json for each of NODE_KINDS and
  NODE_RECORDS, brought back as KIND/NODE.json.
"""

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Self, get_args

from kiln import files
from kiln.errors import InputError
from kiln.roles import mpi

NODE_ROOT = "/var/lib/kiln/validate"
SLURM_STATE = "slurm_state.json"
PREREQUISITES = "prerequisites.json"
SRUN = "srun.json"
MPI = "mpi.json"
MUNGE = "munge"
STORAGE_STEPS = "storage_steps.json"
COLLECTIVES_STEPS = "collectives_steps.json"
NCCL_TESTS = "nccl_tests.json"
PAIRS = "pairs.json"
# `kiln burn-in`: the srun outcome of the round's stress, and each node's passive check.
BURN_IN_STEPS = "burn_in_steps.json"
HEALTH = "health"
# Written on each node by the probe or the benchmarks, then brought back per node.
NODE_KINDS = ("storage", "cold_import", "collectives_node", "collectives_all", "burn_stress")
# Written on each node by kiln_node.records (unmunge's outcome, kiln-health's checks).
NODE_RECORDS = (MUNGE, HEALTH)
# Written on the first controller by kiln_node.records (the run's state and the srun
# steps' outcomes), then brought back by name.
CONTROLLER_RECORDS = {
    "slurm_state": SLURM_STATE,
    "prerequisites": PREREQUISITES,
    "srun": SRUN,
    "mpi": MPI,
    "storage_steps": STORAGE_STEPS,
    "collectives_steps": COLLECTIVES_STEPS,
    "nccl_tests": NCCL_TESTS,
    "pairs": PAIRS,
    "burn_in_steps": BURN_IN_STEPS,
}


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


# --- records: what the role writes about the run itself --------------------------------


class Record:
    """A result file's content with its fields typed. from_json takes what a file held
    (None when missing) and keeps a field only when it has the declared kind of value:
    a record the run did not finish writing reads as its defaults."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        data = data if isinstance(data, dict) else {}
        kept = {}
        for item in fields(cls):  # type: ignore[arg-type]
            value = data.get(item.name)
            if value is not None and _fits(value, _kinds(item.type)):
                kept[item.name] = value
        return cls(**kept)

    @classmethod
    def many(cls, data: Any) -> list[Self]:
        """A list of records (a JSON list; anything else reads as none)."""
        return [cls.from_json(item) for item in data] if isinstance(data, list) else []

    @classmethod
    def by_name(cls, data: Any) -> dict[str, Self]:
        """A mapping of name (a node, a collective, a pair) to record."""
        if not isinstance(data, dict):
            return {}
        return {str(name): cls.from_json(item) for name, item in data.items()}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


def _kinds(annotation: Any) -> tuple[type, ...]:
    """The types a field declares, without None (`int | None` -> (int,))."""
    if isinstance(annotation, UnionType):
        return tuple(t for t in get_args(annotation) if t is not NoneType)
    return (annotation,)


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    """Whether `value` is of a kind the field declares (an int is a float; a bool is
    neither: JSON's true is not a count; NaN and Infinity, which Python's json reads, are
    no measurement: NaN passes every comparison)."""
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, int) and float in kinds:
        return True
    return isinstance(value, kinds)


@dataclass
class Step(Record):
    """How one srun step ended (kiln_node.records.step)."""

    rc: int | None = None
    stderr: str = ""
    skipped: bool = False

    def problem(self) -> str:
        """Why a step left no result, for the node's reason."""
        if self.skipped:
            return "the step did not run"
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return f"srun exited {self.rc}" + (f": {lines[-1]}" if lines else "")


@dataclass
class StorageSteps(Record):
    storage: dict = field(default_factory=dict)
    cold_import: dict = field(default_factory=dict)
    cold_import_skipped: str = ""  # why there was no cold-import test

    def step(self, name: str) -> Step:
        return Step.from_json(getattr(self, name))


@dataclass
class CollectivesSteps(Record):
    single_node: dict = field(default_factory=dict)
    multi_node: dict = field(default_factory=dict)
    single_node_skipped: str = ""  # a note: one rank per node crosses no link
    torch_skipped: str = ""  # why Kiln's benchmark did not run
    nccl_tests_skipped: str = ""  # why nccl-tests did not run
    # On a GPU profile, node -> why neither benchmark measured it (suites.unmeasured).
    unmeasured: dict = field(default_factory=dict)

    def step(self, name: str) -> Step:
        return Step.from_json(getattr(self, name))


@dataclass
class Prerequisites(Record):
    missing: list = field(default_factory=list)  # what a suite asked for by name lacks


@dataclass
class Munge(Record):
    rc: int | None = None
    status: str = ""  # unmunge's STATUS: line, or its error


@dataclass
class SlurmState(Record):
    """scontrol's view of the nodes before the run, and the plan made from it."""

    scontrol: str = ""
    plan: dict = field(default_factory=dict)  # drain.Plan.to_dict()


# --- records: what the probes and benchmarks write ---------------------------------------


@dataclass
class Command(Record):
    """A command a probe ran: `srun true` on a node, a nccl-tests binary, the mount
    check. rc is null when it ran out of time."""

    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float | None = None  # wall time, where the probe timed it

    def why(self) -> str:
        """Its own last word on failing: stderr's last line, else the exit status."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit {self.rc}"


@dataclass
class Mount(Record):
    """One declared mount (kiln.roles.autofs's check entry) as kiln-mount-check judged it."""

    name: str = ""
    path: str = ""
    indirect: bool = False
    fstype: str = ""
    source: str = ""
    server: str = ""
    required: bool = True
    unit: str = ""  # a mount made at boot: its systemd mount unit
    status: str = ""  # OK, WARN or FAIL
    reason: str = ""


@dataclass
class MountCheck(Command):
    mounts: list = field(default_factory=list)

    def entries(self) -> list[Mount]:
        return Mount.many(self.mounts)


@dataclass
class Fio(Record):
    rc: int | None = None
    json: str = ""  # fio's --output-format=json text
    stderr: str = ""


@dataclass
class SmallFiles(Record):
    files: int = 0
    ops: int = 0
    seconds: float = 0.0


@dataclass
class Target(Record):
    """One benchmarked directory: a healthy mount or declared scratch."""

    path: str = ""
    error: str = ""
    seq_write: dict = field(default_factory=dict)
    seq_read: dict = field(default_factory=dict)
    rand_read: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)

    def fio(self, name: str) -> Fio:
        return Fio.from_json(getattr(self, name))

    def small_files(self) -> SmallFiles:
        return SmallFiles.from_json(self.metadata)


@dataclass
class NodeStorage(Record):
    """storage/NODE.json: the node's mount check and each target's benchmarks."""

    node: str = ""
    mount_check: dict = field(default_factory=dict)
    targets: list = field(default_factory=list)

    def check(self) -> MountCheck:
        return MountCheck.from_json(self.mount_check)

    def target_list(self) -> list[Target]:
        return Target.many(self.targets)


@dataclass
class ColdImport(Record):
    """cold_import/NODE.json: the import's wall time, or why there is none."""

    node: str = ""
    module: str = ""
    seconds: float | None = None
    error: str = ""

    def problem(self) -> str:
        if self.error:
            return self.error
        return "" if self.seconds is not None else "the probe recorded no time"


@dataclass
class Point(Record):
    """One message size of one collective."""

    collective: str = ""
    size_bytes: int = 0
    time_us: float = 0.0
    algbw_gbps: float = 0.0
    busbw_gbps: float = 0.0


@dataclass
class Benchmark(Record):
    """What Kiln's torch.distributed benchmark prints on rank 0 (collectives_*/NODE.json,
    and each pair's result)."""

    benchmark: str = ""
    backend: str = ""
    ranks: int = 0
    hosts: list = field(default_factory=list)
    device: str = ""  # the GPU's name, or cpu
    torch: str = ""  # torch's version
    nccl: str | None = None  # NCCL's version (None on CPU)
    warmup: int = 0
    iters: int = 0
    results: list = field(default_factory=list)

    def points(self) -> list[Point]:
        return Point.many(self.results)


@dataclass
class NcclTests(Record):
    """nccl_tests.json: each collective's run (a Command), within each node and across."""

    single_node: dict = field(default_factory=dict)  # node -> collective -> Command
    multi_node: dict = field(default_factory=dict)  # collective -> Command

    def within(self, node: str) -> dict[str, Command]:
        return Command.by_name(self.single_node.get(node))

    def across(self) -> dict[str, Command]:
        return Command.by_name(self.multi_node)


@dataclass
class MpiPair(Record):
    """A ping-pong between the first ranks of two nodes."""

    node: str = ""
    peer: str = ""
    latency_us: float | None = None
    bandwidth_gbps: float | None = None


@dataclass
class MpiReport(Record):
    """What Kiln's MPI check (roles/mpi/files/kiln-mpi-check.c) prints on rank 0."""

    ranks: int | None = None
    hosts: list = field(default_factory=list)  # the host of each rank, in rank order
    pairs: list = field(default_factory=list)

    def pair_list(self) -> list[MpiPair]:
        return MpiPair.many(self.pairs)


@dataclass
class MpiRun(Record):
    """mpi.json: the check across the nodes (a Command), and where it failed, on each
    node alone; the nodes without the program, or why the check did not run at all."""

    all: dict = field(default_factory=dict)
    alone: dict = field(default_factory=dict)  # node -> Command
    unbuilt: list = field(default_factory=list)
    skipped: str = ""

    def across(self) -> Command:
        return Command.from_json(self.all)

    def each(self) -> dict[str, Command]:
        return Command.by_name(self.alone)


@dataclass
class Pair(Record):
    """One pair's run in pairs.json (keyed "a,b"): srun's end and the benchmark's output."""

    rc: int | None = None
    stderr: str = ""
    result: dict | None = None

    def benchmark(self) -> Benchmark | None:
        return None if self.result is None else Benchmark.from_json(self.result)


def for_role(results_dir: str, run: str) -> dict[str, Any]:
    """What the validate role needs of the layout (the kiln_validate_paths filter): the
    results directory, where the records are made on the nodes (`node_dir` and its
    `node_kinds`) and on the controller (`on_controller` by name, in
    `controller_dir`, brought back as `controller_records`), and the program it starts
    that another role builds."""
    controller_dir = f"{NODE_ROOT}/{run}-controller"
    return {
        "results": str(Path(results_dir)),
        "node_dir": f"{NODE_ROOT}/{run}",
        "node_kinds": [*NODE_KINDS, *NODE_RECORDS],
        "controller_dir": controller_dir,
        "controller_records": list(CONTROLLER_RECORDS.values()),
        "on_controller": {
            key: f"{controller_dir}/{name}" for key, name in CONTROLLER_RECORDS.items()
        },
        "mpi_check": mpi.CHECK_PROGRAM,
    }


def make(root: Path) -> Layout:
    """A new results directory with its per-node folders, private to the operator."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for kind in (MUNGE, HEALTH, *NODE_KINDS):
        (root / kind).mkdir(mode=0o700, exist_ok=True)
    return Layout(root)


def _load(path: Path) -> Any:
    """A result file's JSON; None when it is missing or was cut short (a node that
    stopped mid-write): the collect step reports the missing result."""
    try:
        return files.loads(files.read_bytes(path))
    except (InputError, ValueError):  # missing, no file, not JSON
        return None
