"""kiln lab doctor's check of this host's kernel for autofs, which the lab's nodes share."""

import os

import pytest

from kiln.errors import PrerequisiteError
from kiln.lab import doctor

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


def test_a_kernel_without_autofs_says_what_fails_and_the_way_round(host):
    proc, _ = host
    proc.write_text(WITHOUT)
    release = os.uname().release
    assert doctor._autofs_check() == doctor.Check(
        "autofs",
        False,
        f"this host's kernel ({release}) has no autofs: the lab's autofs mounts cannot "
        "start: `kiln provision` refuses every node they are for",
        "use a host whose kernel has autofs, or provision the lab without its mounts: "
        "kiln provision -e @FILE, FILE holding autofs_mounts: []",
        required=False,
    )


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
