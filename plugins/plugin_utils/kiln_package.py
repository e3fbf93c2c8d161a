"""Makes the kiln package importable for the collection's plugins, the one place that
does: each filter, lookup and action plugin imports this module before it imports kiln.
Installed (pip, the execution environment), kiln is found as is; plain ansible-playbook
from a checkout without Kiln installed finds it (and kiln_node, the node library it
imports) in the checkout's cli/ and node_library/ folders."""

import importlib.util
import sys
from pathlib import Path

# plugins/plugin_utils/ -> the content root (a checkout, or kiln/ansible in the wheel).
_CHECKOUT = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("kiln") is None and (_CHECKOUT / "cli").is_dir():
    sys.path[:0] = [str(_CHECKOUT / "cli"), str(_CHECKOUT / "node_library")]
