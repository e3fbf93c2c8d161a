"""The command lines Kiln's programs give Slurm: an srun step over chosen nodes, the
reservation that holds them, and reading, draining, resuming and rebooting nodes.
Built from data, so a caller changes a setting by name, never by its place in a list;
each an argv list, so no value passes through a shell."""

from dataclasses import dataclass, replace

USERS = "root"  # Kiln's steps run as root; no one else's job lands in its reservations


@dataclass(frozen=True)
class Srun:
    """One srun step: `tasks_per_node` tasks on each of `nodes`, all started at once."""

    nodes: tuple[str, ...]
    job_name: str
    reservation: str = ""
    tasks_per_node: int = 1
    minutes: int | None = None  # --time; None: the partition's limit
    immediate_s: int | None = 60  # a node that cannot take the step now fails it
    mpi: str = ""  # e.g. pmix: ranks started through PMIx
    nice: int | None = None
    kill_on_bad_exit: bool | None = None  # None: srun's default
    label: bool = False  # each output line prefixed with its task number
    quiet: bool = False

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))  # a list given is kept as is

    def but(self, **changes) -> "Srun":
        return replace(self, **changes)

    def argv(self, *command: str) -> list[str]:
        optional = {
            "--mpi": self.mpi or None,
            "--reservation": self.reservation or None,
            "--time": self.minutes,
            "--nice": self.nice,
            "--immediate": self.immediate_s,
            "--kill-on-bad-exit": None
            if self.kill_on_bad_exit is None
            else int(self.kill_on_bad_exit),
        }
        return [
            "srun",
            f"--nodes={len(self.nodes)}",
            f"--nodelist={','.join(self.nodes)}",
            f"--ntasks-per-node={self.tasks_per_node}",
            *(f"{name}={value}" for name, value in optional.items() if value is not None),
            *(["--label"] if self.label else []),
            *(["--quiet"] if self.quiet else []),
            f"--job-name={self.job_name}",
            *command,
        ]


def reserve(name: str, nodes: list[str], minutes: int, ignore_jobs: bool = False) -> list[str]:
    """A maintenance reservation of `nodes` from now. Without ignore_jobs Slurm refuses
    it while a node runs a job, so it never overlaps work (an idle-only run); with it, the
    reservation waits for no job to end (a run the operator asked for now)."""
    flags = "MAINT,IGNORE_JOBS" if ignore_jobs else "MAINT"
    return [
        "scontrol",
        "create",
        f"ReservationName={name}",
        f"Nodes={','.join(nodes)}",
        f"Users={USERS}",
        f"Flags={flags}",
        "StartTime=now",
        f"Duration={minutes}",
    ]


def release(name: str) -> list[str]:
    return ["scontrol", "delete", f"ReservationName={name}"]


def show_nodes(nodes: list[str] | tuple[str, ...] = ()) -> list[str]:
    """One line per node (kiln_node.slurm_state.parse reads it); no nodes: every node."""
    return ["scontrol", "--oneliner", "show", "node", *([",".join(nodes)] if nodes else [])]


def drain(node: str, reason: str) -> list[str]:
    """Slurm runs no new job on the node; `reason` is kept as given (with the prefix of
    the program that drains, kiln_node.slurm_state)."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def resume(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def reboot(nodes: list[str] | tuple[str, ...], reason: str) -> list[str]:
    """Slurm drains the nodes, reboots each when its jobs end (RebootProgram) and
    resumes it once slurmd registers again; `reason` shows meanwhile."""
    return ["scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", ",".join(nodes)]


def reboot_drained(nodes: list[str] | tuple[str, ...]) -> list[str]:
    """Slurm reboots nodes Kiln drained and emptied (RebootProgram) now. They come back
    drained: Slurm lifts only the drain of its own `reboot ASAP`, and `nextstate` takes
    no DRAIN before Slurm 23 (22.05: "Valid states: DOWN, RESUME"), so none is given."""
    return ["scontrol", "reboot", ",".join(nodes)]


def reboot_to_drain(node: str, reason: str) -> list[str]:
    """The repair ladder's reboot (kiln_node.repair_classes): Slurm reboots the drained
    node once empty and it comes back drained with `reason`, for its re-check. Slurm
    23.02 and later; on 22.05 (no DRAIN nextstate) reboot_drained gives the same end."""
    return ["scontrol", "reboot", "ASAP", "nextstate=DRAIN", f"reason={reason}", node]
