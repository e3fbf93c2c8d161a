"""kiln.schedules: Kiln's two timers, the health role's active check and the scheduled
`kiln validate`, stated once and kept apart."""

from datetime import datetime, timedelta

import yaml

from kiln import health, schedules
from tests.conftest import REPO

HEALTH_DEFAULTS = REPO / "roles" / "health" / "defaults" / "main.yml"


def _time_of(calendar: str) -> datetime:
    """'Sun *-*-* 03:00:00' -> that time of day (the defaults differ only in it)."""
    return datetime.strptime(calendar.split()[-1], "%H:%M:%S")


def test_the_active_checks_default_is_the_roles():
    defaults = yaml.safe_load(HEALTH_DEFAULTS.read_text())
    assert defaults["health_active_schedule"] == schedules.HEALTH_ACTIVE.default


def test_the_scheduled_validate_starts_after_the_active_checks_hold_ends():
    defaults = yaml.safe_load(HEALTH_DEFAULTS.read_text())
    active, validate = schedules.HEALTH_ACTIVE.default, schedules.VALIDATE.default
    assert active.split()[:2] == validate.split()[:2]  # the same day
    held_until = _time_of(active) + timedelta(minutes=defaults["health_active_minutes"])
    assert _time_of(validate) >= held_until


def test_one_rule_refuses_a_second_line_in_either_timer():
    text = "daily\nExecStartPre=/bin/true"
    assert schedules.one_line_problem(schedules.VALIDATE, "daily") == ""
    assert schedules.one_line_problem(schedules.VALIDATE, text) == (
        "validate_schedule 'daily\\nExecStartPre=/bin/true': must be one line, "
        'a systemd OnCalendar expression such as "Sun *-*-* 05:00:00"'
    )
    assert health.settings_problems({"active_schedule": text}) == [
        "health_active_schedule 'daily\\nExecStartPre=/bin/true': must be one line, "
        'a systemd OnCalendar expression such as "Sun *-*-* 03:00:00"'
    ]
