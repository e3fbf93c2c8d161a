"""The region migration of docs/migration.md, end to end in two labs: `old` is
provisioned, validated and its accounting dumped; `new` (another lab name, so another
subnet, storage server and host names) comes up from the same settings, is provisioned,
gets the accounting, passes validation node for node against `old`, and has no drift.

Two labs provisioned make this the slowest test (about 20 minutes on two cores): it runs
on its own, `make e2e-migration`, not in `make test` (docs/migration.md says so)."""

import json
import os
from pathlib import Path

import pytest

from kiln.errors import ExitCode
from tests import standins
from tests.conftest import run_kiln
from tests.e2e.accounts import ACCOUNTS, SHOW_ACCOUNTS

pytestmark = [pytest.mark.e2e, pytest.mark.migration]
LABS = ("old", "new")
# What differs between two labs from the same settings: where each one is (addresses,
# the apt cache on its own subnet's gateway, each lab's SSH key) and its name. The
# stand-in enroot and pyxis the two install are pinned in the settings they share.
ENDPOINTS = {
    "ansible_host",
    "ansible_ssh_private_key_file",
    "base_apt_proxy",
    "kiln_lab_name",
}


def kiln(*args: str, timeout: float = 1200) -> tuple[int, dict]:
    result = run_kiln(*args, "--json", timeout=timeout)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def on(lab: str, node: str, command: str) -> str:
    result = run_kiln("lab", "ssh", "--name", lab, node, "--", command)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """Both labs up (not provisioned): name -> inventory directory."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KILN_STATE_DIR", str(tmp_path_factory.mktemp("migration-state")))
        found = {}
        standins.lab_settings()  # as `make lab` pins them, in the lab's settings
        try:
            for name in LABS:
                # A run stopped half way leaves its lab behind: start from raw nodes.
                assert run_kiln("lab", "down", "--name", name, timeout=300).returncode == 0
                result = run_kiln("lab", "up", "--name", name, timeout=900)
                assert result.returncode == 0, result.stderr
                hosts = result.stdout.strip().splitlines()[-1].removeprefix("inventory: ")
                found[name] = str(Path(hosts).parent)
            yield found
        finally:
            for name in LABS:
                run_kiln("lab", "down", "--name", name, timeout=300)


@pytest.fixture(autouse=True)
def state_dir(labs):
    """Overrides the per-test state dir: the test drives the labs' (kiln lab ssh)."""


def test_a_cluster_moves_to_another_lab_and_proves_equivalent(labs, tmp_path):
    old, new = labs["old"], labs["new"]
    # The old region: provisioned, with accounts, validated; its accounting kept.
    code, provisioned = kiln("provision", "-i", old)
    assert code == ExitCode.OK, provisioned["failures"]
    on("old", "controller", ACCOUNTS)
    declared = on("old", "controller", SHOW_ACCOUNTS)
    code, before = kiln("validate", "-i", old, timeout=900)
    assert code == ExitCode.OK, before["node_verdicts"]
    dump = tmp_path / "accounting.json"
    dumped = run_kiln("accounting", "dump", "-i", old, "-o", str(dump))
    assert dumped.returncode == ExitCode.OK, dumped.stderr

    # The move: only where things are differs, and every host is renamed.
    code, moved = kiln("inventory", "diff", old, new)
    assert code == ExitCode.OK
    differing = {v["name"] for group in moved["groups"] for v in group["variables"]}
    assert differing and differing <= ENDPOINTS, differing - ENDPOINTS
    renamed = {g["group"]: (g["hosts_removed"], g["hosts_added"]) for g in moved["groups"]}
    for group in ("slurm_controller", "slurm_compute", "storage"):
        removed, added = renamed[group]
        assert [h.replace("old-", "new-") for h in removed] == added, group

    # The new region: provisioned, the accounting loaded, validated.
    code, provisioned = kiln("provision", "-i", new)
    assert code == ExitCode.OK, provisioned["failures"]
    loaded = run_kiln("accounting", "load", "-i", new, str(dump))
    assert loaded.returncode == ExitCode.OK, loaded.stderr
    assert on("new", "controller", SHOW_ACCOUNTS) == declared
    code, after = kiln("validate", "-i", new, timeout=900)
    assert code == ExitCode.OK, after["node_verdicts"]

    # Equivalent: every node's tests line up with the old region's node in its place,
    # and every verdict is the same. (Figures on the lab's shared CPUs swing too much
    # between runs to compare; the verdicts are judged against the same profile.)
    folder = Path(os.environ["KILN_STATE_DIR"]) / "validations"
    compared = run_kiln(
        "report",
        "compare",
        str(folder / before["id"] / "report.json"),
        str(folder / after["id"] / "report.json"),
        "--all",
        "--json",
    )
    assert compared.returncode == ExitCode.OK, compared.stderr
    changes = json.loads(compared.stdout)
    per_node = [c for c in changes if c["node"] != "fleet median"]
    assert per_node
    for change in per_node:
        assert change["node_before"] == change["node"].replace("new-", "old-"), change
        assert change["verdict_before"] == change["verdict_after"] in ("pass", "skip"), change

    # And it is what the inventory declares.
    code, drift = kiln("drift", "-i", new)
    assert code == ExitCode.OK, drift["hosts"]
