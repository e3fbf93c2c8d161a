"""Shared fixtures: a private Kiln state dir per test and realistic inventories."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory, monkeypatch) -> Path:
    """Runs, lab records and facts of a test go to a directory of its own."""
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("KILN_STATE_DIR", str(path))
    monkeypatch.delenv("KILN_INVENTORY", raising=False)
    monkeypatch.delenv("KILN_FACT_CACHE", raising=False)  # the state directory's facts/
    return path


def cluster_inventory(controllers=("ctl1",), compute=("gpu001", "gpu002"), host_vars=None):
    """A hosts.yml body for a small GPU cluster."""
    host_vars = host_vars or {}

    def hosts(names):
        return {name: host_vars.get(name) for name in names}

    return {
        "all": {
            "children": {
                "slurm_controller": {"hosts": hosts(controllers)},
                "slurm_compute": {"hosts": hosts(compute)},
            }
        }
    }


@pytest.fixture
def write_inventory(tmp_path):
    """Write an inventory directory: hosts.yml plus {relative path: data} vars files."""

    def write(hosts=None, files=None, name="inv") -> Path:
        directory = tmp_path / name
        directory.mkdir(exist_ok=True)
        hosts_data = cluster_inventory() if hosts is None else hosts
        text = hosts_data if isinstance(hosts_data, str) else yaml.safe_dump(hosts_data)
        (directory / "hosts.yml").write_text(text)
        for rel, data in (files or {}).items():
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return directory

    return write


# Host vars of an inventory host that is this machine, reached without SSH.
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


@pytest.fixture
def local_inventory(write_inventory):
    """An inventory whose controller and compute nodes (name -> host vars) are local."""

    def make(compute: dict) -> str:
        hosts = {
            "all": {
                "children": {
                    "slurm_controller": {"hosts": {"local-ctl": LOCAL}},
                    "slurm_compute": {"hosts": compute},
                }
            }
        }
        return str(write_inventory(hosts))

    return make


def run_kiln(*args: str, env: dict | None = None, timeout: float = 300, **kwargs):
    """Run the real `kiln` process: exit codes and stderr as an operator sees them."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kiln", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
        **kwargs,
    )


@pytest.fixture(scope="session")
def promtool() -> str:
    """Prometheus's checker of rules and metrics files (scripts/setup-host.sh installs
    it): the monitoring tests check what Kiln writes with the real tool."""
    import shutil

    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool is not installed: run scripts/setup-host.sh")
    return path
