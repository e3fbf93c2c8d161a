"""`kiln awx workflow` through the real `kiln` process: output, files, bad input."""

import json

import pytest

from kiln import inventory
from kiln.awx_workflow import Names, export
from kiln.errors import ExitCode
from tests.conftest import cluster_inventory, run_kiln


def test_writes_the_import_document(write_inventory, tmp_path):
    inv = write_inventory()
    result = run_kiln("awx", "workflow", "-i", str(inv), "--slices", "2")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == export(inventory.load(inv), 2, Names())[0]
    out = tmp_path / "kiln-workflow.json"
    again = run_kiln("awx", "workflow", "-i", str(inv), "--slices", "2", "-o", str(out))
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert out.read_text() == result.stdout


def test_more_slices_than_compute_nodes_warn(write_inventory):
    inv = write_inventory()
    result = run_kiln("awx", "workflow", "-i", str(inv), "--slices", "5", "--prefix", "a")
    assert result.returncode == 0
    assert result.stderr == "kiln: warning: --slices 5: 2 compute node(s), so 2 slice(s)\n"
    names = [t["name"] for t in json.loads(result.stdout)["job_templates"]]
    assert names == ["a slice-1", "a slice-2", "a controllers", "a slurm-1", "a slurm-2"]


@pytest.mark.parametrize(
    ("args", "hosts", "message"),
    [
        (
            ["--slices", "0"],
            None,
            "Error: Invalid value for '--slices': 0 is not in the range x>=1.",
        ),
        (
            ["--slices", "2"],
            cluster_inventory(compute=()),
            "kiln: error: inventory: slurm_compute is empty (expected at least 1 host)",
        ),
        (["--slices", "2", "-o", "/"], None, "kiln: error: -o /: is a directory; name a file"),
    ],
)
def test_bad_input_exits_2_with_one_line(write_inventory, args, hosts, message):
    result = run_kiln("awx", "workflow", "-i", str(write_inventory(hosts)), *args)
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.strip().splitlines()[-1] == message
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
