"""The enroot role's real effects on the nodes, around STAND-IN release packages (the
real ones' fields, conffiles and files: tests/standins.py), after side_effect.yml took
the pin down to 4.1.1 and back up to 4.1.2."""

import pytest

testinfra_hosts = ["podman://enroot-a", "podman://enroot-b"]

CONF = [
    "# Written by Kiln (role enroot): read after /etc/enroot/enroot.conf.",
    "ENROOT_RUNTIME_PATH /var/lib/enroot/runtime/user-$(id -u)",
    "ENROOT_CACHE_PATH /var/lib/enroot/cache/group-$(id -g)",
    "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)",
    "ENROOT_TEMP_PATH /var/lib/enroot/tmp",
    "ENROOT_SQUASH_OPTIONS -comp lzo -noD",
]
NODES = {
    "enroot-a": {
        "packages": {"enroot": "4.1.2-1", "enroot+caps": "4.1.2-1"},
        "conf": [
            *CONF,
            "ENROOT_MOUNT_HOME no",
            "ENROOT_REMAP_ROOT no",
            "ENROOT_ROOTFS_WRITABLE yes",
            "ENROOT_MAX_PROCESSORS 16",
        ],
        "storage": [
            "/shared /shared none x-create=dir,rbind,nofail,silent",
            "/scratch /scratch none x-create=dir,rbind,nofail,silent",
        ],
        "nccl": [
            "/etc/nccl.conf /etc/nccl.conf none x-create=file,bind,ro,nosuid,nodev,nofail,silent",
            "/etc/nccl/topo.xml /etc/nccl/topo.xml none "
            "x-create=file,bind,ro,nosuid,nodev,nofail,silent",
        ],
        "credentials": None,
    },
    "enroot-b": {
        "packages": {"enroot": "4.1.2-1"},
        "conf": [
            *CONF,
            "ENROOT_MOUNT_HOME yes",
            "ENROOT_REMAP_ROOT no",
            "ENROOT_ROOTFS_WRITABLE yes",
        ],
        # /scratch is declared for slurm_compute only; the login node has no NCCL file
        "storage": ["/shared /shared none x-create=dir,rbind,nofail,silent"],
        "nccl": None,
        "credentials": "machine registry.example login robot password s3cret-token\n",
    },
}


def node(host) -> dict:
    return NODES[host.backend.get_hostname()]


def test_the_pinned_packages_are_installed(host):
    wanted = node(host)["packages"]
    for name in ("enroot", "enroot+caps"):
        package = host.package(name)
        if name in wanted:
            assert package.is_installed and package.version == wanted[name]
        else:
            assert not package.is_installed
    assert host.check_output("enroot version") == "4.1.2"  # the stand-in's answer


def test_what_the_packages_depend_on_is_installed(host):
    # apt finds nothing unmet or half-installed; bsdmainutils is the dependency the
    # role's own list once lacked. The extras: enroot_extra_packages.
    assert host.run("apt-get check").rc == 0
    assert host.check_output("dpkg --audit") == ""
    for package in ("bsdmainutils", "pigz", "squashfuse", "fuse-overlayfs"):
        assert host.package(package).is_installed, package


def test_every_packaged_file_is_as_shipped(host):
    # Its conffiles too (enroot.conf, the hooks, mounts, the AppArmor profile side_effect
    # wrote over on enroot-a): dpkg finds them as the package left them, and nothing
    # that dpkg leaves when it has to choose between two versions of one.
    assert host.run("dpkg --verify enroot").stdout == ""
    packaged = host.file("/etc/enroot/enroot.conf").content_string
    assert packaged.splitlines()[0].endswith("/etc/enroot/enroot.conf of enroot 4.1.2.")
    left = host.check_output("find /etc/enroot /etc/apparmor.d -name '*.dpkg-*'")
    assert left == ""


def test_the_helpers_have_their_capabilities_with_enroot_caps(host):
    found = host.check_output("getcap /usr/bin/enroot-mksquashovlfs /usr/bin/enroot-aufs2ovlfs")
    if "enroot+caps" in node(host)["packages"]:
        assert found.splitlines() == [
            "/usr/bin/enroot-mksquashovlfs cap_sys_admin=ep",
            "/usr/bin/enroot-aufs2ovlfs cap_sys_admin,cap_mknod=ep",
        ]
    else:
        assert found == ""


def test_kilns_settings_are_a_drop_in_whole(host):
    conf = host.file("/etc/enroot/enroot.conf.d/50-kiln.conf")
    assert (conf.user, conf.group, conf.mode) == ("root", "root", 0o644)
    assert conf.content_string.splitlines() == node(host)["conf"]


@pytest.mark.parametrize("sub", ["runtime", "cache", "data", "tmp"])
def test_image_directories_on_local_disk_open_to_every_user(host, sub):
    directory = host.file(f"/var/lib/enroot/{sub}")
    assert directory.is_directory
    assert (directory.user, directory.group, directory.mode) == ("root", "root", 0o1777)
    assert host.check_output(f"findmnt -n -o FSTYPE --target /var/lib/enroot/{sub}") != "tmpfs"


def test_mounts_bring_shared_storage_and_nccl_files_into_containers(host):
    for name, key in (("50-kiln-storage.fstab", "storage"), ("50-kiln-nccl.fstab", "nccl")):
        found = host.file(f"/etc/enroot/mounts.d/{name}")
        if node(host)[key] is None:
            assert not found.exists
        else:
            assert (found.user, found.mode) == ("root", 0o644)
            assert found.content_string.splitlines() == node(host)[key]
    # The package's own entries stay.
    assert host.file("/etc/enroot/mounts.d/10-system.fstab").exists
    assert host.file("/etc/enroot/mounts.d/20-config.fstab").exists


def test_slurm_hooks_are_enabled_and_the_others_not(host):
    for hook in ("50-slurm-pmi.sh", "50-slurm-pytorch.sh"):
        link = host.file(f"/etc/enroot/hooks.d/{hook}")
        assert link.is_symlink and link.linked_to == f"/usr/share/enroot/hooks.d/{hook}"
    for hook in ("50-sharp.sh", "50-mig-config.sh"):
        assert not host.file(f"/etc/enroot/hooks.d/{hook}").exists
    assert host.file("/etc/enroot/hooks.d/10-cgroups.sh").exists


def test_registry_credentials_are_roots_alone(host):
    wanted = node(host)["credentials"]
    found = host.file("/root/.config/enroot/.credentials")
    if wanted is None:
        assert not found.exists
        return
    assert (found.user, found.group, found.mode) == ("root", "root", 0o600)
    assert host.file("/root/.config/enroot").mode == 0o700
    assert found.content_string == wanted
