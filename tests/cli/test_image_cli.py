"""`kiln image build`'s bad input: one line, exit 2, and nothing started or written (no
build container, no run record, no output directory). The build itself is
the lab's (tests/e2e/test_lab.py, TestAThirdComputeNode)."""

import subprocess
import tempfile
from pathlib import Path

import pytest

from kiln.errors import ExitCode
from tests.conftest import cluster_inventory, run_kiln

# A real, made-up cluster: the image is built with gpu001's variables.
HOSTS = cluster_inventory(compute=("gpu001", "gpu002"))
PINS_HINT = "`kiln inventory pins -i {inv} --write` fetches it and fills it in"


@pytest.fixture
def inv(write_inventory) -> Path:
    return write_inventory(HOSTS)


def build(*args: str) -> tuple[int, str]:
    result = run_kiln("image", "build", *args, timeout=60)
    assert result.stdout == ""
    return result.returncode, result.stderr


def nothing_started(state_dir: Path, *outputs: Path) -> None:
    containers = subprocess.run(
        ["podman", "ps", "-a", "--filter", "label=io.kiln.image", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert containers == ""
    assert not (state_dir / "runs").exists()
    for output in outputs:
        assert not output.exists()


def test_an_unknown_base_image_is_refused(inv, tmp_path, state_dir):
    out = tmp_path / "image"
    code, err = build("-i", str(inv), "-o", str(out), "--base", "localhost/kiln-no-such:image")
    assert (code, err) == (
        ExitCode.BAD_INPUT,
        "kiln: error: --base localhost/kiln-no-such:image: no such image in podman (`podman "
        "images` lists them; `kiln lab up` builds the lab's node image)\n",
    )
    nothing_started(state_dir, out)


def test_an_unknown_network_is_refused(inv, tmp_path, state_dir):
    out = tmp_path / "image"
    code, err = build("-i", str(inv), "-o", str(out), "--network", "kiln-no-such-net")
    assert (code, err) == (
        ExitCode.BAD_INPUT,
        "kiln: error: --network kiln-no-such-net: no such podman network\n",
    )
    nothing_started(state_dir, out)


def test_an_output_directory_that_cannot_be_written_is_refused(inv, state_dir):
    out = Path("/sys/kiln-image")  # sysfs: not even root makes a file there
    try:
        tempfile.NamedTemporaryFile(dir="/sys").close()
        pytest.skip("/sys takes files here")
    except OSError as exc:
        reason = exc.strerror
    code, err = build("-i", str(inv), "-o", str(out))
    assert (code, err) == (
        ExitCode.BAD_INPUT,
        f"kiln: error: --output {out}: not writable ({reason})\n",
    )
    nothing_started(state_dir, out)


def test_an_output_that_is_a_file_or_under_no_directory_is_refused(inv, tmp_path, state_dir):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    assert build("-i", str(inv), "-o", str(a_file)) == (
        ExitCode.BAD_INPUT,
        f"kiln: error: --output {a_file}: not a directory\n",
    )
    assert build("-i", str(inv), "-o", str(tmp_path / "typo" / "image")) == (
        ExitCode.BAD_INPUT,
        f"kiln: error: --output {tmp_path / 'typo' / 'image'}: no directory {tmp_path / 'typo'}\n",
    )
    assert a_file.read_text() == "mine\n"
    nothing_started(state_dir, tmp_path / "typo")


def test_an_output_directory_holding_an_image_needs_force(inv, tmp_path, state_dir):
    out = tmp_path / "image"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": 1}\n')
    (out / "rootfs.tar").write_bytes(b"old")
    assert build("-i", str(inv), "-o", str(out)) == (
        ExitCode.BAD_INPUT,
        f"kiln: error: --output {out}: holds an image already (rootfs.tar, manifest.json);"
        " --force replaces it\n",
    )
    # --force passes that check and stops at the next one: still nothing replaced.
    code, err = build("-i", str(inv), "-o", str(out), "--force", "--base", "kiln-no-such:x")
    assert (code, err.split(":")[2].strip()) == (ExitCode.BAD_INPUT, "--base kiln-no-such")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "rootfs.tar"]
    assert (out / "rootfs.tar").read_bytes() == b"old"
    nothing_started(state_dir)


def test_missing_inventory_values_are_refused(write_inventory, tmp_path, state_dir):
    # A release pinned without its sha256: the image's manifest could not name it.
    inv = write_inventory(
        HOSTS, files={"group_vars/all/enroot.yml": {"enroot_version": "3.5.0"}}, name="pinless"
    )
    code, err = build("-i", str(inv), "-o", str(tmp_path / "image"))
    hint = PINS_HINT.format(inv=inv)
    assert (code, err) == (
        ExitCode.BAD_INPUT,
        "kiln: error: gpu[001-002]: enroot_version 3.5.0 needs enroot_sha256: the enroot package's"
        f" sha256 (64 hex digits); {hint}\n"
        "kiln: error: gpu[001-002]: enroot_version 3.5.0 with enroot_caps needs enroot_caps_sha256:"
        f" the enroot+caps package's sha256 (64 hex digits); {hint}\n",
    )
    nothing_started(state_dir, tmp_path / "image")


def test_an_inventory_without_compute_nodes_or_another_like_is_refused(
    write_inventory, inv, tmp_path, state_dir
):
    bare = write_inventory(cluster_inventory(compute=()), name="bare")
    assert build("-i", str(bare), "-o", str(tmp_path / "image")) == (
        ExitCode.BAD_INPUT,
        "kiln: error: inventory: slurm_compute is empty (expected at least 1 host)\n",
    )
    assert build("-i", str(inv), "-o", str(tmp_path / "image"), "--like", "ctl1") == (
        ExitCode.BAD_INPUT,
        "kiln: error: ctl1 not in the inventory's slurm_compute (gpu[001-002])\n",
    )
    nothing_started(state_dir, tmp_path / "image")


def test_a_tag_podman_would_refuse_is_refused_before_the_build(inv, tmp_path, state_dir):
    assert build("-i", str(inv), "-o", str(tmp_path / "image"), "--tag", "Kiln Image") == (
        ExitCode.BAD_INPUT,
        "kiln: error: --tag 'Kiln Image': not an image name (lower-case NAME[/NAME...][:TAG])\n",
    )
    nothing_started(state_dir, tmp_path / "image")
