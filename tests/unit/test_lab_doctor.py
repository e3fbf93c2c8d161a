"""kiln lab doctor's check of this host's kernel for autofs, which the lab's nodes share,
and the lab's mounts it decides (automounts, or mounts made at boot)."""

import os

import pytest

from kiln.errors import PrerequisiteError
from kiln.lab import cluster, doctor

# /proc/filesystems as a Debian 12 kernel writes it, with autofs loaded.
WITH_AUTOFS = "nodev\tsysfs\nnodev\ttmpfs\nnodev\tproc\n\text4\nnodev\tautofs\nnodev\tfuse\n"
# A virtual machine's kernel built without autofs (seen on one of these hosts).
WITHOUT = "nodev\tsysfs\nnodev\ttmpfs\n\text4\n\tfuseblk\nnodev\tfuse\nnodev\toverlay\n"


@pytest.fixture
def host(tmp_path, monkeypatch):
    proc = tmp_path / "filesystems"
    monkeypatch.setattr(doctor, "PROC_FILESYSTEMS", proc)
    monkeypatch.setattr(doctor, "MODULES_DIR", tmp_path / "modules")
    return proc, tmp_path / "modules" / os.uname().release


def test_autofs_in_the_kernel_passes(host):
    proc, _ = host
    proc.write_text(WITH_AUTOFS)
    assert doctor._autofs_check() == doctor.Check(
        "autofs", True, "in this host's kernel", required=False
    )
    assert doctor.automounts()


def test_autofs_as_a_module_not_loaded_says_to_load_it(host):
    proc, modules = host
    proc.write_text(WITHOUT)
    (modules / "kernel/fs/autofs").mkdir(parents=True)
    (modules / "kernel/fs/autofs/autofs4.ko.xz").write_bytes(b"")
    assert doctor._autofs_check() == doctor.Check(
        "autofs",
        False,
        "this host's kernel has not loaded autofs, which the lab's mounts need",
        "modprobe autofs4 (on this host, as root)",
        required=False,
    )
    assert doctor.automounts()


def test_a_kernel_without_autofs_makes_the_lab_mount_at_boot(host):
    proc, _ = host
    proc.write_text(WITHOUT)
    release = os.uname().release
    assert doctor._autofs_check() == doctor.Check(
        "autofs",
        False,
        f"this host's kernel ({release}) has no autofs: the lab mounts its shared storage "
        "at boot (systemd mount units, autofs_automount: false), not on access",
        "use a host whose kernel has autofs for the lab's automounts",
        required=False,
    )
    assert not doctor.automounts()


def test_the_lab_inventory_mounts_at_boot_only_where_the_host_cannot_automount(tmp_path):
    lab = cluster.plan("kiln", 2, "trixie")
    automounts = cluster.inventory_data(lab, tmp_path / "key", None)["all"]["vars"]
    at_boot = cluster.inventory_data(lab, tmp_path / "key", None, automount=False)
    assert at_boot["all"]["vars"] == {**automounts, "autofs_automount": False}
    assert "autofs_automount" not in automounts


def test_require_returns_the_gaps_the_lab_can_do_without(monkeypatch):
    warn = doctor.Check("autofs", False, "no autofs", "load it", required=False)
    fine = doctor.Check("root", True, "running as root")
    monkeypatch.setattr(doctor, "run_checks", lambda: [fine, warn])
    assert doctor.require() == [warn]
    needed = doctor.Check("podman", False, "podman is not installed", "apt-get install podman")
    monkeypatch.setattr(doctor, "run_checks", lambda: [warn, needed])
    with pytest.raises(PrerequisiteError) as refused:
        doctor.require()
    assert str(refused.value) == "podman is not installed: apt-get install podman"
