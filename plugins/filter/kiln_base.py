"""Filters that hand the base role's settings to kiln.base: the role and `kiln inventory
check` refuse the same values before any file is written."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln import base


def kiln_base_settings_problems(settings):
    """One line per value its config file cannot hold ({variable: value})."""
    return base.settings_problems(dict(settings))


class FilterModule:
    def filters(self):
        return {"kiln_base_settings_problems": kiln_base_settings_problems}
