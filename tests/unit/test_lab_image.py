"""The images Kiln builds with debootstrap: the execution environment's base as
execution-environment.yml uses it (the debootstrap itself runs by hand:
bench/execution_environment.py)."""

import os
import subprocess

import yaml

from kiln.lab import image
from tests.conftest import REPO


def test_the_ee_definition_builds_from_kilns_base_and_its_apt_wrapper():
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert definition["images"] == {"base_image": {"name": "localhost/kiln-ee-base:trixie"}}
    assert image.image_name("trixie", image.EE_BASE) == "localhost/kiln-ee-base:trixie"
    assert definition["options"] == {
        "package_manager_path": image.EE_APT,
        "skip_pip_install": True,
    }


def test_the_ee_base_tree_gets_the_archive_the_apt_wrapper_and_the_hosts_cas(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for folder in ("etc/apt", "var/cache/apt/archives", "var/lib/apt/lists", "usr/local/bin"):
        (root / folder).mkdir(parents=True)
    (root / "var/cache/apt/archives/python3_3.13.deb").write_text("")
    (root / "var/lib/apt/lists/deb.debian.org_Packages").write_text("")
    monkeypatch.setattr(image, "HOST_CA_DIR", tmp_path / "no-cas")
    image.EE_BASE.configure(root, "trixie")
    assert (root / "etc/apt/sources.list").read_text().splitlines() == [
        "deb http://deb.debian.org/debian trixie main",
        "deb http://deb.debian.org/debian trixie-updates main",
        "deb http://deb.debian.org/debian-security trixie-security main",
    ]
    assert list((root / "var/cache/apt/archives").iterdir()) == []
    assert [p.name for p in (root / "var/lib/apt/lists").iterdir()] == ["partial"]
    apt = root / image.EE_APT.lstrip("/")
    assert apt.stat().st_mode & 0o777 == 0o755
    # ansible-builder's `$PKGMGR install -y PKG...`: apt's lists first, then apt-get.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n')
    (fake / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    done = subprocess.run([apt, "install", "-y", "jq", "git"], env=env, check=False)
    assert done.returncode == 0
    assert (tmp_path / "calls").read_text().splitlines() == [
        "update -qq",
        "install --no-install-recommends -y jq git",
    ]


def test_a_change_of_the_ee_base_recipe_rebuilds_it_and_leaves_the_node_image(monkeypatch):
    node, base = image.recipe_hash("trixie"), image.recipe_hash("trixie", image.EE_BASE)
    assert node != base
    monkeypatch.setattr(image, "EE_PACKAGES", [*image.EE_PACKAGES, "git"])
    assert image.recipe_hash("trixie", image.EE_BASE) != base
    assert image.recipe_hash("trixie") == node
