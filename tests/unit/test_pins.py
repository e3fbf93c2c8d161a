"""`kiln inventory pins` (kiln.inventory.pins): each pinned release fetched once from the
URL the role would use, checked to be what its version says, its sha256 proposed and
written; a download that fails or is something else writes nothing."""

import functools
import hashlib
import http.server
import io
import json
import os
import subprocess
import tarfile
import threading
from pathlib import Path

import pytest

from kiln import inventory
from kiln.inventory import pins, scaffold
from kiln.roles import hpcx
from tests import standins
from tests.conftest import REPO, run_kiln


def _tag_archive(directory: Path, name: str, top: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        info = tarfile.TarInfo(f"{top}/README")
        info.size = 6
        archive.addfile(info, io.BytesIO(b"hello\n"))
    (directory / name).write_bytes(data.getvalue())
    return directory / name


def _inventory(tmp_path: Path, **answers) -> Path:
    cluster = scaffold.NewCluster(
        name="c",
        controllers=[scaffold.Node("head01")],
        compute=[scaffold.Node("gpu01"), scaffold.Node("gpu02")],
        **answers,
    )
    directory = tmp_path / "inv"
    scaffold.write(directory, scaffold.files(cluster))
    return directory


def test_a_keys_fingerprint_is_gpgs(tmp_path):
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    gpg = ["gpg", "--batch", "--quiet", "--passphrase", ""]
    subprocess.run(
        [*gpg, "--quick-gen-key", "k <k@example>", "rsa2048", "sign", "never"],
        env=env,
        check=True,
        capture_output=True,
    )
    armored = subprocess.run(
        ["gpg", "--armor", "--export"], env=env, check=True, capture_output=True, text=True
    ).stdout
    listed = subprocess.run(
        ["gpg", "--with-colons", "--fingerprint"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    fingerprint = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr"))
    assert pins.key_fingerprint(armored) == fingerprint
    with pytest.raises(ValueError, match="no armored public key block"):
        pins.key_fingerprint("-----BEGIN PGP MESSAGE-----\n")
    # A key of another publisher is refused by its fingerprint; the known one passes.
    key = tmp_path / "key.asc"
    key.write_text(armored)
    problem, _ = pins._key("grafana")(key)
    assert problem == (
        f"is a key with fingerprint {fingerprint}, not grafana's "
        "(B53AE77BADB630A683046005963FA27710458545)"
    )
    pins.KEY_FINGERPRINTS["test"] = {fingerprint: "a test key"}
    try:
        assert pins._key("test")(key) == ("", f"fingerprint {fingerprint}: a test key")
    finally:
        del pins.KEY_FINGERPRINTS["test"]


def test_what_an_inventory_new_wrote_asks_for(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    path = _inventory(tmp_path, gpu="h100", fabric="infiniband", driver_source="cuda-repo")
    spec = inventory.load(path, unpinned_ok=True)
    found = pins.plan(spec, "x86_64", None, "")
    assert [(w.variable, w.url, w.file) for w in found.wanted] == [
        (
            "nccl_tests_sha256",
            "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.19.6.tar.gz",
            "nccl-tests-2.19.6.tar.gz",
        ),
        (
            "pyxis_sha256",
            "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz",
            "pyxis-0.24.0.tar.gz",
        ),
        (
            "enroot_sha256",
            "https://github.com/NVIDIA/enroot/releases/download/v4.1.2/enroot_4.1.2-1_amd64.deb",
            "enroot_4.1.2-1_amd64.deb",
        ),
        (
            "enroot_caps_sha256",
            "https://github.com/NVIDIA/enroot/releases/download/v4.1.2/enroot%2Bcaps_4.1.2-1_amd64.deb",
            "enroot+caps_4.1.2-1_amd64.deb",
        ),
    ]
    assert [w.documented for w in found.wanted] == [
        "adbd3d27ba6c00bd7b7cf98cc8811c6ad860427ecd5de59527466b21472c0d93",
        "9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4",
        "",
        "",
    ]
    assert found.skipped == [
        "hpcx_sha256: HPC-X's tarball depends on the nodes' OS and RDMA stack: run "
        "`kiln inventory discover` first, or set hpcx_url",
        "nvidia_driver_cuda_repo_key_sha256: NVIDIA's repository is named for the nodes' OS: "
        "run `kiln inventory discover` first, or set nvidia_driver_cuda_repo_key_url",
    ]
    # After a discovery of Ubuntu 24.04 nodes with inbox rdma-core:
    flavour = hpcx.Flavour("ubuntu24.04", "inbox", "12", "x86_64")
    found = pins.plan(spec, "x86_64", flavour, "ubuntu2404")
    assert [(w.variable, w.url) for w in found.wanted][-2:] == [
        (
            "hpcx_sha256",
            "https://content.mellanox.com/hpc/hpc-x/v2.22.1/"
            "hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda12-x86_64.tbz",
        ),
        (
            "nvidia_driver_cuda_repo_key_sha256",
            "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/3bf863cc.pub",
        ),
    ]
    assert found.skipped == []


def test_a_release_is_fetched_once_checked_and_compared_with_the_documented_one(tmp_path):
    mirror = tmp_path / "mirror"
    archive = _tag_archive(mirror / "pyxis", "v0.24.0.tar.gz", "pyxis-0.24.0")
    wanted = pins.Wanted(
        "pyxis_sha256",
        archive.as_uri(),
        "pyxis-0.24.0.tar.gz",
        "pyxis",
        pins._top_dir("pyxis-0.24.0"),
        documented="9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4",
    )
    found = pins.fetch(wanted, tmp_path / "cache")
    assert found.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert found.note == "unpacks to pyxis-0.24.0/"
    assert found.warning.startswith(f"pyxis_sha256: {archive.as_uri()} is not the release Kiln")
    assert (
        tmp_path / "cache" / "pyxis" / "pyxis-0.24.0.tar.gz"
    ).read_bytes() == archive.read_bytes()
    other = _tag_archive(mirror / "pyxis2", "v0.24.0.tar.gz", "pyxis-0.23.0")
    wrong = pins.Wanted(
        "pyxis_sha256", other.as_uri(), "x.tar.gz", "pyxis", pins._top_dir("pyxis-0.24.0")
    )
    with pytest.raises(pins.PinError) as refused:
        pins.fetch(wrong, tmp_path / "cache")
    assert refused.value.message == (
        f"pyxis_sha256: {other.as_uri()} does not unpack to pyxis-0.24.0/ (it holds "
        "pyxis-0.23.0): another release?; nothing written"
    )
    assert not (tmp_path / "cache" / "pyxis" / "x.tar.gz").exists()


def test_an_enroot_package_is_checked_by_its_control_fields(tmp_path):
    standins.enroot(tmp_path / "enroot", "4.1.2")
    deb = next((tmp_path / "enroot" / "v4.1.2").glob("enroot_*.deb"))
    arch = deb.name.rsplit("_", 1)[1].removesuffix(".deb")
    assert pins._deb("enroot", "4.1.2-1", arch)(deb) == ("", f"enroot 4.1.2-1 {arch}")
    assert pins._deb("enroot", "4.1.1-1", arch)(deb)[0] == (
        f"is not enroot 4.1.1-1 for {arch}: its control says Version 4.1.2-1"
    )
    assert pins.deb_fields(deb)["Package"] == "enroot"


@pytest.fixture
def answering_404(tmp_path):
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "www")
    )
    (tmp_path / "www").mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_command_writes_nothing_when_a_download_fails(tmp_path, answering_404):
    path = _inventory(tmp_path, gpu="none", mirror=answering_404)
    before = {p: p.read_text() for p in path.rglob("*.yml")}
    result = run_kiln(
        "inventory",
        "pins",
        "-i",
        str(path),
        "--write",
        env={"KILN_STATE_DIR": str(tmp_path / "state")},
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"kiln: error: pyxis_sha256: {answering_404}/pyxis/v0.24.0.tar.gz: HTTP 404 File not "
        "found; nothing written\n"
    )
    assert {p: p.read_text() for p in path.rglob("*.yml")} == before


def test_the_command_writes_each_sha256_beside_its_version(tmp_path):
    mirror = tmp_path / "mirror"
    standins.enroot(mirror / "enroot", "4.1.2")
    standins.pyxis(mirror / "pyxis", "0.24.0")
    path = _inventory(tmp_path, gpu="none", mirror=mirror.as_uri())
    env = {"KILN_STATE_DIR": str(tmp_path / "state")}
    assert run_kiln("inventory", "check", "-i", str(path), env=env).returncode == 2
    result = run_kiln("inventory", "pins", "-i", str(path), "--write", "--json", env=env)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    digest = {
        name: hashlib.sha256(p.read_bytes()).hexdigest()
        for name, p in [
            ("enroot_sha256", next(mirror.rglob("enroot_*.deb"))),
            ("enroot_caps_sha256", next(mirror.rglob("enroot+caps_*.deb"))),
            ("pyxis_sha256", mirror / "pyxis" / "v0.24.0.tar.gz"),
        ]
    }
    assert {k: v["sha256"] for k, v in found["pins"].items()} == digest
    assert sorted(found["written"]) == [
        str(path / "group_vars/all/enroot.yml"),
        str(path / "group_vars/all/pyxis.yml"),
    ]
    text = (path / "group_vars/all/enroot.yml").read_text()
    assert f"\nenroot_sha256: {digest['enroot_sha256']}\n" in text
    assert run_kiln("inventory", "check", "-i", str(path), env=env).returncode == 0
    again = run_kiln("inventory", "pins", "-i", str(path), env=env)
    assert again.stdout == "every pinned release has its sha256\n"
    assert REPO.is_dir()
