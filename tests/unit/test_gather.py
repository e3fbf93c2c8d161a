"""kiln.run.gather: why a node brought no file back, in the one line the command prints."""

import pytest

from kiln import inventory
from kiln.errors import ExitCode, KilnError
from kiln.run import execute, gather
from kiln.run.display import NoDisplay
from kiln.run.events import Failure, RunSummary


@pytest.mark.parametrize(
    ("summary", "why"),
    [
        # The playbook did not parse: no host ran, the run's own error says why.
        (
            RunSummary(run="r1", playbook="repair_status.yml", status="failed",
                       error="ERROR! couldn't resolve module/action 'kiln.cluster.nope'"),
            "ERROR! couldn't resolve module/action 'kiln.cluster.nope'",
        ),
        # The controller's task failed: its message.
        (
            RunSummary(run="r1", playbook="repair_status.yml", status="failed",
                       failures=[Failure(host="ctl1", task="Read the history",
                                         message="Permission denied")]),
            "Read the history: Permission denied",
        ),
        # The run succeeded and left no file (a skipped task): nothing more to say.
        (
            RunSummary(run="r1", playbook="repair_status.yml", status="successful"),
            "the run brought nothing back",
        ),
    ],
)  # fmt: skip
def test_a_controller_that_brought_nothing_back_says_why(
    summary, why, tmp_path, monkeypatch, write_inventory
):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(execute, "run_playbook", lambda request: summary)
    spec = inventory.load(write_inventory())
    with pytest.raises(KilnError) as raised:
        gather.from_controller("repair_status.yml", spec, lambda *_: NoDisplay(), "d",
                               "kiln-repair keeps them", "the repair records")  # fmt: skip
    controller = spec.group("slurm_controller")[0]
    assert (str(raised.value), raised.value.exit_code) == (
        f"{controller}: the repair records could not be read: {why} (kiln runs show r1)",
        ExitCode.HOSTS_FAILED,
    )
