"""Records what a Molecule check-mode run says it would change, for the verify step.

Every scenario runs its converge playbook in check mode right after the idempotence
step (`check` in the test sequence): on nodes that were just converged, a task that
says it would change something is false drift, which `kiln drift` would report on a
healthy cluster. Ansible's exit status does not say so, so this callback writes, per
host, the tasks that reported a change to check-mode.json in the scenario's ephemeral
directory, and molecule/check_mode_test.py (run by every scenario's verifier) fails
when any did. Converge (not in check mode) removes the old record, so a verify that
follows no check run fails rather than reading a stale one.
"""

import json
import os
from pathlib import Path

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: kiln_check_mode
type: aggregate
short_description: Keep the tasks a check-mode run would change, per host
description:
  - See this file's docstring. Enabled for Molecule in molecule/config.yml.
"""

RECORD = "check-mode.json"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kiln_check_mode"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.changed: dict[str, list[str]] = {}
        folder = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
        self.record = Path(folder) / RECORD if folder else None
        self.checking = bool(context.CLIARGS.get("check"))

    def v2_playbook_on_start(self, playbook):
        # Converge (not in check mode) makes the old record stale; a side effect, which
        # runs between the check step and verify, does not.
        converging = Path(playbook._file_name).name == "converge.yml"
        if self.record and converging and not self.checking:
            self.record.unlink(missing_ok=True)

    def v2_runner_on_ok(self, result):
        # A loop's own result says whether any of its items changed.
        if result._result.get("changed"):
            task = result._task.get_name()
            self.changed.setdefault(result._host.get_name(), []).append(task)

    def v2_playbook_on_stats(self, stats):
        if self.record and self.checking:
            data = {"hosts": sorted(stats.processed), "changed": self.changed}
            self.record.write_text(json.dumps(data, indent=2) + "\n")
