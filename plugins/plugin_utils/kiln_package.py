"""Makes the kiln package importable for the collection's plugins, the one place that
does: each filter, lookup and action plugin imports this module before it imports kiln.
Installed (pip, the execution environment), kiln is found as is; plain ansible-playbook
from a checkout without Kiln installed finds it in the checkout's cli/ folder."""

import importlib.util
import sys
from pathlib import Path

# plugins/plugin_utils/ -> the content root (a checkout, or kiln/ansible in the wheel).
_CHECKOUT_CLI = Path(__file__).resolve().parents[2] / "cli"

if importlib.util.find_spec("kiln") is None and _CHECKOUT_CLI.is_dir():
    sys.path.insert(0, str(_CHECKOUT_CLI))
