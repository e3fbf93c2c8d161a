"""`kiln inventory new`: the examples in inventories/examples are its output, byte for
byte, from the command each one's README records; what it writes passes `kiln inventory
check` but for the pins, each named with the command that fills it in."""

import shlex
from pathlib import Path

import pytest

from kiln.inventory import scaffold
from tests.conftest import REPO, run_kiln

EXAMPLES = ("h100-ib", "h100-roce", "gb200-nvl72")


def _command(example: Path) -> list[str]:
    line = next(
        text
        for text in (example / "README.md").read_text().splitlines()
        if text.startswith("Written by `")
    )
    return shlex.split(line.removeprefix("Written by `").removesuffix("`."))


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_is_what_the_command_in_its_readme_writes(name, tmp_path):
    example = REPO / "inventories" / "examples" / name
    argv = _command(example)
    assert argv[:4] == ["kiln", "inventory", "new", name]
    result = run_kiln("inventory", "new", str(tmp_path / name), *argv[4:])
    assert result.returncode == 0, result.stderr
    written = {
        p.relative_to(tmp_path / name): p.read_text()
        for p in (tmp_path / name).rglob("*")
        if p.is_file()
    }
    committed = {p.relative_to(example): p.read_text() for p in example.rglob("*") if p.is_file()}
    assert written == committed


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_passes_the_check_but_for_its_pins(name):
    example = REPO / "inventories" / "examples" / name
    result = run_kiln("inventory", "check", "-i", str(example))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines and all(
        f"`kiln inventory pins -i {example} --write` fetches it and fills it in" in line
        for line in lines
    ), result.stderr
    expected = {
        "enroot_sha256",
        "enroot_caps_sha256",
        "hpcx_sha256",
        "nccl_tests_sha256",
        "pyxis_sha256",
    }
    if "--driver-source cuda-repo" in " ".join(_command(example)):
        expected.add("nvidia_driver_cuda_repo_key_sha256")
    assert {w for line in lines for w in expected if f"needs {w}:" in line} == expected
    assert len(lines) == len(expected)


def test_every_setting_of_every_role_is_written_once():
    """Each variable a role declares is in exactly one file, set or commented."""
    from kiln import argspec, paths

    files = {
        path: path.read_text()
        for path in (REPO / "inventories" / "examples" / "h100-ib" / "group_vars").rglob("*.yml")
    }
    for name in argspec.load_catalogue(paths.roles_dir()):
        holders = [p for p, text in files.items() if f"\n{name}:" in text or f"\n# {name}:" in text]
        assert len(holders) == 1, (name, holders)


def test_the_answers_decide_the_settings():
    cluster = scaffold.NewCluster(
        name="c",
        controllers=[scaffold.Node("h")],
        compute=[scaffold.Node("g1")],
        gpu="gb200",
        fabric="infiniband",
        containers=False,
        monitoring=False,
        storage="nfs:nfs01:/export",
    )
    decided = {name: value for name, (value, _) in scaffold.decisions(cluster).items()}
    assert decided == {
        "slurm_cluster_name": "c",
        "slurm_accounting_enabled": True,
        "autofs_mounts": [
            {"name": "shared", "path": "/shared", "type": "nfs", "source": "nfs01:/export"}
        ],
        "nvidia_driver_source": "cuda-repo",
        "nvidia_driver_version": "580",
        "nvidia_driver_cuda_repo_key_sha256": "",
        "nvidia_driver_required": True,
        "nccl_tests_version": "2.19.6",
        "nccl_tests_sha256": "",
        "health_gpus": 4,
        "hpcx_version": "2.22.1",
        "hpcx_sha256": "",
        "slurm_topology_source": "nvlink",
        "monitoring_enabled": False,
    }


def test_a_range_is_written_in_ansibles_syntax():
    assert scaffold.ansible_ranges(["gpu001", "gpu002", "gpu003", "gpu007", "login"]) == [
        "gpu[001:003]",
        "gpu007",
        "login",
    ]
