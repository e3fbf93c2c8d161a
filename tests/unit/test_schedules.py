"""kiln.schedules: Kiln's two timers, the health role's active check and the scheduled
`kiln validate`, stated once and kept apart."""

from datetime import datetime, timedelta

import yaml

from kiln import schedules
from kiln.inventory import checks
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
    rule = (
        "must be a systemd OnCalendar expression on one line, of letters, digits, spaces and "
        "* . , : ~ / _ + @ -"
    )
    for good in ("daily", "Mon..Fri *-*-* 03:00:00 Europe/Berlin", "*-*-1/2 4:00", ""):
        assert schedules.one_line_problem(schedules.VALIDATE, good) == ""
    assert schedules.one_line_problem(schedules.VALIDATE, text) == (
        f"validate_schedule 'daily\\nExecStartPre=/bin/true': {rule} "
        '(such as "Sun *-*-* 05:00:00")'
    )
    assert checks.value_problems("health_active_schedule", "daily;reboot", {}) == [
        f"health_active_schedule 'daily;reboot': {rule} (such as \"Sun *-*-* 03:00:00\")"
    ]
