"""`make gpu-check`'s own aids, on machines without a GPU: nvidia-smi that hangs or
says the driver is not loaded gives one clear line, never a hang; what it records is
sanitised (no serial or UUID in the clear)."""

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.gpu import machine as gm

REPO = Path(__file__).resolve().parents[2]
H100 = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100-80gb-hbm3-vm"


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Puts an `nvidia-smi` shell script with the given body first on PATH."""

    def make(body: str) -> None:
        script = tmp_path / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")

    return make


def test_hung_nvidia_smi_is_one_line(fake_smi, monkeypatch):
    fake_smi("exec sleep 30")
    monkeypatch.setattr(gm, "SMI_TIMEOUT_S", 0.5)
    with pytest.raises(gm.BrokenGpuMachine) as found:
        gm.smi("-L", timeout=0.5)
    assert str(found.value) == "nvidia-smi -L did not answer in 0.5 s: the driver or a GPU is hung"


def test_driver_not_loaded_on_a_gpu_machine(fake_smi):
    fake_smi(
        "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA "
        "driver. Make sure that the latest NVIDIA driver is installed and running.'; exit 9"
    )
    with pytest.raises(gm.BrokenGpuMachine) as found:
        gm.probe(pci_gpus=8)
    assert str(found.value) == (
        f"nvidia-smi --query-gpu={','.join(gm.FIELDS)} --format=csv,noheader,nounits: the "
        "NVIDIA driver is not loaded (NVIDIA-SMI has failed because it couldn't communicate "
        "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and "
        "running.)"
    )


def test_no_gpu_skips_with_the_reason(fake_smi, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(gm.NotAGpuMachine, match=r"^nvidia-smi is not installed"):
        gm.probe(pci_gpus=0)
    fake_smi("exit 9")
    with pytest.raises(gm.NotAGpuMachine, match=r"^no NVIDIA GPU on the PCI bus"):
        gm.probe(pci_gpus=0)


def test_gpus_without_nvidia_smi_are_a_broken_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(gm.BrokenGpuMachine) as found:
        gm.probe(pci_gpus=2)
    assert str(found.value) == (
        "2 NVIDIA GPU(s) on the PCI bus, but nvidia-smi is not installed: no NVIDIA driver here"
    )


def test_sanitise_replaces_serials_uuids_and_host():
    xml = (H100 / "nvidia-smi-q.xml").read_text()
    clean = gm.sanitise(
        xml + "\n<host>gpuhost7</host> gpuhost7.example\n",
        ["1652524086972", "GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70"],
        "gpuhost7",
    )
    assert "1652524086972" not in clean and "320a3b5b" not in clean
    assert clean.count("<serial>SERIAL0000001</serial>") == 1
    assert clean.count("<uuid>GPU-00000000-0000-0000-0000-000000000001</uuid>") == 1
    assert clean.endswith("<host>gpu-test-host</host> gpu-test-host.example\n")
    # Nothing else changed: the same lines, but for the three replaced.
    changed = [(a, b) for a, b in zip(xml.splitlines(), clean.splitlines(), strict=False) if a != b]
    assert [a.strip() for a, _ in changed] == [
        "<serial>1652524086972</serial>",
        "<uuid>GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70</uuid>",
    ]


def test_machine_slug():
    machine = gm.Machine([{"name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04"}])
    assert machine.slug == "h100-80gb-hbm3-580.159.04"
    assert gm.Machine([{"name": "NVIDIA H200", "driver_version": "580.1"}]).slug == "h200-580.1"
    assert gm.pci_address("00000000:1B:00.0") == "0000:1b:00.0"


def test_make_gpu_check_finds_kiln_on_a_machine_without_it(tmp_path):
    """A GPU machine has no Kiln installed: the recipe's PYTHONPATH alone must bring both
    packages (kiln and kiln_node). `-S` keeps the venv's .pth (its editable install) out;
    its site-packages still gives pytest. Without a GPU every test skips, none errs."""
    site = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KILN_NODE_LIBRARY")}
    env["PATH"] = str(tmp_path)  # no nvidia-smi: not a GPU machine
    make = ["/usr/bin/make", "-s", "gpu-check", f"GPU_PYTHON={sys.executable} -S"]
    done = subprocess.run(
        [*make, f"PYTHONPATH={site}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert re.search(r"=+ (\d+) skipped in ", done.stdout), done.stdout[-2000:]
    assert " error" not in done.stdout.splitlines()[-1]
