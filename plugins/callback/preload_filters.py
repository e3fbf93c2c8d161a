"""Loads kiln.cluster's filter plugins once, in ansible-playbook's own process, before it
forks a worker for each host and task.

A worker is a copy of that process: what it has loaded, every worker has. Without this
the parent never templates the roles' filters itself, so each worker loads them anew (the
collection's plugin files and the kiln modules behind them), 0.3 to 0.6 s of CPU every
time a task uses one on a host: a third of a no-op provision (docs/performance.md)."""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader

DOCUMENTATION = """
name: preload_filters
type: aggregate
short_description: Load Kiln's filter plugins before Ansible forks its workers
description:
  - Loads every filter plugin of kiln.cluster in the playbook's own process, so the
    workers forked for each task inherit them instead of loading them again.
requirements:
  - enabled in callbacks_enabled (kiln and Kiln's Molecule scenarios enable it)
"""

# Any filter of the collection: looking one up makes Ansible load all of the
# collection's filter files (their file names are not their filters' names).
ANY_FILTER = "kiln.cluster.kiln_slurm_settings"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kiln.cluster.preload_filters"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        filter_loader.get(ANY_FILTER)
