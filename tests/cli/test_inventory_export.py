"""AWX and ansible-navigator users keep their inventory in AWX: exported with
`ansible-inventory --list --yaml` (group variables flattened onto each host), it gets
the same pre-flight from `kiln inventory check` as the inventory it came from."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

from kiln.errors import ExitCode
from tests.conftest import REPO, run_kiln

SOURCE = REPO / "inventories/examples/h100-2su"


def export(source: Path, to: Path) -> Path:
    ansible_inventory = str(Path(sys.executable).parent / "ansible-inventory")
    subprocess.run(
        [ansible_inventory, "-i", str(source), "--list", "--yaml", "--output", str(to)],
        check=True,
        capture_output=True,
    )
    return to


def check(inventory: Path) -> tuple[int, dict]:
    done = run_kiln("inventory", "check", "-i", str(inventory), "--json")
    return done.returncode, (json.loads(done.stdout) if done.returncode == 0 else done.stderr)


def test_an_exported_inventory_gets_the_same_verdict_as_its_source(tmp_path):
    code, source = check(SOURCE)
    exported_code, exported = check(export(SOURCE, tmp_path / "exported.yml"))
    assert (code, exported_code) == (ExitCode.OK, ExitCode.OK)
    assert (exported["groups"], exported["hosts"]) == (source["groups"], source["hosts"])


def test_a_bad_value_in_an_exported_inventory_is_refused_as_in_its_source(tmp_path):
    exported = export(SOURCE, tmp_path / "exported.yml")
    data = yaml.safe_load(exported.read_text())
    host = data["all"]["children"]["slurm_compute"]["children"]["su1"]["hosts"]["gpu001"]
    host["autofs_mounts"] = [{"name": "x", "path": "/x", "type": "smbfs", "source": "s:/x"}]
    exported.write_text(yaml.safe_dump(data))
    done = run_kiln("inventory", "check", "-i", str(exported))
    assert done.returncode == ExitCode.BAD_INPUT, done.stdout + done.stderr
    assert "gpu001" in done.stderr and "smbfs" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
