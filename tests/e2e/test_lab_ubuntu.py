"""The lab on Ubuntu 24.04 nodes (`make e2e-ubuntu`; not in `make test`, whose lab is
Debian 13): up, provisioned, provisioned again changing and restarting nothing, validated,
and a short burn-in. Skips, saying why, where Ubuntu's archive does not answer. About 15
minutes here, most of it the first provisioning and torch's install."""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kiln.errors import ExitCode
from kiln.lab import image
from tests import standins
from tests.conftest import REPO, run_kiln

pytestmark = [pytest.mark.e2e, pytest.mark.ubuntu]
LAB = "ubuntu"
RELEASE = "noble"
NODES = [f"{LAB}-compute01", f"{LAB}-compute02", f"{LAB}-controller", f"{LAB}-storage"]
# Ubuntu 24.04 has no python3-torch: the burn-in's stress and Kiln's collectives benchmark
# run on PyPI's torch for its Python 3.12 (a CUDA build, 2.8 GB with what it needs; the
# newest whose CUDA packages PyPI's mirror here serves), put on the compute nodes by
# this test, as an operator's image carries its own torch. Kiln installs none.
TORCH = "torch==2.5.1"
WHEELS = REPO / "build" / "lab-wheels" / "cp312"


def archive_problem() -> str:
    """Why Ubuntu's archive cannot be used here ("" when its release file downloads)."""
    url = f"{image.mirror(RELEASE)}/dists/{RELEASE}/Release"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            answer.read(64)
    except OSError as exc:
        return f"{url}: {exc}"
    return ""


def provision(inventory: str) -> tuple[int, dict]:
    result = run_kiln("provision", "-i", inventory, "--json", timeout=1800)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def on(node: str, command: str) -> str:
    result = run_kiln("lab", "ssh", "--name", LAB, node, "--", command, timeout=900)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if problem := archive_problem():
        pytest.skip(f"Ubuntu's archive does not answer ({problem}): the Ubuntu lab is untested")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KILN_STATE_DIR", str(tmp_path_factory.mktemp("ubuntu-state")))
        assert run_kiln("lab", "down", "--name", LAB, timeout=300).returncode == 0
        standins.lab_settings()  # enroot's and pyxis's, as `make lab` pins them
        result = run_kiln("lab", "up", "--name", LAB, "--distro", "ubuntu-24.04", timeout=900)
        assert result.returncode == 0, result.stderr
        inventory = result.stdout.strip().splitlines()[-1].removeprefix("inventory: ")
        yield inventory.removesuffix("/hosts.yml")
        assert run_kiln("lab", "down", "--name", LAB, timeout=300).returncode == 0


@pytest.fixture(autouse=True)
def state_dir(lab):
    """Overrides the per-test state dir: these tests share the lab's."""


@pytest.fixture(scope="module")
def provisioned(lab) -> dict:
    code, first = provision(lab)
    assert code == ExitCode.OK, first["failures"]
    return first


def test_the_nodes_run_ubuntu_24_04(lab):
    for node in ("controller", "compute01"):
        assert on(node, ". /etc/os-release && echo $ID $VERSION_ID").split() == ["ubuntu", "24.04"]


def start_times() -> dict[str, str]:
    daemons = "munge slurmctld slurmdbd slurmd chrony autofs glusterd prometheus"
    return {
        node: on(node, f"systemctl show -p ActiveEnterTimestamp {daemons}")
        for node in ("controller", "storage", "compute01", "compute02")
    }


def test_provision_then_reprovision_changes_and_restarts_nothing(lab, provisioned):
    assert sorted(provisioned["hosts"]) == NODES
    assert all(counts["changed"] > 0 for counts in provisioned["hosts"].values())
    before = start_times()
    code, second = provision(lab)
    assert code == ExitCode.OK, second["failures"]
    assert {h: c["changed"] for h, c in second["hosts"].items()} == dict.fromkeys(NODES, 0)
    assert start_times() == before, "a daemon was restarted by a run that changed nothing"


def test_slurm_runs_jobs_across_the_nodes(lab, provisioned):
    hosts = on("controller", "srun -N2 hostname").split()
    assert sorted(hosts) == [f"{LAB}-compute01", f"{LAB}-compute02"]
    assert "slurm-wlm 23.11" in on("controller", "sinfo --version")


def test_validate_passes_every_node(lab, provisioned):
    result = run_kiln("validate", "-i", lab, "--json", timeout=1200)
    report = json.loads(result.stdout)
    assert result.returncode == ExitCode.OK, (result.stderr, report["node_verdicts"])
    assert report["node_verdicts"] == {
        f"{LAB}-compute01": {"verdict": "pass", "reasons": []},
        f"{LAB}-compute02": {"verdict": "pass", "reasons": []},
    }


@pytest.fixture(scope="module")
def torch(lab, provisioned) -> None:
    """PyPI's torch for Python 3.12 unpacked into each compute node's site directory."""
    if not any(WHEELS.glob("torch-*.whl")):
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", TORCH, "--python-version", "3.12"]
            + [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux2014_x86_64")]
            + ["--platform=manylinux1_x86_64", "--only-binary=:all:", "-d", str(WHEELS)],
            capture_output=True,
            text=True,
        )
        if fetched.returncode != 0:
            pytest.skip(f"no {TORCH} for Python 3.12 from PyPI: {fetched.stderr.strip()[-300:]}")
    for node in ("compute01", "compute02"):
        container = f"{LAB}-{node}"
        subprocess.run(["podman", "cp", str(WHEELS), f"{container}:/var/cache/kiln-wheels"],
                       check=True)  # fmt: skip
        on(
            node,
            "set -e; site=/usr/local/lib/python3.12/dist-packages; mkdir -p $site;"
            " for w in /var/cache/kiln-wheels/*.whl; do python3 -m zipfile -e $w $site; done;"
            " rm -rf /var/cache/kiln-wheels",
        )
        assert on(node, "python3 -c 'import torch; print(torch.__version__)'").strip() == (
            TORCH.split("==")[1] + "+cu124"
        )


def test_a_short_burn_in_passes_on_both_nodes(lab, provisioned, torch):
    command = ["burn-in", "-i", lab, "--json", "--duration", "1m30s"]
    result = run_kiln(*command, timeout=900)
    report = json.loads(result.stdout)
    assert result.returncode == ExitCode.OK, (result.stderr, report["node_verdicts"])
    assert (report["suites"], report["profile"]) == (["burn-in"], "lab-cpu")
    assert report["node_verdicts"] == {
        f"{LAB}-compute01": {"verdict": "pass", "reasons": []},
        f"{LAB}-compute02": {"verdict": "pass", "reasons": []},
    }
    tested = {(j["node"], j["test"]) for j in report["judgements"]}
    for node in (f"{LAB}-compute01", f"{LAB}-compute02"):
        assert (node, "burn_in.tflops") in tested
        assert (node, "collectives.all_reduce.single_node") in tested
    assert Path(os.environ["KILN_STATE_DIR"], "validations", report["id"], "report.html").exists()
