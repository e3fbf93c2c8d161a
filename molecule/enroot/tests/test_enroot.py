"""The enroot role's real effects on the nodes, around STAND-IN release packages."""

import pytest

testinfra_hosts = ["podman://enroot-a", "podman://enroot-b"]

CONF = [
    "# Written by Kiln (role enroot).",
    "ENROOT_RUNTIME_PATH /var/lib/enroot/runtime/user-$(id -u)",
    "ENROOT_CACHE_PATH /var/lib/enroot/cache/group-$(id -g)",
    "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)",
    "ENROOT_TEMP_PATH /var/lib/enroot/tmp",
    "ENROOT_SQUASH_OPTIONS -comp lzo -noD",
]
NODES = {
    "enroot-a": {
        "packages": {"enroot": "3.5.0-1", "enroot+caps": "3.5.0-1"},
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
        "packages": {"enroot": "3.5.0-1"},
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
    assert host.check_output("enroot version") == "3.5.0"  # the stand-in's answer


@pytest.mark.parametrize(
    "package",
    ["squashfs-tools", "parallel", "jq", "zstd", "pigz", "squashfuse", "fuse-overlayfs"],
)
def test_runtime_dependencies_come_from_the_distribution(host, package):
    assert host.package(package).is_installed


def test_enroot_conf_is_kilns_whole(host):
    conf = host.file("/etc/enroot/enroot.conf")
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


def test_no_apparmor_profile_outside_ubuntu_24_04(host):
    assert not host.file("/etc/apparmor.d/enroot").exists
