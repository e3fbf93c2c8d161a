"""`kiln image build` end to end: the lab's node image (the one `kiln lab up` boots,
built once and shared with tests/e2e/test_lab.py) with the lab's settings and its
enroot and pyxis stand-ins applied through podman, written out and loaded back. No lab:
the build container is the only one. A few minutes."""

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from kiln import __version__, inventory, os_support
from kiln.image import manifest
from kiln.image.build import DPKG_FORMAT
from kiln.lab import doctor
from kiln.lab import image as lab_image
from tests import standins
from tests.conftest import REPO, run_kiln

pytestmark = pytest.mark.e2e
TAG = "localhost/kiln-image:e2e"
PODMAN_GATEWAY = "10.88.0.1"  # podman's default network, where the build container is


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


@pytest.fixture
def lab_inventory(tmp_path) -> Path:
    """The lab's settings (and the stand-ins' pins) with the lab's hosts, by name: the
    image is built with compute01's variables, as a lab node's would be."""
    pins = standins.lab_settings()
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    for source in (REPO / "inventories" / "lab" / "group_vars").rglob("*.yml"):
        rel = source.relative_to(REPO / "inventories" / "lab" / "group_vars")
        (inv / "group_vars" / rel).parent.mkdir(parents=True, exist_ok=True)
        (inv / "group_vars" / rel).write_text(source.read_text())
    all_vars = {"ansible_user": "root"}
    if doctor.apt_cache_available():
        all_vars["base_apt_proxy"] = f"http://{PODMAN_GATEWAY}:{doctor.APT_CACHE_PORT}"
    hosts = {
        "all": {
            "vars": all_vars,
            "children": {
                "slurm_controller": {"hosts": {"lab-controller": {"ansible_host": "10.9.0.2"}}},
                "storage": {"hosts": {"lab-storage": {"ansible_host": "10.9.0.3"}}},
                "slurm_compute": {
                    "hosts": {
                        "lab-compute01": {
                            "ansible_host": "10.9.0.11",
                            "rack": "rack1",
                            "topology_path": ["spine1", "leaf1"],
                        }
                    }
                },
            },
        }
    }
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    yield inv, pins
    subprocess.run(["podman", "rmi", "--force", TAG], capture_output=True, check=False)


def test_an_image_is_built_from_the_lab_node_image_and_loads(lab_inventory, tmp_path):
    inv, pins = lab_inventory
    base = lab_image.ensure_image("trixie", print)
    out = tmp_path / "image"
    result = run_kiln(
        "image", "build", "-i", str(inv), "-o", str(out), "--tag", TAG, "--json", timeout=1500
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["run"]["status"] == "successful"
    assert report["run"]["failures"] == []
    [container] = report["run"]["hosts"]  # the one build host, named for its container
    assert container.startswith("kiln-image-")
    assert report["run"]["hosts"][container]["failed"] == 0
    assert [f for f in os_support.fact_files(container) if f.exists()] == []
    found = json.loads((out / manifest.MANIFEST_FILE).read_text())
    assert found == report["manifest"]

    # The image as podman holds it, its packages as dpkg in it reads them.
    image_id = podman("image", "inspect", "--format", "{{.Id}}", TAG).strip()
    base_id = podman("image", "inspect", "--format", "{{.Id}}", base).strip()
    # dpkg-query exits 1 for the packages it does not know (the GPU stack's, here).
    dpkg = subprocess.run(
        ["podman", "run", "--rm", TAG, "dpkg-query", "-W", "-f", DPKG_FORMAT, *manifest.PACKAGES],
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
        "slurm-client",
        "slurmd",
    ]
    assert packages["enroot"].startswith(pins["enroot_version"])
    assert found == {
        "kiln_version": __version__,
        "built": found["built"],
        "run": report["run"]["run"],
        "inventory": str(inv),
        "like": "lab-compute01",
        "base_image": {"name": base, "id": base_id},
        "image": {"name": TAG, "id": image_id},
        # The lab pins enroot and pyxis (the stand-ins), nothing else: the other
        # components with the roles' defaults (tests/unit/test_image.py has them).
        "pins": {
            **manifest.pins(inventory.load(inv), "lab-compute01"),
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
    assert [r["inventory"] for r in listed if r["run"] == found["run"]] == [str(inv)]

    # The root filesystem: the roles' work in it, no machine's identity.
    with tarfile.open(out / manifest.ROOTFS_FILE) as rootfs:
        members = {m.name.removeprefix("./"): m for m in rootfs.getmembers()}
    for program in ("usr/sbin/slurmd", "usr/bin/enroot", "usr/local/sbin/kiln-health"):
        assert program in members, program
    assert members["etc/machine-id"].size == 0
    assert not [n for n in members if n.startswith("etc/ssh/ssh_host_")]
    assert not [n for n in members if n.startswith(("etc/ansible/facts.d/", "etc/munge/munge.key"))]
    assert not [n for n in members if n.startswith("var/lib/apt/lists/") and members[n].isfile()]
    # The lists' age reads as never updated: else a node from the image takes its empty
    # lists for fresh (cache_valid_time) and finds no package the image lacks
    # (bench/image.py found autofs missing so).
    assert "var/lib/apt/periodic/update-success-stamp" not in members
    assert members["var/lib/apt/lists"].mtime == 0

    # The OCI archive loads back as the same image.
    podman("rmi", TAG)
    podman("load", "--input", str(out / manifest.OCI_FILE))
    assert podman("image", "inspect", "--format", "{{.Id}}", image_id).strip() == image_id
