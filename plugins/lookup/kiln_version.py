"""The version of Kiln whose roles are running, for the base role's provisioning fact.

The `kiln` CLI passes kiln_version; plain ansible-playbook (or AWX) does not, and a fact
that recorded "unknown" there would differ from the CLI's on every run: false drift
between two equivalent runners. Both now read the same package."""

import sys
from pathlib import Path

from ansible.plugins.lookup import LookupBase

try:
    import kiln
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))
    import kiln

DOCUMENTATION = """
name: kiln_version
short_description: The version of the Kiln package these roles belong to
description:
  - kiln.__version__, from the installed package or the checkout the roles are in.
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [kiln.__version__]
