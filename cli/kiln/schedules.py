"""Kiln's two systemd timers, and what they share.

- The scheduled active check (`health_active_schedule`): the health role installs its
  timer on the first controller, which runs kiln-health-active there (it needs nothing
  but Slurm); `kiln health --schedule` reads its runs (kiln.health.schedule).
- The scheduled `kiln validate` (`validate_schedule`): a timer on the machine that
  runs Kiln, written here (`install`).

Both are systemd OnCalendar expressions written into a unit, checked by one rule
(`one_line_problem`); their defaults are set apart so the two never hold the same
idle nodes at once.

The scheduled `kiln validate`: the suites need what only Kiln's control node has (the
inventory, the credentials to reach the nodes, the judging and the report history), so
the weekly run is started there, as `kiln validate --idle-only`: it tests only idle
nodes, held in a reservation that waits for no job, and its report joins the history
like any other run.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kiln import files, formats, paths
from kiln.errors import ExitCode, InputError, KilnError, PrerequisiteError

if TYPE_CHECKING:  # kiln.inventory's checks import this module
    from kiln.inventory.spec import ClusterSpec


@dataclass(frozen=True)
class Calendar:
    """A timer's inventory variable and its default OnCalendar expression."""

    variable: str
    default: str


# The health role's default (roles/health/defaults/main.yml; a test keeps them equal).
HEALTH_ACTIVE = Calendar("health_active_schedule", "Sun *-*-* 03:00:00")
# Two hours after the active check (a 60-minute hold), so the two never ask for the
# same idle nodes at once.
VALIDATE = Calendar("validate_schedule", "Sun *-*-* 05:00:00")
DEFAULT_SCHEDULE = VALIDATE.default
VARIABLE = VALIDATE.variable


def one_line_problem(calendar: Calendar, value: str) -> str:
    """It is written into a systemd unit: a second line would be a second setting, and
    only an OnCalendar expression's characters belong there (systemd-analyze judges the
    rest where the timer is installed). Empty: no timer."""
    if not value or not (why := formats.calendar(value)):
        return ""
    return f'{calendar.variable} {value!r}: {why} (such as "{calendar.default}")'


@dataclass
class Timer:
    name: str  # the unit name without its suffix
    directory: Path
    schedule: str  # empty: no timer
    user: bool  # a user unit (systemctl --user) rather than a system one

    def systemctl(self, *args: str) -> list[str]:
        return ["systemctl", *(["--user"] if self.user else []), *args]


def unit_name(inventory: Path) -> str:
    """One timer per inventory: its directory's name, made safe, and a short hash of
    the whole path so that two `prod` inventories do not share a unit."""
    resolved = inventory.resolve()
    stem = resolved.name if resolved.is_dir() else resolved.parent.name
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "inventory"
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return f"kiln-validate-{safe}-{digest}"


def unit_dir() -> tuple[Path, bool]:
    """Where the units go: $KILN_SYSTEMD_UNIT_DIR, else the system's directory for root
    and the user's own otherwise (a user timer runs while the user is logged in, or
    always with `loginctl enable-linger`)."""
    if override := os.environ.get("KILN_SYSTEMD_UNIT_DIR"):
        return Path(override), os.geteuid() != 0
    if os.geteuid() == 0:
        return Path("/etc/systemd/system"), False
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user", True


def schedule_of(spec: "ClusterSpec") -> str:
    controllers = spec.group("slurm_controller")
    if not controllers:
        raise InputError(f"{spec.path}: no host in slurm_controller: the suites run through Slurm")
    value = spec.hosts[controllers[0]].vars.get(VARIABLE, DEFAULT_SCHEDULE)
    text = "" if value is None else str(value)
    try:
        _one_line(text)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return text.strip()


def _one_line(value: str, _groups: object = None) -> None:
    if problem := one_line_problem(VALIDATE, value):
        raise ValueError(problem)


# Checked by `kiln inventory check` (kiln.inventory.checks) as well as here.
INVENTORY_CHECKS = {VARIABLE: (str, _one_line)}


def check_calendar(schedule: str) -> str:
    """systemd's own reading of the expression: the next time it elapses."""
    if not shutil.which("systemd-analyze"):
        raise PrerequisiteError("scheduling needs systemd: systemd-analyze is not on PATH")
    done = subprocess.run(
        ["systemd-analyze", "calendar", schedule], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["not a calendar expression"])[-1]
        raise InputError(f"{VARIABLE}: {schedule!r}: {why}")
    found = re.search(r"Next elapse:\s*(.+)", done.stdout)
    return found.group(1).strip() if found else "never"


def units(spec: "ClusterSpec", timer: Timer, kiln: Path) -> dict[str, str]:
    """The service and timer files. The service runs this same Kiln (its absolute path)
    with the same state directory, so the report lands in this history."""
    inventory = spec.path.resolve()
    bin_dir = kiln.parent  # ansible-playbook lives beside kiln in its virtualenv
    path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    header = f"# Managed by Kiln (kiln validate --install-timer -i {inventory}).\n"
    service = (
        header + "[Unit]\n"
        f"Description=Kiln: validate the idle nodes of {inventory}\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"Environment={_quoted(f'KILN_STATE_DIR={paths.state_dir()}')} {_quoted(f'PATH={path}')}\n"
        # A failing node (exit 5) fails the unit, as it does the health role's active
        # check: `systemctl --failed` shows it; the report says which node and why.
        f"ExecStart={_quoted(str(kiln))} validate -i {_quoted(str(inventory))} --idle-only\n"
    )
    timer_text = (
        header + "[Unit]\n"
        f"Description=Kiln: scheduled validation of {inventory} ({timer.schedule})\n\n"
        "[Timer]\n"
        f"OnCalendar={timer.schedule}\n"
        # A run missed while this machine was off is not made up at boot.
        "Persistent=false\n\n"
        "[Install]\n"
        f"WantedBy=timers.target\n"
    )
    return {f"{timer.name}.service": service, f"{timer.name}.timer": timer_text}


def _quoted(word: str) -> str:
    """One word on a unit's command or environment line: quoted, with systemd's
    specifier (%) and quoting characters escaped."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def kiln_executable() -> Path:
    """The `kiln` script of the environment running now (its virtualenv has Ansible)."""
    beside = Path(sys.executable).parent / "kiln"
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("kiln")
    if not found:
        raise PrerequisiteError("the `kiln` command is not installed: the timer has nothing to run")
    return Path(found).absolute()


def install(spec: "ClusterSpec") -> tuple[Timer, str]:
    """Write (or remove, for an empty schedule) the timer and enable it. Returns the
    timer and its next elapse. Nothing is written when the schedule is refused."""
    directory, user = unit_dir()
    timer = Timer(unit_name(spec.path), directory, schedule_of(spec), user)
    if not timer.schedule:
        remove(timer)
        return timer, ""
    next_run = check_calendar(timer.schedule)
    _need_systemctl()
    directory.mkdir(parents=True, exist_ok=True)
    written = units(spec, timer, kiln_executable())
    before = {n: files.read_text(directory / n) for n in written if (directory / n).exists()}
    for name, text in written.items():
        (directory / name).write_text(text)
    try:
        _systemctl(timer, "daemon-reload")
        _systemctl(timer, "enable", "--now", f"{timer.name}.timer")
    except KilnError:  # leave the units as they were: nothing half-applied
        for name in written:
            if name in before:
                (directory / name).write_text(before[name])
            else:
                (directory / name).unlink(missing_ok=True)
        raise
    return timer, next_run


def remove(timer: Timer) -> None:
    files = [timer.directory / f"{timer.name}.{kind}" for kind in ("timer", "service")]
    if not any(f.exists() for f in files):
        return
    _systemctl(timer, "disable", "--now", f"{timer.name}.timer")
    for found in files:
        found.unlink(missing_ok=True)
    _systemctl(timer, "daemon-reload")


def _need_systemctl() -> None:
    if not shutil.which("systemctl"):
        raise PrerequisiteError("scheduling needs systemd: systemctl is not on PATH")


def _systemctl(timer: Timer, *args: str) -> None:
    _need_systemctl()
    done = subprocess.run(timer.systemctl(*args), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise KilnError(f"systemctl {' '.join(args)}: {why}", ExitCode.FAILED)
