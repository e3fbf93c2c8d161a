"""A new user's first hour, scripted: from a host list of the lab's nodes to `kiln
validate` PASS with only the README's real-cluster commands (new, discover, pins,
check, provision, validate) and no variable edited by hand. The lab stands in for a
rented cluster; the answers to `kiln inventory new`'s flags are all the user gives.

Its own lab, provisioned from nothing (about 5 minutes); `make test` runs it after
Molecule's scenarios, beside the e2e lab's tests; alone: `make e2e-newuser`."""

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from kiln.errors import ExitCode
from kiln.roles import autofs
from tests import standins
from tests.conftest import REPO, run_kiln

pytestmark = [pytest.mark.e2e, pytest.mark.newuser]
LAB = "newuser"
# Lab containers get new host keys whenever they are made.
SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"


def kiln(*argv: str, timeout: int = 300):
    result = run_kiln(*argv, timeout=timeout)
    print(f"$ kiln {shlex.join(argv)}  -> {result.returncode}\n{result.stdout}{result.stderr}")
    return result


@pytest.fixture
def rented(tmp_path, monkeypatch):
    """The lab as a rented cluster: what the provider hands over is a host list, an SSH
    key and (here) an apt cache; the lab's own inventory is read for nothing else."""
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
    standins.lab_settings()  # the stand-ins of NVIDIA's releases: the site's mirror
    assert kiln("lab", "down", "--name", LAB).returncode == 0
    up = kiln("lab", "up", "--name", LAB, timeout=900)
    assert up.returncode == 0, up.stderr
    hosts = yaml.safe_load(
        Path(up.stdout.strip().splitlines()[-1].removeprefix("inventory: ")).read_text()
    )
    yield hosts
    assert kiln("lab", "down", "--name", LAB).returncode == 0


def _hostlist(hosts: dict, group: str) -> list[str]:
    return [
        f"{name}={data['ansible_host']}"
        for name, data in hosts["all"]["children"][group]["hosts"].items()
    ]


def test_a_new_user_goes_from_a_host_list_to_a_validated_cluster(rented, tmp_path):
    given = rented["all"]["vars"]
    mine = tmp_path / "mycluster"
    answers = [
        "--name",
        "newuser",
        *[f"--controller={h}" for h in _hostlist(rented, "slurm_controller")],
        *[f"--compute={h}" for h in _hostlist(rented, "slurm_compute")],
        *[f"--storage-host={h}" for h in _hostlist(rented, "storage")],
        "--storage",
        "glusterfs",
        "--gpu",
        "none",
        "--fabric",
        "none",
        "--ssh-key",
        given["ansible_ssh_private_key_file"],
        "--ssh-args",
        SSH_ARGS,
        "--mirror",
        (REPO / "build" / "standins").as_uri(),
    ]
    if "base_apt_proxy" in given:
        answers += ["--apt-proxy", given["base_apt_proxy"]]
    assert kiln("inventory", "new", str(mine), *answers).returncode == 0
    written = {p: p.read_text() for p in mine.rglob("*") if p.is_file()}

    # As written, only the pins are missing, each naming the command that fills it in.
    check = kiln("inventory", "check", "-i", str(mine))
    assert check.returncode == ExitCode.BAD_INPUT
    needs = [re.search(r": (\w+_version) ", line) for line in check.stderr.splitlines()]
    assert sorted(found.group(1) for found in needs if found) == [
        "enroot_version",
        "enroot_version",
        "pyxis_version",
    ]
    assert all(
        f"kiln inventory pins -i {mine} --write" in line for line in check.stderr.splitlines()
    )

    found = kiln("inventory", "discover", "-i", str(mine), "--write", "--json")
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert sorted(report["nodes"]) == sorted(
        h.split("=")[0]
        for g in ("slurm_controller", "slurm_compute", "storage")
        for h in _hostlist(rented, g)
    )
    # The nodes share this host's kernel: without autofs, mounts made at boot.
    kernel = autofs.kernel_filesystems(Path("/proc/filesystems").read_text())
    at_boot = {} if "autofs" in kernel else {"autofs_automount": False}
    assert {p["name"]: p["value"] for p in report["proposals"]} == {
        "validate_profile": "lab-cpu",
        "base_chrony_control_clock": False,
        "base_sysctl_apply": False,
        "slurm_cgroup_enabled": False,
        **at_boot,
    }
    pins = kiln("inventory", "pins", "-i", str(mine), "--write", "--json")
    assert pins.returncode == 0, pins.stderr
    pinned = json.loads(pins.stdout)["pins"]
    assert sorted(pinned) == ["enroot_caps_sha256", "enroot_sha256", "pyxis_sha256"]
    # The lab's mirror holds stand-ins, not NVIDIA's bytes: pins says so.
    assert "is not the release Kiln documents" in pinned["pyxis_sha256"]["warning"]
    assert kiln("inventory", "check", "-i", str(mine)).returncode == 0

    provision = kiln("provision", "-i", str(mine), "--json", timeout=1500)
    assert provision.returncode == 0, json.loads(provision.stdout or "{}").get("failures")
    validate = kiln("validate", "-i", str(mine), "--json", timeout=1200)
    assert validate.returncode == 0, validate.stdout[-3000:]
    verdicts = json.loads(validate.stdout)
    assert verdicts["profile"] == "lab-cpu"  # as discover wrote it
    compute = sorted(h.split("=")[0] for h in _hostlist(rented, "slurm_compute"))
    assert {n: v["verdict"] for n, v in verdicts["node_verdicts"].items()} == dict.fromkeys(
        compute, "pass"
    )

    # Nothing was edited by hand: every change to the files came from discover and pins.
    changed = {p for p, text in written.items() if p.read_text() != text}
    assert {p.relative_to(mine).as_posix() for p in changed} <= {
        "group_vars/all/base.yml",
        "group_vars/all/slurm.yml",
        "group_vars/all/validate.yml",
        "group_vars/all/enroot.yml",
        "group_vars/all/pyxis.yml",
        *(["group_vars/all/autofs.yml"] if at_boot else []),
    }
    assert os.environ.get("KILN_STATE_DIR")
