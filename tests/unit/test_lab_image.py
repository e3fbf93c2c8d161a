"""The images Kiln builds with debootstrap: the execution environment's base as
execution-environment.yml uses it (the debootstrap itself runs by hand:
bench/execution_environment.py)."""

import gzip
import hashlib
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from kiln.errors import InputError, KilnError
from kiln.lab import distros, image, ubuntu_keyring
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


FIXTURES = REPO / "tests" / "fixtures" / "apt"


def test_the_releases_go_by_codename_or_by_name_and_others_are_refused():
    assert [distros.find(n).codename for n in ("noble", "ubuntu-24.04", "debian-12")] == [
        "noble",
        "noble",
        "bookworm",
    ]
    with pytest.raises(InputError, match="unknown distro 'rocky-9'"):
        distros.find("rocky-9")


def test_an_ubuntu_image_gets_ubuntus_archive_with_universe_and_restricted(tmp_path):
    root = tmp_path / "root"
    for folder in ("etc/apt", "var/cache/apt/archives"):
        (root / folder).mkdir(parents=True)
    image._finish_apt(root, "noble")
    assert (root / "etc/apt/sources.list").read_text().splitlines() == [
        "deb http://archive.ubuntu.com/ubuntu noble main restricted universe multiverse",
        "deb http://archive.ubuntu.com/ubuntu noble-updates main restricted universe multiverse",
        "deb http://security.ubuntu.com/ubuntu noble-security main restricted universe multiverse",
    ]


def test_ubuntus_debootstrap_takes_the_checked_keyring_and_the_shared_script(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_UBUNTU_MIRROR", "http://mirror.example/ubuntu")
    fetched = []

    def fetch(mirror, codename, into):
        fetched.append((mirror, codename))
        return into / "ubuntu-archive-keyring.gpg"

    monkeypatch.setattr(ubuntu_keyring, "fetch", fetch)
    cmd = image._debootstrap(image.NODE, distros.find("jammy"), tmp_path / "root", tmp_path)
    assert cmd == [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(image.PACKAGES)}",
        f"--keyring={tmp_path}/keyring/ubuntu-archive-keyring.gpg",
        "jammy",
        f"{tmp_path}/root",
        "http://mirror.example/ubuntu",
        "/usr/share/debootstrap/scripts/gutsy",
    ]
    assert fetched == [("http://mirror.example/ubuntu", "jammy")]
    monkeypatch.setenv("KILN_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert image._debootstrap(image.NODE, distros.find("trixie"), tmp_path / "r", tmp_path) == [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(image.PACKAGES)}",
        "trixie",
        f"{tmp_path}/r",
        "http://mirror.example/debian",
    ]


def test_the_keyrings_primary_keys_are_read_by_fingerprint():
    keys = ubuntu_keyring.fingerprints((FIXTURES / "ubuntu-archive-keyring.gpg").read_bytes())
    # As `gpg --show-keys` lists them.
    assert keys == [
        "790BC7277767219C42C86F933B4FE6ACC0B21F32",
        "843938DF228D22F7B3742BC0D94AA3F0EFE21092",
        ubuntu_keyring.ARCHIVE_KEY,
    ]
    with pytest.raises(ValueError, match="not an OpenPGP packet at byte 0"):
        ubuntu_keyring.fingerprints(b"ubuntu")


def test_the_keyring_package_is_found_in_the_archives_index():
    entry = ubuntu_keyring.package_entry((FIXTURES / "noble-main-Packages-excerpt").read_text())
    assert (entry["Version"], entry["Filename"], entry["SHA256"]) == (
        "2023.11.28.1",
        "pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb",
        "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8",
    )


def archive_with_keyring(tmp_path: Path, keyring: bytes) -> dict[str, bytes]:
    """An archive's index and an ubuntu-keyring package holding KEYRING, by URL."""
    tree = tmp_path / "pkg"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(
        "Package: ubuntu-keyring\nVersion: 2023.11.28.1\nArchitecture: all\n"
        "Maintainer: Kiln tests <kiln@example.org>\nDescription: keyring\n"
    )
    (tree / "usr/share/keyrings").mkdir(parents=True)
    (tree / "usr/share/keyrings/ubuntu-archive-keyring.gpg").write_bytes(keyring)
    deb = tmp_path / "ubuntu-keyring.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)],
                   capture_output=True, check=True)  # fmt: skip
    body = deb.read_bytes()
    filename = "pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
    index = (
        "Package: ubuntu-keyring\nVersion: 2023.11.28.1\n"
        f"Filename: {filename}\nSHA256: {hashlib.sha256(body).hexdigest()}\n"
    )
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    mirror = "http://mirror.example/ubuntu"
    return {
        f"{mirror}/dists/noble/main/binary-{arch.stdout.strip()}/Packages.gz": gzip.compress(
            index.encode()
        ),
        f"{mirror}/{filename}": body,
    }


def test_the_keyring_is_used_only_when_it_holds_ubuntus_archive_key(tmp_path, monkeypatch):
    keyring = (FIXTURES / "ubuntu-archive-keyring.gpg").read_bytes()
    served = archive_with_keyring(tmp_path / "real", keyring)
    monkeypatch.setattr(ubuntu_keyring, "_get", served.__getitem__)
    found = ubuntu_keyring.fetch("http://mirror.example/ubuntu", "noble", tmp_path / "a")
    assert found.read_bytes() == keyring
    # Another keyring under the same name: the 2012 key's packet alone (an old-format
    # header, 0x99, and a two-byte length).
    first_only = keyring[: 3 + int.from_bytes(keyring[1:3], "big")]
    assert ubuntu_keyring.fingerprints(first_only) == ["790BC7277767219C42C86F933B4FE6ACC0B21F32"]
    served = archive_with_keyring(tmp_path / "other", first_only)
    monkeypatch.setattr(ubuntu_keyring, "_get", served.__getitem__)
    with pytest.raises(KilnError) as refused:
        ubuntu_keyring.fetch("http://mirror.example/ubuntu", "noble", tmp_path / "b")
    assert str(refused.value) == (
        "ubuntu-keyring 2023.11.28.1 from http://mirror.example/ubuntu lacks Ubuntu's archive"
        " key F6ECB3762474EDA9D21B7022871920D1991BC93C (it holds"
        " 790BC7277767219C42C86F933B4FE6ACC0B21F32): not used"
    )


def test_two_runs_that_need_one_image_build_it_once(tmp_path, monkeypatch):
    """`make test`'s lanes each bring up the images they need, at once on a fresh
    machine: the second waits for the first's build and uses it."""
    import threading
    import time

    monkeypatch.setattr(image.tempfile, "gettempdir", lambda: str(tmp_path))
    built: list[str] = []
    monkeypatch.setattr(image, "is_current", lambda distro, recipe=image.NODE: bool(built))

    def build(distro, name, recipe, log):
        time.sleep(0.3)  # long enough for the other run to find no image and wait
        built.append(name)

    monkeypatch.setattr(image, "_build", build)
    names: list[str] = []
    runs = [
        threading.Thread(target=lambda: names.append(image.ensure_image("trixie", print)))
        for _ in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert built == ["localhost/kiln-node:trixie"]
    assert names == ["localhost/kiln-node:trixie"] * 2
    assert image.build_lock("localhost/kiln-node:trixie") == tmp_path / (
        "kiln-image-localhost_kiln-node_trixie.lock"
    )
