"""Where the roles keep what they download once on the control node (HPC-X's tarball,
enroot's and pyxis's packages): the cache in Kiln's state directory, found by
kiln.paths. `kiln` and plain ansible-playbook (or AWX) then share one cache, and
neither fetches again what the other has (a download would show as a change)."""

from ansible.plugins.lookup import LookupBase
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import paths

DOCUMENTATION = """
name: kiln_cache_dir
short_description: The download cache in Kiln's state directory
description:
  - $KILN_STATE_DIR/cache, else $XDG_STATE_HOME/kiln/cache, else ~/.local/state/kiln/cache.
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [str(paths.state_dir() / "cache")]
