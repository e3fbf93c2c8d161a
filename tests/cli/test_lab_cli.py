"""`kiln lab up --image`: an image podman lacks, or one `kiln image build` did not make
from this lab's node image, is refused with one line and exit 2 before anything of the
lab is made. The boot itself is bench/image.py's (docs/performance.md)."""

import subprocess
import tarfile

import pytest

from kiln.errors import ExitCode
from kiln.lab import image
from tests.conftest import run_kiln

LAB = "imgcheck"
NODE_IMAGE = "localhost/kiln-node:trixie"


def podman(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def empty_image(tmp_path):
    """Makes an image of an empty tree with the labels given: what the check reads."""
    made = []

    def make(name: str, labels: dict[str, str]) -> str:
        tarball = tmp_path / "empty.tar"
        with tarfile.open(tarball, "w"):
            pass
        changes = [arg for k, v in labels.items() for arg in ("--change", f"LABEL={k}={v}")]
        podman("import", *changes, str(tarball), name)
        made.append(name)
        return name

    yield make
    for name in made:
        subprocess.run(["podman", "rmi", "--force", name], capture_output=True, check=False)


def up_with(boot_image: str, state_dir) -> str:
    result = run_kiln("lab", "up", "--name", LAB, "--compute", "1", "--image", boot_image)
    assert (result.returncode, result.stdout) == (ExitCode.BAD_INPUT, ""), result.stderr
    # Nothing of the lab: no network, no container, no record.
    assert podman("network", "ls", "--format", "{{.Name}}", "--filter", f"name=kiln-{LAB}") == ""
    labelled = podman("ps", "-a", "--filter", f"label=io.kiln.lab={LAB}", "--format", "{{.Names}}")
    assert labelled == ""
    assert not (state_dir / "lab" / LAB).exists()
    return result.stderr


def test_an_image_podman_lacks_is_refused(state_dir):
    assert up_with("localhost/kiln-no-such:image", state_dir) == (
        "kiln: error: --image localhost/kiln-no-such:image: no such image in podman"
        " (`kiln image build --tag localhost/kiln-no-such:image` builds one)\n"
    )


def test_an_image_kiln_did_not_build_is_refused(state_dir, empty_image):
    # The lab's own node image carries its recipe's label, not a build's.
    name = empty_image(
        "localhost/kiln-test-plain:1", {image.RECIPE_LABEL: image.recipe_hash("trixie")}
    )
    assert up_with(name, state_dir) == (
        f"kiln: error: --image {name}: not an image `kiln image build` made"
        " (no io.kiln.image label)\n"
    )


def test_an_image_built_from_another_release_is_refused(state_dir, empty_image):
    labels = {"io.kiln.image": "20261129-175124-image-d6a9"}
    labels[image.RECIPE_LABEL] = image.recipe_hash("bookworm")
    name = empty_image("localhost/kiln-test-bookworm:1", labels)
    assert up_with(name, state_dir) == (
        f"kiln: error: --image {name}: not built from this lab's node image"
        f" ({NODE_IMAGE}); build it again with `kiln image build --base {NODE_IMAGE}`\n"
    )


def test_up_passes_the_image_on_and_prints_each_nodes_image(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from kiln.cli import cli
    from kiln.lab import cluster

    asked = []

    def up(name, compute, distro, log, boot_image=None):
        asked.append((name, compute, distro, boot_image))
        return cluster.plan(name, compute, distro, boot_image), tmp_path / "hosts.yml"

    monkeypatch.setattr(cluster, "up", up)
    built = "localhost/kiln-image:mine"
    result = CliRunner().invoke(
        cli, ["lab", "up", "--name", "t", "--compute", "1", "--image", built]
    )
    assert (result.exit_code, asked) == (0, [("t", 1, "trixie", built)])
    prefix = cluster._subnet_prefix("t")
    assert result.output.splitlines() == [
        f"t-controller             controller  {prefix}.10     {NODE_IMAGE}",
        f"t-storage                storage     {prefix}.20     {NODE_IMAGE}",
        f"t-compute01              compute     {prefix}.101    {built}",
        f"inventory: {tmp_path / 'hosts.yml'}",
    ]
