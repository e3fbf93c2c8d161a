"""The version of Kiln whose roles are running, for the base role's provisioning fact.

The `kiln` CLI passes kiln_version; plain ansible-playbook (or AWX) does not, and a fact
that recorded "unknown" there would differ from the CLI's on every run: false drift
between two equivalent runners. Both now read the same package."""

from ansible.plugins.lookup import LookupBase
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

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
