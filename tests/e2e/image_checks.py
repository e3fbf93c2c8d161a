"""What `kiln image build` wrote, checked whole: the manifest against the image podman
holds and the packages dpkg in it reads, the root filesystem without a machine's
identity, the run's record, and the OCI archive loading as the same image. Used by the
lab's test of a node added from an image (tests/e2e/test_lab.py)."""

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import yaml

from kiln import __version__, inventory
from kiln.image import manifest
from kiln.image.build import DPKG_FORMAT
from tests import standins
from tests.conftest import run_kiln


def podman(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def assert_built(report: dict, out: Path, inv: str, like: str, tag: str, base: str) -> None:
    """REPORT is `kiln image build --json`'s, for TAG from the lab node image BASE with
    INV's settings for LIKE, written to OUT."""
    assert report["run"]["status"] == "successful"
    assert report["run"]["failures"] == []
    [container] = report["run"]["hosts"]  # the one build host, named for its container
    assert container.startswith("kiln-image-")
    assert report["run"]["hosts"][container]["failed"] == 0
    found = json.loads((out / manifest.MANIFEST_FILE).read_text())
    assert found == report["manifest"]

    # The image as podman holds it, its packages as dpkg in it reads them.
    image_id = podman("image", "inspect", "--format", "{{.Id}}", tag).strip()
    base_id = podman("image", "inspect", "--format", "{{.Id}}", base).strip()
    # dpkg-query exits 1 for the packages it does not know (the GPU stack's, here).
    dpkg = subprocess.run(
        ["podman", "run", "--rm", tag, "dpkg-query", "-W", "-f", DPKG_FORMAT, *manifest.PACKAGES],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    packages = manifest.parse_dpkg(dpkg)
    assert sorted(packages) == [
        "autofs",
        "enroot",
        "enroot+caps",
        "glusterfs-client",
        "lmod",
        "munge",
        "nfs-common",  # autofs recommends it
        "openmpi-bin",
        "prometheus-node-exporter",  # off until the node's provision (docs/images.md)
        "slurm-client",
        "slurmd",
    ]
    # The lab pins enroot and pyxis (the stand-ins, `make lab`'s settings), nothing
    # else: the other components with the roles' defaults (tests/unit/test_image.py).
    pins = yaml.safe_load(standins.LAB_SETTINGS.read_text())
    assert packages["enroot"].startswith(pins["enroot_version"])
    assert found == {
        "kiln_version": __version__,
        "built": found["built"],
        "run": report["run"]["run"],
        "inventory": inv,
        "like": like,
        "base_image": {"name": base, "id": base_id},
        "image": {"name": tag, "id": image_id},
        "pins": {
            **manifest.pins(inventory.load(Path(inv)), like),
            "enroot": {
                "version": pins["enroot_version"],
                "sha256": pins["enroot_sha256"],
                "caps_sha256": pins["enroot_caps_sha256"],
            },
            "pyxis": {"version": pins["pyxis_version"], "sha256": pins["pyxis_sha256"]},
        },
        "packages": packages,
        "files": [
            {
                "name": name,
                "bytes": (out / name).stat().st_size,
                "sha256": sha256(out / name),
            }
            for name in (manifest.OCI_FILE, manifest.ROOTFS_FILE)
        ],
        "format": manifest.FORMAT,
    }
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [manifest.OCI_FILE, manifest.ROOTFS_FILE, manifest.MANIFEST_FILE]
    )
    # The build container is gone; the run left its record.
    assert podman("ps", "-a", "--filter", "label=io.kiln.image", "--format", "{{.Names}}") == ""
    shown = run_kiln("runs", "show", found["run"], "--json")
    assert json.loads(shown.stdout)["status"] == "successful", shown.stderr
    # The record names the operator's inventory, not the build's temporary one.
    listed = json.loads(run_kiln("runs", "list", "--json").stdout)["runs"]
    assert [r["inventory"] for r in listed if r["run"] == found["run"]] == [inv]

    # The root filesystem: the roles' work in it, no machine's identity.
    with tarfile.open(out / manifest.ROOTFS_FILE) as rootfs:
        members = {m.name.removeprefix("./"): m for m in rootfs.getmembers()}
    for program in ("usr/sbin/slurmd", "usr/bin/enroot", "usr/local/sbin/kiln-health"):
        assert program in members, program
    assert members["etc/machine-id"].size == 0
    # node_exporter is installed but not enabled: a node from the image does not listen
    # on every address before its provision names one. (deb-systemd-helper keeps its own
    # record of what the package enabled, under /var/lib/systemd: not what boots.)
    assert "usr/bin/prometheus-node-exporter" in members
    wanted = [n for n in members if n.startswith("etc/systemd/system/") and ".wants/" in n]
    assert [n for n in wanted if n.endswith("/prometheus-node-exporter.service")] == []
    # The units the image does enable are there.
    assert "etc/systemd/system/multi-user.target.wants/ssh.service" in wanted
    assert not [n for n in members if n.startswith("etc/ssh/ssh_host_")]
    assert not [n for n in members if n.startswith(("etc/ansible/facts.d/", "etc/munge/munge.key"))]
    assert not [n for n in members if n.startswith("var/lib/apt/lists/") and members[n].isfile()]
    # The lists' age reads as never updated: else a node from the image takes its empty
    # lists for fresh (cache_valid_time) and finds no package the image lacks
    # (bench/image.py found autofs missing so).
    assert "var/lib/apt/periodic/update-success-stamp" not in members
    assert members["var/lib/apt/lists"].mtime == 0

    # The OCI archive loads as the same image (which a node runs from, so it is not
    # removed first: podman reads the whole archive and names the image it holds).
    loaded = podman("load", "--input", str(out / manifest.OCI_FILE))
    assert loaded.splitlines()[-1] == f"Loaded image: {tag}", loaded
    assert podman("image", "inspect", "--format", "{{.Id}}", tag).strip() == image_id
