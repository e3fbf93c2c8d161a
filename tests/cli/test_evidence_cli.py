"""`kiln evidence NODE` through the real `kiln` process and ansible-runner against a
local "node": the real kiln-evidence (the repair role's) runs there, with this
machine's own commands (no GPU: nvidia-smi and dcgmi are listed as not installed)."""

import json
import sys
import tarfile
from pathlib import Path

from kiln.errors import ExitCode
from tests.conftest import LOCAL, REPO, run_kiln


def test_the_bundle_comes_into_the_runs_directory(local_inventory, tmp_path, state_dir):
    program = tmp_path / "kiln-evidence"
    program.write_text(
        f"#!/bin/sh\nKILN_NODE_LIBRARY={REPO / 'node_library'} exec {sys.executable} "
        f'{REPO / "roles" / "repair" / "files" / "kiln-evidence"} "$@"\n'
    )
    program.chmod(0o755)
    inv = local_inventory({"c1": LOCAL})
    (Path(inv) / "group_vars").mkdir()
    (Path(inv) / "group_vars" / "all.yml").write_text(
        f"evidence_program: {program}\nrepair_evidence_dir: {tmp_path / 'on-node'}\n"
    )
    shown = run_kiln("evidence", "c1", "-i", inv)
    assert shown.returncode == ExitCode.OK, shown.stderr
    bundle = Path(shown.stdout.strip().splitlines()[-1])
    assert bundle.parent.name == "evidence" and bundle.parent.parent.parent == state_dir / "runs"
    with tarfile.open(bundle) as tar:
        names = sorted(Path(n).name for n in tar.getnames())
        top = tar.getnames()[0].split("/")[0]
        manifest = json.load(tar.extractfile(f"{top}/manifest.json"))
    assert "manifest.json" in names
    assert {m["name"]: m.get("skipped") for m in manifest["members"]}["nvidia-smi-q.xml"] == (
        "not installed"
    )


def test_a_node_not_in_the_inventory_is_refused(local_inventory):
    inv = local_inventory({"c1": LOCAL})
    shown = run_kiln("evidence", "gpu9", "-i", inv)
    assert (shown.returncode, shown.stderr) == (
        ExitCode.BAD_INPUT,
        "kiln: error: gpu9 not in the inventory's slurm_compute (c1)\n",
    )
