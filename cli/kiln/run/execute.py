"""Run a playbook through ansible-runner, with live progress and a kept record.

One run is one private data dir under Kiln's state directory (see kiln.runs), so
`kiln runs show` can re-render it later and AWX, which also drives ansible-runner,
sees the same playbooks the same way.
"""

import contextlib
import errno
import json
import os
import re
import shlex
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import __version__, files, paths
from kiln.errors import ExitCode, InputError, KilnError
from kiln.inventory import ClusterSpec
from kiln.lock import Lock
from kiln.run import cleanup, extravars, record, skips
from kiln.run.display import Display, Displays, for_people
from kiln.run.events import EventAccumulator, RunSummary


@dataclass
class RunRequest:
    playbook: str
    inventory: ClusterSpec
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    check: bool = False
    diff: bool = False
    # Kiln's variables for the playbook, what it read from dumps, Slurm, nodes and reports
    # included: passed `!unsafe`, never rendered as a template (kiln.run.extravars).
    extravars: dict[str, Any] = field(default_factory=dict)
    # The operator's own -e values: Ansible renders them as it would its own -e.
    operator_extravars: dict[str, Any] = field(default_factory=dict)
    display: Displays = for_people  # how the run shows while it goes (silent for --json)
    lock: Lock | None = None  # the inventory's lock, told the run id
    # The inventory the record names when INVENTORY is a temporary one made from it (an
    # image build's one host): the record outlives the temporary file.
    recorded_inventory: Path | None = None


def available_playbooks() -> list[str]:
    return sorted(p.name for p in paths.playbooks_dir().glob("*.yml"))


def resolve_playbook(name: str) -> Path:
    """Kiln's playbook by name ('site', 'site.yml'), or the path of an operator's own."""
    given = Path(name)
    if given.suffix in (".yml", ".yaml") and given.is_file() and given.parent != Path():
        return given.resolve()
    stem = given.name
    candidate = paths.playbooks_dir() / (
        stem if stem.endswith((".yml", ".yaml")) else stem + ".yml"
    )
    if not candidate.is_file():
        known = ", ".join(available_playbooks())
        raise InputError(f"no playbook {name!r} in Kiln (available: {known}; or give a path)")
    return candidate


# ansible-core's own default, which setting ANSIBLE_COLLECTIONS_PATH would replace.
DEFAULT_COLLECTIONS_PATHS = ["~/.ansible/collections", "/usr/share/ansible/collections"]


def collections_path() -> str:
    """Kiln's link to its own content first (an installed copy of kiln.cluster, maybe
    another version, never shadows the roles being run), then the operator's paths."""
    theirs = os.environ.get("ANSIBLE_COLLECTIONS_PATH")
    rest = [theirs] if theirs else DEFAULT_COLLECTIONS_PATHS
    return os.pathsep.join([str(paths.collections_dir()), *rest])


def strategy_env() -> dict[str, str]:
    """Mitogen's linear strategy, unless the operator names a strategy of their own
    (ANSIBLE_STRATEGY=linear is the way back to Ansible's). Mitogen runs each host's
    tasks in one Python interpreter it keeps over one SSH connection, instead of a new
    interpreter and module upload per task: a no-op provision takes about half as long
    (docs/performance.md). Same plays, same order, same results as plain Ansible."""
    if os.environ.get("ANSIBLE_STRATEGY"):
        return {}
    try:
        import ansible_mitogen
    except ImportError:  # a Kiln installed without its dependencies: Ansible's default
        return {}
    strategies = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    return {"ANSIBLE_STRATEGY_PLUGINS": str(strategies), "ANSIBLE_STRATEGY": "mitogen_linear"}


# plugins/callback/preload_filters.py: the roles' filters loaded once, before Ansible
# forks a worker per host and task, not again in every worker.
PRELOAD_CALLBACK = "kiln.cluster.preload_filters"


def callbacks_enabled() -> str:
    """The operator's callbacks_enabled, and Kiln's preload."""
    theirs = os.environ.get("ANSIBLE_CALLBACKS_ENABLED", "")
    return ",".join([*filter(None, theirs.split(",")), PRELOAD_CALLBACK])


def ansible_env() -> dict[str, str]:
    # ansible-playbook comes with Kiln's own environment, which may not be on PATH.
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        "ANSIBLE_CONFIG": str(paths.ansible_cfg()),
        "ANSIBLE_ROLES_PATH": str(paths.roles_dir()),
        "ANSIBLE_COLLECTIONS_PATH": collections_path(),
        "ANSIBLE_CALLBACKS_ENABLED": callbacks_enabled(),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        **strategy_env(),
    }


def _cmdline(request: RunRequest, playbook: Path, operator_file: Path | None) -> str | None:
    args = []
    if operator_file:  # before Kiln's file (runner's extravars), which wins a clash
        args += ["-e", shlex.quote(f"@{operator_file}")]
    if request.check:
        args.append("--check")
    if request.diff:
        args.append("--diff")
    ours = skips.kiln_skips(playbook.name, request.tags, request.skip_tags, request.check)
    if skip_tags := skips.joined(request.skip_tags, ours):
        args += ["--skip-tags", shlex.quote(skip_tags)]
    return " ".join(args) or None


class Interrupt:
    """Turns Ctrl-C, and SIGTERM (what systemd and CI send), into a cancel request, so
    ansible-runner stops Ansible cleanly (no orphaned ansible-playbook) and the run's
    record is still written."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "Interrupt":
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: object) -> None:
        self.requested = True


_ERROR_LINE = re.compile(r"^(?:ERROR!|\[ERROR\]:?)\s*(.*)")


def _ansible_error(run_dir: Path) -> str | None:
    """The first error Ansible printed, for runs that failed before reaching any host."""
    stdout = run_dir / "artifacts" / record.RUNNER_IDENT / "stdout"
    if not stdout.is_file():
        return None
    for line in stdout.read_text(errors="replace").splitlines():
        if match := _ERROR_LINE.match(line.strip()):
            return match.group(1).strip()
    return None


def _secret_file(text: str, suffix: str) -> Path:
    directory = paths.state_dir() / "tmp"
    name = None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix="extravars-", suffix=suffix, dir=directory)
        with os.fdopen(handle, "w") as out:  # mkstemp creates it 0600
            out.write(text)
    except OSError as exc:
        if name:
            Path(name).unlink(missing_ok=True)
        raise files.cannot_write(Path(name) if name else directory, exc) from None
    return Path(name)


@contextlib.contextmanager
def _removed(*temporaries: Path | None) -> Iterator[None]:
    try:
        yield
    finally:
        for path in temporaries:
            if path:
                path.unlink(missing_ok=True)


def new_record(request: RunRequest, playbook: Path, **marks: Any) -> tuple[record.RunRecord, Path]:
    """A new run's directory and its record (MARKS: more of its fields, e.g. a sliced
    run's parts), saved as "running". The fact cache is checked first: a bad
    $KILN_FACT_CACHE leaves no record."""
    paths.fact_cache()
    run_id, run_dir = record.new_run_dir(playbook.name)
    kept = record.RunRecord(
        run=run_id,
        playbook=playbook.name,
        inventory=str(request.recorded_inventory or request.inventory.source),
        limit=request.limit,
        tags=request.tags,
        check=request.check,
        diff=request.diff,
        kiln_version=__version__,
        started=record.now(),
        pid=os.getpid(),
        pid_start=record.process_start(os.getpid()),
        control_host=socket.gethostname(),
        **marks,
    )
    record.save(run_dir, kept)
    return kept, run_dir


def run_playbook(request: RunRequest, **marks: Any) -> RunSummary:
    """REQUEST as one run and its record (MARKS: as new_record's)."""
    playbook = resolve_playbook(request.playbook)
    kept, run_dir = new_record(request, playbook, **marks)
    return finish(kept, run_dir, lambda: _run(request, playbook, run_dir, kept))


def finish(kept: record.RunRecord, run_dir: Path, run: Callable[[], RunSummary]) -> RunSummary:
    """Do RUN and write how it ended into its record, whatever happens."""
    run_id = kept.run
    try:
        summary = run()
    except BaseException as exc:
        # Cut off (a full disk, a bug): stop what it started, and never leave the record
        # "running". If even that cannot be written, `kiln runs list` finds its process
        # gone and says "lost".
        cleanup.stop(run_id)
        kept.finished = record.now()
        kept.status = "canceled" if isinstance(exc, KeyboardInterrupt) else "failed"
        kept.exit_code = int(ExitCode.INTERRUPTED if kept.status == "canceled" else ExitCode.FAILED)
        with contextlib.suppress(KilnError):
            record.save(run_dir, kept)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise files.cannot_write(Path(exc.filename or run_dir), exc) from None
        raise
    kept.finished = record.now()
    kept.status = summary.status
    kept.exit_code = int(summary.exit_code)
    # Not writable now (a full disk): the record stays "running" and, its process gone,
    # reads as "lost"; the run's own end is unknown to it, so it is not marked failed.
    record.save(run_dir, kept)
    return summary


def event_handler(accumulator: EventAccumulator, display: Display) -> Callable[[dict], bool]:
    """What ansible-runner calls with each event, in Kiln's process (bench/events.py
    measures its cost per event)."""

    def on_event(event: dict[str, Any]) -> bool:
        accumulator.feed(event)
        display.update(event, accumulator)
        return True  # keep the event in job_events/: `kiln runs show` replays them

    return on_event


def _run(request: RunRequest, playbook: Path, run_dir: Path, kept: record.RunRecord) -> RunSummary:
    # One part of a sliced provision run alone (`--part`) is titled by its part.
    title = f"{kept.part} ({kept.run})" if kept.part else None
    with Interrupt() as interrupt:
        summary, tasks = run_part(request, playbook, run_dir, kept.run, interrupt, title)
    kept.tasks_started = tasks
    return summary


def run_part(
    request: RunRequest,
    playbook: Path,
    private_dir: Path,
    run_id: str,
    interrupt: "Interrupt",
    title: str | None = None,
) -> tuple[RunSummary, int]:
    """One ansible-runner run in PRIVATE_DIR (a run's own directory, or one part of a
    sliced run: kiln.run.sliced), stopped when INTERRUPT is requested: its summary and
    the tasks it started."""
    import ansible_runner  # heavy: imported only when a run happens

    if request.lock:
        request.lock.running(run_id)
    accumulator = EventAccumulator(run_id, playbook.name)
    title = title or f"{playbook.name} ({run_id})"
    display = request.display(title, record.last_task_count(playbook.name))
    fact_cache = paths.fact_cache()

    # Extra variables may hold secrets (-e munge_key_b64=...): ansible-runner would put a
    # dict of them on ansible-playbook's command line (visible in ps) and in the run's
    # artifacts/command. 0600 files, removed after the run, keep them off both: Kiln's
    # as one `!unsafe` mapping, the operator's -e (if any) as they gave them.
    # (The roles find the download cache themselves, as plain ansible-playbook does:
    # the kiln_cache_dir lookup.)
    kiln_vars = {"kiln_version": __version__, **request.extravars}
    kiln_file = _secret_file(extravars.unsafe_yaml(kiln_vars), ".yml")
    operator_file = None
    if request.operator_extravars:
        operator_file = _secret_file(json.dumps(request.operator_extravars), ".json")
    with display, _removed(kiln_file, operator_file):
        result = ansible_runner.run(
            private_data_dir=str(private_dir),
            ident=record.RUNNER_IDENT,
            project_dir=str(paths.content_root()),
            playbook=str(playbook),
            # What Kiln checked: the directory, or the one file the operator named.
            inventory=str(request.inventory.source),
            limit=request.limit,
            tags=request.tags,
            cmdline=_cmdline(request, playbook, operator_file),
            extravars=str(kiln_file),
            envvars={**ansible_env(), cleanup.MARKER: run_id},
            # Absolute, so facts outlive the run (a --limit run needs its peers' facts).
            fact_cache=str(fact_cache),
            event_handler=event_handler(accumulator, display),
            cancel_callback=lambda: interrupt.requested,
            suppress_env_files=True,
            quiet=True,
        )
    if interrupt.requested or result.status in ("canceled", "timeout"):
        cleanup.stop(run_id)
    summary = accumulator.summary
    summary.status = "canceled" if interrupt.requested else result.status
    if summary.status == "failed" and not summary.failures:
        summary.error = _ansible_error(private_dir) or f"ansible-playbook exited {result.rc}"
    return summary, accumulator.tasks_started
