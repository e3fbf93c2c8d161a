"""A built wheel carries the Ansible content, and kiln finds it there."""

import re
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("kiln-*.whl"))


def test_wheel_ships_playbooks_roles_and_lab_settings(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "kiln/ansible/ansible.cfg",
        "kiln/ansible/playbooks/site.yml",
        "kiln/ansible/roles/base/tasks/main.yml",
        "kiln/ansible/roles/base/meta/argument_specs.yml",
        "kiln/ansible/plugins/filter/kiln_slurm.py",
        "kiln/ansible/plugins/lookup/kiln_version.py",
        "kiln/ansible/inventories/lab/group_vars/all/kiln.yml",
        "kiln/cli.py",
    ):
        assert expected in names
    assert not any("hosts.yml" in n and "inventories/lab" in n for n in names)


def test_wheel_carries_no_stand_in_and_no_test_code(wheel):
    """Stand-ins and the synthetic fabrics are test aids (tests/standins.py,
    tests/synthetic_fabric.py): not in the wheel, nor the lab settings `make lab` writes
    for them (git-ignored), and nothing in it imports the tests."""
    archive = zipfile.ZipFile(wheel)
    assert [n for n in archive.namelist() if "standin" in n or "synthetic" in n] == []
    importing = [
        name
        for name in archive.namelist()
        if name.endswith(".py")
        and re.search(r"^\s*(from|import) tests\b", archive.read(name).decode(), re.M)
    ]
    assert importing == []


def test_installed_wheel_finds_its_own_content(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    code = (
        "from kiln import paths; print(paths.content_root()); print(paths.is_checkout());"
        "print(paths.lab_inventory_dir());"
        "print((paths.collections_dir() / 'ansible_collections/kiln/cluster').resolve())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path / "site"), "KILN_STATE_DIR": str(tmp_path / "st")},
        check=True,
    ).stdout.split()
    content = str(tmp_path / "site/kiln/ansible")
    inventory = str(tmp_path / "st/lab/kiln/inventory")
    # The roles' plugins as kiln.cluster: the wheel's own content, linked.
    assert out == [content, "False", inventory, content]
