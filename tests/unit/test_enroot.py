"""kiln.roles.enroot: the release packages pinned together, which of them a node lacks, what
apt could not install, enroot.conf, the directories Kiln makes, and the mounts.d entries
for shared storage and NCCL's files."""

import base64
import json
import re
import subprocess

import pytest

from kiln.roles import enroot
from tests import standins

SHA = "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae"
PINNED_SHA256 = (
    "enroot_version 4.1.2 needs enroot_sha256: the enroot package's sha256 (64 hex digits)"
    "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
)
HINT = "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
PATH_RULE = (
    "expected an absolute path (or one from ${VARIABLE}) of letters, digits and ._/+@%:,=- "
    "with no '..', which may use "
    "$(id -u), $(id -g) and ${VARIABLE} (enroot expands it in a shell)"
)
VALUE_RULE = (
    "may hold only letters, digits, spaces and ._/+@%:,=-, and $(id -u), $(id -g) and "
    "${VARIABLE} (enroot expands it in a shell)"
)
CAPS_SHA = "d4d48a41ae43f7883f6262a37dea95b0e866ea3397ca370d0fd1ab0936c3a996"
SETTINGS = {
    "version": "4.1.2",
    "sha256": SHA,
    "caps": True,
    "caps_sha256": CAPS_SHA,
    "fetch": "control",
    "extra_hooks": ["50-slurm-pmi.sh"],
    "extra_config": {},
    "runtime_path": "/var/lib/enroot/runtime/user-$(id -u)",
    "cache_path": "/var/lib/enroot/cache/group-$(id -g)",
    "data_path": "/var/lib/enroot/data/user-$(id -u)",
    "temp_path": "/var/lib/enroot/tmp",
    "squash_options": "-comp lzo -noD",
    "mount_home": False,
    "remap_root": False,
    "rootfs_writable": True,
}


PAIR = enroot.packages("4.1.2", SHA, True, CAPS_SHA, "amd64", "https://mirror.site/enroot/")


def test_packages_in_githubs_release_layout():
    found = enroot.packages("4.1.2", SHA, True, CAPS_SHA, "arm64", "https://mirror.site/enroot/")
    assert found == [
        {
            "package": "enroot",
            "version": "4.1.2-1",
            "file": "enroot_4.1.2-1_arm64.deb",
            "url": "https://mirror.site/enroot/v4.1.2/enroot_4.1.2-1_arm64.deb",
            "sha256": SHA,
        },
        {
            "package": "enroot+caps",
            "version": "4.1.2-1",
            "file": "enroot+caps_4.1.2-1_arm64.deb",
            "url": "https://mirror.site/enroot/v4.1.2/enroot%2Bcaps_4.1.2-1_arm64.deb",
            "sha256": CAPS_SHA,
        },
    ]
    assert [p["package"] for p in enroot.packages("4.1.2", SHA, False, "", "amd64", "x")] == [
        "enroot"
    ]


# dpkg-query's answer (in enroot.node_read_argv's output) on nodes in each state an earlier run can
# leave: installed, at another version, unpacked or half-configured by a failed
# configure, removed with its conffiles kept, or never seen (dpkg-query prints nothing).
@pytest.mark.parametrize(
    ("dpkg_output", "missing"),
    [
        ("enroot\t4.1.2-1\tinstalled\nenroot+caps\t4.1.2-1\tinstalled\n", []),
        ("enroot\t4.1.2-1\tinstalled\nenroot+caps\t4.1.1-1\tinstalled\n", ["enroot+caps"]),
        (
            "enroot\t4.1.1-1\tinstalled\nenroot+caps\t4.1.1-1\tinstalled\n",
            ["enroot", "enroot+caps"],
        ),
        ("enroot\t4.1.2-1\tunpacked\nenroot+caps\t4.1.2-1\tunpacked\n", ["enroot", "enroot+caps"]),
        ("enroot\t4.1.2-1\thalf-configured\nenroot+caps\t4.1.2-1\tinstalled\n", ["enroot"]),
        ("enroot\t4.1.2-1\tconfig-files\nenroot+caps\t4.1.2-1\tinstalled\n", ["enroot"]),
        ("enroot\t4.1.2-1\tinstalled\n", ["enroot+caps"]),
        ("", ["enroot", "enroot+caps"]),
    ],
)
def test_which_packages_a_node_lacks(dpkg_output, missing):
    assert [p["package"] for p in enroot.missing(PAIR, dpkg_output)] == missing


def test_the_roles_one_read_of_a_real_node(tmp_path):
    """This machine as a node: no enroot installed (dpkg-query finds neither package),
    no older Kiln's enroot.conf, enroot_path not made yet (the filesystem of its nearest
    parent), and the nccl_env role's record read back whole."""
    record = {"values": {"NCCL_IB_HCA": "mlx5"}, "library_dir": "/opt/nccl/lib"}
    fact = tmp_path / "kiln_nccl.fact"
    fact.write_text(json.dumps(record))
    argv = enroot.node_read_argv(True, str(tmp_path / "enroot" / "runtime"), str(fact))
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    fstype = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(tmp_path)], capture_output=True, text=True
    )
    assert enroot.node_state(done.stdout) == {
        "arch": arch.stdout.strip(),
        "fstype": fstype.stdout.strip(),
        "old_conf": False,
        "nccl": record,
        "dpkg": "",
    }
    assert enroot.missing(PAIR, enroot.node_state(done.stdout)["dpkg"]) == PAIR
    # dpkg-query failing otherwise than for a name it never saw (a locked database)
    # fails the read, rather than reading as every package missing.
    broken = [*argv[:6], "sh", "-c", "exit 2"]
    assert subprocess.run(broken, capture_output=True, text=True).returncode == 1
    # No record from nccl_env: no NCCL files to mount.
    argv = enroot.node_read_argv(False, "/", str(tmp_path / "none.fact"))
    assert enroot.node_state(subprocess.check_output(argv, text=True))["nccl"] == {}


def test_the_roles_read_of_a_node_with_enroot_and_an_older_kilns_conf():
    """What node_read_argv prints on a node an older Kiln provisioned, enroot on a tmpfs."""
    record = base64.b64encode(b'{"values": {}}').decode()
    output = (
        f"arch arm64\nfstype tmpfs\nold_conf yes\nnccl {record}\ndpkg-query:\n"
        "enroot\t4.1.2-1\tinstalled\nenroot+caps\t4.1.1-1\tinstalled\n"
    )
    assert enroot.node_state(output) == {
        "arch": "arm64",
        "fstype": "tmpfs",
        "old_conf": True,
        "nccl": {"values": {}},
        "dpkg": "enroot\t4.1.2-1\tinstalled\nenroot+caps\t4.1.1-1\tinstalled\n",
    }


def apt_output(name: str) -> str:
    return (standins.REPO / "tests" / "fixtures" / "apt" / name).read_text()


# apt's real output (tests/fixtures/apt) installing a stand-in release whose enroot
# depends on a package no source has (Debian 12 and 13), and on one more at a version
# the sources lack.
@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        (
            "unmet-bookworm.txt",
            "enroot 4.1.3-1 cannot be installed on node1: enroot depends on "
            "kiln-no-such-package, but it is not installable",
        ),
        (
            "unmet-trixie.txt",
            "enroot 4.1.3-1 cannot be installed on node1: enroot depends on "
            "kiln-no-such-package, but it is not installable",
        ),
        (
            "unmet-two-trixie.txt",
            "enroot 4.1.3-1 cannot be installed on node1: enroot depends on "
            "kiln-no-such-package, but it is not installable; enroot depends on jq (>= 99), "
            "but 1.7.1-6+deb13u4 is to be installed",
        ),
    ],
)
def test_what_apt_could_not_install_in_one_line(fixture, line):
    release = enroot.packages("4.1.3", SHA, True, CAPS_SHA, "amd64", "x")
    assert enroot.install_failure("node1", release, apt_output(fixture)) == line


def test_an_apt_failure_without_unmet_dependencies_gives_apts_error():
    output = "Reading package lists...\nE: Could not get lock /var/lib/dpkg/lock-frontend\n"
    assert enroot.install_failure("node1", PAIR, output) == (
        "enroot 4.1.2-1 cannot be installed on node1: apt: Could not get lock "
        "/var/lib/dpkg/lock-frontend"
    )


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"version": ""}, []),  # nothing installed: nothing to pin
        ({}, []),
        (
            {"sha256": ""},
            [PINNED_SHA256],
        ),
        (
            {"caps_sha256": "short"},
            [
                "enroot_caps_sha256 'short' is not a sha256 (64 hex digits, lower case)"
                "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
            ],
        ),
        ({"caps": False, "caps_sha256": ""}, []),
        ({"version": "4.1"}, ["enroot_version '4.1': expected a release such as 4.1.2"]),
        ({"fetch": "ftp"}, ["enroot_fetch 'ftp': expected one of control, node"]),
        (
            {"extra_hooks": ["../x.sh"]},
            ["enroot_extra_hooks: '../x.sh' is not a hook file name (NAME.sh)"],
        ),
        (
            {"extra_hooks": ["x.sh\n"]},
            ["enroot_extra_hooks: 'x.sh\\n' is not a hook file name (NAME.sh)"],
        ),
        ({"version": "3.5.0\n"}, ["enroot_version '3.5.0\\n': expected a release such as 4.1.2"]),
        (
            {"sha256": SHA + "\n"},
            [f"enroot_sha256 {SHA + chr(10)!r} is not a sha256 (64 hex digits, lower case){HINT}"],
        ),
        # enroot expands each value in a shell: its documented expansions only.
        ({"runtime_path": "/e/${ENROOT_RUNTIME_USER}/$(id -u)/$(id -g)"}, []),
        ({"runtime_path": "/e/$(reboot)"}, [f"enroot_runtime_path '/e/$(reboot)': {PATH_RULE}"]),
        ({"cache_path": "/e/`id`"}, [f"enroot_cache_path '/e/`id`': {PATH_RULE}"]),
        ({"data_path": "/e/$HOME"}, [f"enroot_data_path '/e/$HOME': {PATH_RULE}"]),
        (
            {"temp_path": "/e/$(id -u; reboot)"},
            [f"enroot_temp_path '/e/$(id -u; reboot)': {PATH_RULE}"],
        ),
        ({"temp_path": "/e/../etc"}, [f"enroot_temp_path '/e/../etc': {PATH_RULE}"]),
        ({"path": "/e\nENROOT_X 1"}, [f"enroot_path '/e\\nENROOT_X 1': {PATH_RULE}"]),
        (
            {"squash_options": "-comp lzo; reboot"},
            [f"enroot_squash_options '-comp lzo; reboot': {VALUE_RULE}"],
        ),
        ({"extra_config": {"ENROOT_CONFIG_PATH": "${HOME}/.config/enroot"}}, []),
        (
            {"extra_config": {"ENROOT_LOGIN_SHELL": "/bin/sh\nrm"}},
            [f"enroot_extra_config: ENROOT_LOGIN_SHELL '/bin/sh\\nrm': {VALUE_RULE}"],
        ),
        (
            {"extra_config": {"ENROOT_MAX_PROCESSORS\n": 1}},
            ["enroot_extra_config: 'ENROOT_MAX_PROCESSORS\\n' is not an ENROOT_ setting"],
        ),
    ],
)
def test_settings_problems(changes, problems):
    assert enroot.settings_problems({**SETTINGS, **changes}) == problems


def test_enroot_conf_whole():
    settings = {
        **SETTINGS,
        "extra_config": {"ENROOT_MAX_PROCESSORS": 16, "ENROOT_ALLOW_HTTP": True},
    }
    assert enroot.config(settings).splitlines() == [
        "# Written by Kiln (role enroot): read after /etc/enroot/enroot.conf.",
        "ENROOT_RUNTIME_PATH /var/lib/enroot/runtime/user-$(id -u)",
        "ENROOT_CACHE_PATH /var/lib/enroot/cache/group-$(id -g)",
        "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)",
        "ENROOT_TEMP_PATH /var/lib/enroot/tmp",
        "ENROOT_SQUASH_OPTIONS -comp lzo -noD",
        "ENROOT_MOUNT_HOME no",
        "ENROOT_REMAP_ROOT no",
        "ENROOT_ROOTFS_WRITABLE yes",
        "ENROOT_ALLOW_HTTP yes",
        "ENROOT_MAX_PROCESSORS 16",
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"MAX_PROCESSORS": 1}, "enroot_extra_config: 'MAX_PROCESSORS' is not an ENROOT_ setting"),
        (
            {"ENROOT_DATA_PATH": "/x"},
            "enroot_extra_config: ENROOT_DATA_PATH has its own variable",
        ),
        (
            {"ENROOT_LOGIN_SHELL": "/bin/sh\nrm"},
            re.escape(f"enroot_extra_config: ENROOT_LOGIN_SHELL '/bin/sh\\nrm': {VALUE_RULE}"),
        ),
    ],
)
def test_extra_config_that_cannot_be_written_is_refused(extra, message):
    with pytest.raises(enroot.EnrootError, match=f"^{message}"):
        enroot.config({**SETTINGS, "extra_config": extra})


def test_directories_kiln_makes_for_every_user():
    assert enroot.directories(SETTINGS) == [
        "/var/lib/enroot/runtime",
        "/var/lib/enroot/cache",
        "/var/lib/enroot/data",
        "/var/lib/enroot/tmp",
    ]
    per_user_dir = {**SETTINGS, "runtime_path": "/local/enroot/$(id -u)"}
    assert enroot.directories(per_user_dir)[0] == "/local/enroot"
    with pytest.raises(enroot.EnrootError, match=re.escape(f"enroot_temp_path 'tmp': {PATH_RULE}")):
        enroot.directories({**SETTINGS, "temp_path": "tmp"})
    with pytest.raises(enroot.EnrootError, match=re.escape("enroot_runtime_path '/e/$(reboot)'")):
        enroot.config({**SETTINGS, "runtime_path": "/e/$(reboot)"})


def test_shared_storage_for_the_hosts_groups_bound_into_containers():
    mounts = [
        {"name": "shared", "path": "/shared", "type": "nfs", "source": "nas:/shared"},
        {"name": "homes", "path": "/home/*", "type": "nfs", "source": "nas:/home/&"},
        {
            "name": "scratch",
            "path": "/scratch",
            "type": "nfs",
            "source": "nas:/scratch",
            "groups": ["slurm_compute"],
        },
    ]
    assert enroot.storage_mounts(mounts, ["slurm_login"]).splitlines() == [
        "/shared /shared none x-create=dir,rbind,nofail,silent",
        "/home /home none x-create=dir,rbind,nofail,silent",  # the indirect map's top
    ]
    assert len(enroot.storage_mounts(mounts, ["slurm_compute"]).splitlines()) == 3
    assert enroot.storage_mounts([], ["slurm_compute"]) == ""


def test_nccl_files_bound_read_only():
    assert enroot.nccl_mounts(["/etc/nccl.conf", "/opt/microsoft/ndv5/topo.xml"]) == (
        "/etc/nccl.conf /etc/nccl.conf none x-create=file,bind,ro,nosuid,nodev,nofail,silent\n"
        "/opt/microsoft/ndv5/topo.xml /opt/microsoft/ndv5/topo.xml none "
        "x-create=file,bind,ro,nosuid,nodev,nofail,silent\n"
    )
    assert enroot.nccl_mounts([]) == ""
    # A Google NCCL plugin's libraries (the nccl_env role's fact names the directory).
    assert enroot.nccl_mounts(["/etc/nccl.conf"], ["/usr/local/gib/lib64"]) == (
        "/etc/nccl.conf /etc/nccl.conf none x-create=file,bind,ro,nosuid,nodev,nofail,silent\n"
        "/usr/local/gib/lib64 /usr/local/gib/lib64 none "
        "x-create=dir,bind,ro,nosuid,nodev,nofail,silent\n"
    )
