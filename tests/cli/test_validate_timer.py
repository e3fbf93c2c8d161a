"""`kiln validate --install-timer` through the real `kiln` process. This machine runs no
systemd: systemctl is a TEST DOUBLE that records what Kiln asks of it; the unit files
are checked whole and by the real `systemd-analyze verify`. The lab e2e runs the
service's command line against real Slurm."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kiln import schedules
from kiln.errors import ExitCode
from tests.conftest import run_kiln


@pytest.fixture
def systemd(tmp_path):
    """(env for run_kiln, unit dir, file of recorded systemctl calls, failing switch)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fail = tmp_path / "fail"
    (bin_dir / "systemctl").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f"if [ -e {fail} ]; then echo 'Failed to connect to bus: No medium found' >&2; exit 1; fi\n"
    )
    (bin_dir / "systemctl").chmod(0o755)
    units = tmp_path / "units"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "KILN_SYSTEMD_UNIT_DIR": str(units)}
    return env, units, calls, fail


def inventory_with(write_inventory, schedule_value=None, name="prod"):
    files = (
        {}
        if schedule_value is None
        else {"group_vars/all.yml": {"validate_schedule": schedule_value}}
    )
    return write_inventory(files=files, name=name)


def test_the_timer_is_installed_whole_and_again_unchanged(
    write_inventory, systemd, state_dir, tmp_path
):
    env, units, calls, _fail = systemd
    inv = inventory_with(write_inventory).resolve()
    shown = run_kiln("validate", "-i", str(inv), "--install-timer", env=env)
    assert shown.returncode == ExitCode.OK, shown.stderr
    name = schedules.unit_name(inv)
    assert shown.stdout.splitlines() == [
        f"{name}.timer in {units}: Sun *-*-* 05:00:00, next run "
        + shown.stdout.split("next run ", 1)[1].splitlines()[0],
        f"each run: kiln validate -i {inv} --idle-only (its report joins `kiln report list`)",
    ]
    assert shown.stdout.split("next run ", 1)[1].startswith("Sun ")
    kiln = Path(sys.executable).parent / "kiln"
    header = f"# Managed by Kiln (kiln validate --install-timer -i {inv}).\n"
    assert sorted(p.name for p in units.iterdir()) == [f"{name}.service", f"{name}.timer"]
    assert (units / f"{name}.service").read_text() == (
        header + "[Unit]\n"
        f"Description=Kiln: validate the idle nodes of {inv}\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f'Environment="KILN_STATE_DIR={state_dir}" "PATH={kiln.parent}:/usr/local/sbin:'
        '/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n'
        f'ExecStart="{kiln}" validate -i "{inv}" --idle-only\n'
    )
    assert (units / f"{name}.timer").read_text() == (
        header + "[Unit]\n"
        f"Description=Kiln: scheduled validation of {inv} (Sun *-*-* 05:00:00)\n\n"
        "[Timer]\n"
        "OnCalendar=Sun *-*-* 05:00:00\n"
        "Persistent=false\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
    assert calls.read_text().splitlines() == ["daemon-reload", f"enable --now {name}.timer"]
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(
            ["systemd-analyze", "verify", "--man=no", f"{name}.timer"],
            cwd=units,
            capture_output=True,
            text=True,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr

    before = {p.name: p.read_text() for p in units.iterdir()}
    again = run_kiln("validate", "-i", str(inv), "--install-timer", env=env)
    assert again.returncode == ExitCode.OK, again.stderr
    assert {p.name: p.read_text() for p in units.iterdir()} == before


def test_an_empty_schedule_removes_the_timer(write_inventory, systemd):
    env, units, calls, _fail = systemd
    inv = inventory_with(write_inventory)
    assert run_kiln("validate", "-i", str(inv), "--install-timer", env=env).returncode == 0
    name = schedules.unit_name(inv)
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "all.yml").write_text('validate_schedule: ""\n')
    shown = run_kiln("validate", "-i", str(inv), "--install-timer", env=env)
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert shown.stdout == f"validate_schedule is empty: no timer ({name}.timer is removed)\n"
    assert list(units.iterdir()) == []
    assert calls.read_text().splitlines()[2:] == [
        f"disable --now {name}.timer",
        "daemon-reload",
    ]


def test_each_inventory_has_its_own_timer(tmp_path):
    (tmp_path / "a" / "prod").mkdir(parents=True)
    (tmp_path / "b" / "prod").mkdir(parents=True)
    first = schedules.unit_name(tmp_path / "a" / "prod")
    second = schedules.unit_name(tmp_path / "b" / "prod")
    assert first.startswith("kiln-validate-prod-") and second.startswith("kiln-validate-prod-")
    assert first != second
    assert schedules.unit_name(tmp_path / "a" / "prod") == first  # stable
    (tmp_path / "x y%").mkdir()
    assert schedules.unit_name(tmp_path / "x y%").startswith("kiln-validate-x-y-")


def test_refused_schedules_and_a_failing_systemd_leave_nothing(write_inventory, systemd):
    env, units, calls, fail = systemd
    for value, message in [
        ("Sun 25:00", "kiln: error: validate_schedule: 'Sun 25:00': Failed to parse calendar"),
        (
            "Sun *-*-* 05:00:00\nMon *-*-* 05:00:00",
            "kiln: error: group_vars/all.yml: validate_schedule "
            "'Sun *-*-* 05:00:00\\nMon *-*-* 05:00:00': must be a systemd OnCalendar expression "
            "on one line",
        ),
    ]:
        inv = inventory_with(write_inventory, value)
        shown = run_kiln("validate", "-i", str(inv), "--install-timer", env=env)
        assert shown.returncode == ExitCode.BAD_INPUT, shown.stderr
        assert shown.stderr.startswith(message), shown.stderr
        assert len(shown.stderr.splitlines()) == 1
        assert not units.exists() and not calls.exists()

    fail.touch()
    inv = inventory_with(write_inventory, None, name="other")
    shown = run_kiln("validate", "-i", str(inv), "--install-timer", env=env)
    assert shown.returncode == ExitCode.FAILED
    assert shown.stderr == (
        "kiln: error: systemctl daemon-reload: Failed to connect to bus: No medium found\n"
    )
    assert list(units.iterdir()) == []  # the units it wrote are taken back


def test_install_timer_takes_only_the_inventory(write_inventory, systemd):
    env, units, _calls, _fail = systemd
    inv = inventory_with(write_inventory)
    for extra in (["--nodes", "gpu001"], ["--idle-only"], ["--json"], ["--suite", "slurm"]):
        shown = run_kiln("validate", "-i", str(inv), "--install-timer", *extra, env=env)
        assert shown.returncode == ExitCode.BAD_INPUT
        assert shown.stderr == "kiln: error: --install-timer takes no other option than -i\n"
    assert not units.exists()
