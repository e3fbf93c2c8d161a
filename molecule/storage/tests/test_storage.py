"""A GlusterFS volume served from one container and automounted on two others: shared
data, autofs healing after an unmount, and a health check that does not hang. Where this
host's kernel has no autofs, the scenario mounts at boot (molecule.yml): the same data,
systemd's units, and the start Kiln's repair makes healing an unmount."""

import time

import pytest

testinfra_hosts = ["podman://st-c1", "podman://st-c2"]


@pytest.fixture(scope="module")
def server():
    import testinfra

    return testinfra.get_host("podman://st-server")


def automounts(host) -> bool:
    """As molecule.yml decides: the containers share this host's kernel."""
    return "autofs" in host.file("/proc/filesystems").content_string.split()


# What Kiln's repair runs for a failing mount (kiln_node.repair_classes).
RESTART_MOUNTS = (
    "! systemctl is-enabled --quiet autofs 2>/dev/null || systemctl restart autofs;"
    " systemctl start local-fs.target remote-fs.target"
)


def fstype(host, path: str) -> str:
    """The type mounted at path after touching it (autofs mounts on access)."""
    host.run(f"ls {path}")
    return host.check_output(f"findmnt -n -o FSTYPE --target {path} | tail -1")


def test_server_serves_the_volume(server):
    assert server.service("glusterd").is_running
    info = server.check_output("gluster volume info shared")
    assert "Status: Started" in info
    assert "st-server:/srv/gluster/shared/brick" in info
    # the server is not a client of its own volume here (groups: [clients])
    assert not server.file("/etc/auto.kiln-shared").exists
    assert not server.file("/etc/systemd/system/shared.mount").exists


def test_maps_and_autofs(host):
    if not automounts(host):
        pytest.skip("this host's kernel has no autofs: the mounts are units (next test)")
    assert host.service("autofs").is_running
    assert host.service("autofs").is_enabled
    master = host.file("/etc/auto.master.d/kiln-shared.autofs").content_string
    assert "/- /etc/auto.kiln-shared --timeout=3600" in master
    entry = host.file("/etc/auto.kiln-shared").content_string
    assert "/shared -fstype=glusterfs,noatime st-server:/shared" in entry
    assert (
        "/scratch -fstype=bind :/srv/scratch" in host.file("/etc/auto.kiln-scratch").content_string
    )


def test_mount_units_where_the_kernel_has_no_autofs(host):
    if automounts(host):
        pytest.skip("this host's kernel has autofs: the mounts are automounts")
    assert host.file("/etc/systemd/system/shared.mount").content_string == (
        "# Managed by Kiln (autofs role): changes are overwritten.\n"
        "[Unit]\nDescription=Kiln's mount shared\n\n"
        "[Mount]\nWhat=st-server:/shared\nWhere=/shared\nType=glusterfs\n"
        "Options=noatime,_netdev\n\n[Install]\nWantedBy=remote-fs.target\n"
    )
    assert host.file("/etc/systemd/system/scratch.mount").content_string == (
        "# Managed by Kiln (autofs role): changes are overwritten.\n"
        "[Unit]\nDescription=Kiln's mount scratch\n\n"
        "[Mount]\nWhat=/srv/scratch\nWhere=/scratch\nOptions=bind\n\n"
        "[Install]\nWantedBy=local-fs.target\n"
    )
    for unit in ("shared.mount", "scratch.mount"):
        assert host.check_output(f"systemctl is-active {unit}") == "active"
        assert host.check_output(f"systemctl is-enabled {unit}") == "enabled"
    assert not host.package("autofs").is_installed
    assert not host.file("/etc/auto.kiln-shared").exists


def test_a_file_written_on_one_client_is_read_on_the_other(host):
    import testinfra

    name = host.backend.get_hostname()
    host.check_output(f"echo 'from {name}' > /shared/hello-{name}")
    other = "st-c2" if name == "st-c1" else "st-c1"
    peer = testinfra.get_host(f"podman://{other}")
    assert peer.check_output(f"cat /shared/hello-{name}") == f"from {name}"
    assert fstype(host, "/shared") == "fuse.glusterfs"


def test_an_unmount_heals_on_the_next_access(host):
    if not automounts(host):
        pytest.skip("a mount made at boot heals when its unit starts (next test)")
    assert fstype(host, "/shared") == "fuse.glusterfs"
    host.check_output("umount -l /shared")
    assert fstype(host, "/shared") == "fuse.glusterfs"
    assert host.run("ls /shared").rc == 0


def test_the_repair_step_brings_the_mounts_back(host):
    if not automounts(host):
        host.check_output("umount -l /shared; umount -l /scratch")
        assert host.run("findmnt --mountpoint /shared").rc == 1
    host.check_output(f"sh -c '{RESTART_MOUNTS}'")
    assert fstype(host, "/shared") == "fuse.glusterfs"
    assert fstype(host, "/scratch") != "autofs"
    assert host.run("findmnt --mountpoint /scratch").rc == 0


def test_health_check_is_ok_on_healthy_mounts(host):
    out = host.run("/usr/local/sbin/kiln-mount-check")
    assert out.rc == 0, out.stdout
    assert "OK shared /shared: fuse.glusterfs st-server:/shared" in out.stdout
    assert "OK scratch /scratch" in out.stdout


def test_health_check_reports_a_hung_server_in_time(host, server):
    if host.backend.get_hostname() != "st-c1":
        pytest.skip("once is enough")
    # A stopped (not dead) brick: clients wait on it, as on a hung file server.
    server.check_output("pkill -STOP glusterfsd")
    try:
        started = time.monotonic()
        out = host.run("/usr/local/sbin/kiln-mount-check --timeout 3 shared")
        elapsed = time.monotonic() - started
    finally:
        server.check_output("pkill -CONT glusterfsd")
    assert out.rc == 1
    assert out.stdout.startswith(
        "FAIL shared /shared: no answer within 3s (hung) (server st-server)"
    )
    assert elapsed < 15
