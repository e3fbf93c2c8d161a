"""kiln.enroot: the release packages pinned together, enroot.conf, the directories
Kiln makes, and the mounts.d entries for shared storage and NCCL's files."""

import re

import pytest

from kiln import enroot

SHA = "a" * 64
PINNED_SHA256 = (
    "enroot_version 3.5.0 needs enroot_sha256: the enroot package's sha256 (64 hex digits), "
    "pinned with the version"
)
PATH_RULE = (
    "expected an absolute path (or one from ${VARIABLE}) of letters, digits and ._/+@%:,=- "
    "with no '..', which may use "
    "$(id -u), $(id -g) and ${VARIABLE} (enroot expands it in a shell)"
)
VALUE_RULE = (
    "may hold only letters, digits, spaces and ._/+@%:,=-, and $(id -u), $(id -g) and "
    "${VARIABLE} (enroot expands it in a shell)"
)
CAPS_SHA = "b" * 64
SETTINGS = {
    "version": "3.5.0",
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


def test_packages_in_githubs_release_layout():
    found = enroot.packages("3.5.0", SHA, True, CAPS_SHA, "arm64", "https://mirror.site/enroot/")
    assert found == [
        {
            "package": "enroot",
            "version": "3.5.0-1",
            "file": "enroot_3.5.0-1_arm64.deb",
            "url": "https://mirror.site/enroot/v3.5.0/enroot_3.5.0-1_arm64.deb",
            "sha256": SHA,
            "installed": "enroot 3.5.0-1 installed",
        },
        {
            "package": "enroot+caps",
            "version": "3.5.0-1",
            "file": "enroot+caps_3.5.0-1_arm64.deb",
            "url": "https://mirror.site/enroot/v3.5.0/enroot%2Bcaps_3.5.0-1_arm64.deb",
            "sha256": CAPS_SHA,
            "installed": "enroot+caps 3.5.0-1 installed",
        },
    ]
    assert [p["package"] for p in enroot.packages("3.5.0", SHA, False, "", "amd64", "x")] == [
        "enroot"
    ]


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"version": ""}, []),  # nothing installed: nothing to pin
        ({}, []),
        (
            {"sha256": ""},
            [
                "enroot_version 3.5.0 needs enroot_sha256: the enroot package's sha256 (64 hex "
                "digits), pinned with the version"
            ],
        ),
        (
            {"caps_sha256": "short"},
            [
                "enroot_version 3.5.0 with enroot_caps needs enroot_caps_sha256: the "
                "enroot+caps package's sha256, pinned with the version"
            ],
        ),
        ({"caps": False, "caps_sha256": ""}, []),
        ({"version": "3.5"}, ["enroot_version '3.5': expected a release such as 3.5.0"]),
        ({"fetch": "ftp"}, ["enroot_fetch 'ftp': expected one of control, node"]),
        (
            {"extra_hooks": ["../x.sh"]},
            ["enroot_extra_hooks: '../x.sh' is not a hook file name (NAME.sh)"],
        ),
        (
            {"extra_hooks": ["x.sh\n"]},
            ["enroot_extra_hooks: 'x.sh\\n' is not a hook file name (NAME.sh)"],
        ),
        ({"version": "3.5.0\n"}, ["enroot_version '3.5.0\\n': expected a release such as 3.5.0"]),
        ({"sha256": SHA + "\n"}, [PINNED_SHA256]),
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
        "# Written by Kiln (role enroot).",
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


def test_the_labs_stand_in_packages_are_built_once_and_pinned(tmp_path):
    import hashlib
    import subprocess

    from kiln.lab import standins

    first = standins.lab_enroot(tmp_path / "enroot")
    assert standins.lab_enroot(tmp_path / "enroot") == first  # reused, not rebuilt
    release = tmp_path / "enroot" / "v3.5.0"
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    arch = arch.stdout.strip()
    deb = release / f"enroot_3.5.0-1_{arch}.deb"
    caps = release / f"enroot+caps_3.5.0-1_{arch}.deb"
    assert first == {
        "enroot_version": "3.5.0",
        "enroot_sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
        "enroot_caps_sha256": hashlib.sha256(caps.read_bytes()).hexdigest(),
        "enroot_base_url": (tmp_path / "enroot").as_uri(),
        "enroot_fetch": "control",
    }
    # What the role's URL names is where the package is.
    (url,) = [
        p["url"] for p in enroot.packages("3.5.0", "", False, "", arch, first["enroot_base_url"])
    ]
    assert url == deb.as_uri()
    fields = subprocess.run(["dpkg-deb", "-f", str(caps)], capture_output=True, text=True)
    assert "Depends: enroot (= 3.5.0-1)" in fields.stdout
    assert "STAND-IN" in fields.stdout
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True).stdout
    for path in ("./usr/bin/enroot", "./usr/share/enroot/hooks.d/50-slurm-pmi.sh"):
        assert path in listing
