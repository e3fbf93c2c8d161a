"""Check mode after converge changes nothing: run by every scenario's verifier.

The scenario's `check` step (right after idempotence) ran its converge playbook in
check mode; molecule/plugins/callback/kiln_check_mode.py kept what it would change. A
task that would change a node that was just converged is false drift: `kiln drift`
would report it on every healthy cluster (docs/drift.md).
"""

import json
import os
from pathlib import Path


def test_check_mode_after_converge_reports_no_change():
    record = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "check-mode.json"
    assert record.is_file(), "no check-mode run since converge (`check` in the test sequence)"
    found = json.loads(record.read_text())
    assert found["hosts"], found
    assert found["changed"] == {}, "check mode would change: " + json.dumps(found["changed"])
