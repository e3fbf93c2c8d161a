"""kiln.roles.autofs: autofs maps for every filesystem type, on the rendered text."""

import pytest

from kiln.roles import autofs

HEADER = "# Managed by Kiln (autofs role): changes are overwritten.\n"


def render(**mount) -> str:
    item = {"name": "data", "path": "/data", **mount}
    (parsed,) = autofs.parse([item])
    return autofs.map_line(parsed, kernel="6.1.0-18-amd64")


@pytest.mark.parametrize(
    ("mount", "line"),
    [
        (
            {"type": "nfs", "source": "vast1:/ml"},
            "/data -fstype=nfs,vers=4.1,hard,proto=tcp,timeo=600,retrans=2,rsize=1048576,"
            "wsize=1048576,noatime,nconnect=8 vast1:/ml",
        ),
        (
            {"type": "nfs4", "source": "nas:/export", "options": ["vers=4.2", "nconnect=16"]},
            "/data -fstype=nfs4,hard,proto=tcp,timeo=600,retrans=2,rsize=1048576,wsize=1048576,"
            "noatime,vers=4.2,nconnect=16 nas:/export",
        ),
        (
            {"type": "lustre", "source": "10.0.0.1@o2ib:/lfs"},
            "/data -fstype=lustre,flock,noatime :10.0.0.1@o2ib:/lfs",
        ),
        (
            {"type": "glusterfs", "source": "storage1:/shared"},
            "/data -fstype=glusterfs,noatime storage1:/shared",
        ),
        (
            {"type": "wekafs", "source": "weka01/fs01", "options": ["net=udp", "num_cores=1"]},
            "/data -fstype=wekafs,noatime,net=udp,num_cores=1 weka01/fs01",
        ),
        ({"type": "bind", "source": "/local/nvme"}, "/data -fstype=bind :/local/nvme"),
        (
            {
                "type": "generic",
                "fstype": "fuse.sshfs",
                "source": "#sshfs\\#backup\\:/dir",
                "options": "allow_other,reconnect",
                "default_options": False,
            },
            "/data -fstype=fuse.sshfs,allow_other,reconnect #sshfs\\#backup\\:/dir",
        ),
    ],
    ids=["nfs", "nfs4-own-options", "lustre", "glusterfs", "wekafs", "bind", "generic"],
)
def test_map_line_for_every_type(mount, line):
    assert render(**mount) == line


def test_no_nconnect_on_old_kernels():
    (mount,) = autofs.parse([{"name": "a", "path": "/a", "type": "nfs", "source": "s:/e"}])
    assert "nconnect" not in autofs.map_line(mount, kernel="4.19.0-26-amd64")
    assert "nconnect=8" in autofs.map_line(mount, kernel="5.3.0")


def test_direct_and_indirect_maps():
    mounts = autofs.parse(
        [
            {"name": "shared", "path": "/shared", "type": "glusterfs", "source": "st1:/shared"},
            {
                "name": "home",
                "path": "/home/*",
                "type": "nfs4",
                "source": "nas:/home",
                "timeout": 0,
                "default_options": False,
            },
        ]
    )
    files = autofs.files(mounts)
    assert files == {
        "/etc/auto.master.d/kiln-shared.autofs": HEADER
        + "/- /etc/auto.kiln-shared --timeout=3600\n",
        "/etc/auto.kiln-shared": HEADER + "/shared -fstype=glusterfs,noatime st1:/shared\n",
        "/etc/auto.master.d/kiln-home.autofs": HEADER + "/home /etc/auto.kiln-home --timeout=0\n",
        "/etc/auto.kiln-home": HEADER + "* -fstype=nfs4 nas:/home/&\n",
    }


def test_mounts_go_to_the_hosts_of_their_groups():
    mounts = autofs.parse(
        [
            {"name": "a", "path": "/a", "type": "bind", "source": "/x"},
            {"name": "b", "path": "/b", "type": "bind", "source": "/y", "groups": ["slurm_login"]},
        ],
        {"slurm_login": ["login1"], "slurm_compute": ["gpu001"]},
    )
    assert [m.name for m in autofs.for_host(mounts, ["slurm_compute"])] == ["a"]
    assert [m.name for m in autofs.for_host(mounts, ["slurm_login"])] == ["a", "b"]


def test_health_check_list_names_the_server():
    (mount,) = autofs.parse(
        [{"name": "w", "path": "/w", "type": "nfs", "source": "vast-vip:/w", "required": False}]
    )
    assert autofs.check_list([mount]) == [
        {
            "name": "w",
            "path": "/w",
            "indirect": False,
            "fstype": "nfs",
            "source": "vast-vip:/w",
            "server": "vast-vip",
            "required": False,
            "unit": "",
        }
    ]


def test_mounts_made_at_boot_are_systemd_mount_units():
    declared = [
        {"name": "home", "path": "/home/shared", "type": "nfs", "source": "nas:/home"},
        {"name": "ckpt", "path": "/srv/ckpt-a", "type": "bind", "source": "/data/c%1",
         "automount": False},
        {"name": "lus", "path": "/lustre", "type": "lustre", "source": "10.0.0.1@o2ib:/fs",
         "automount": True},
    ]  # fmt: skip
    plan = autofs.host_plan(declared, [], "6.1.0-18-amd64", automount=False)
    assert plan["files"] == {
        "/etc/systemd/system/home-shared.mount": (
            "# Managed by Kiln (autofs role): changes are overwritten.\n"
            "[Unit]\nDescription=Kiln's mount home\n\n"
            "[Mount]\nWhat=nas:/home\nWhere=/home/shared\nType=nfs\n"
            f"Options={','.join(autofs.role_default_options()['nfs'])},nconnect=8,_netdev\n\n"
            "[Install]\nWantedBy=remote-fs.target\n"
        ),
        "/etc/systemd/system/srv-ckpt\\x2da.mount": (
            "# Managed by Kiln (autofs role): changes are overwritten.\n"
            "[Unit]\nDescription=Kiln's mount ckpt\n\n"
            "[Mount]\nWhat=/data/c%%1\nWhere=/srv/ckpt-a\nOptions=bind\n\n"
            "[Install]\nWantedBy=local-fs.target\n"
        ),
        "/etc/auto.master.d/kiln-lus.autofs": (
            "# Managed by Kiln (autofs role): changes are overwritten.\n"
            "/- /etc/auto.kiln-lus --timeout=3600\n"
        ),
        "/etc/auto.kiln-lus": (
            "# Managed by Kiln (autofs role): changes are overwritten.\n"
            "/lustre -fstype=lustre,flock,noatime :10.0.0.1@o2ib:/fs\n"
        ),
    }
    assert (plan["autofs"], plan["units"]) == (True, ["home-shared.mount", "srv-ckpt\\x2da.mount"])
    assert [check["unit"] for check in plan["checks"]] == [
        "home-shared.mount",
        "srv-ckpt\\x2da.mount",
        "",
    ]


@pytest.mark.parametrize(
    ("path", "unit"),
    [("/shared", "shared.mount"), ("/a//b/", "a-b.mount"), ("/.x/y.z", "\\x2ex-y.z.mount"),
     ("/mnt/é:_", "mnt-\\xc3\\xa9:_.mount")],
)  # fmt: skip
def test_unit_names_are_systemd_escape_s(path, unit):
    assert autofs.unit_name(path) == unit


@pytest.mark.parametrize(
    ("mounts", "message"),
    [
        (
            [{"name": "a", "path": "/a", "type": "zfs", "source": "x"}],
            "mount a: unknown type 'zfs';"
            " expected one of nfs, nfs4, lustre, glusterfs, wekafs, bind, generic",
        ),
        (
            [{"name": "a", "path": "/a", "type": "bind", "source": "x"}],
            "mount a: a bind mount's source must be an absolute path, got 'x'",
        ),
        (
            [{"name": "a", "path": "/a", "type": "generic", "source": "x"}],
            "mount a: type generic needs fstype (passed to autofs as -fstype)",
        ),
        (
            [{"name": "A b", "path": "/a", "type": "bind", "source": "/x"}],
            "autofs_mounts[0]: name 'A b' must be lower-case letters, digits, - or _ (it names "
            "files)",
        ),
        (
            [{"name": "a", "path": "/a", "type": "bind", "source": "/x", "automount": "no"}],
            "mount a: automount must be true or false, got 'no'",
        ),
        (
            [{"name": "a", "path": "/a/*", "type": "nfs", "source": "n:/a", "automount": False}],
            "mount a: /a/* is an indirect map, which only autofs serves: automount false needs"
            " one mount point",
        ),
    ],
    ids=["type", "bind-relative-source", "generic-fstype", "name", "automount", "indirect"],
)
def test_bad_declarations(mounts, message):
    """The rest (same mount point, relative path, unknown group) run through the CLI."""
    with pytest.raises(autofs.StorageError) as caught:
        autofs.parse(mounts, {"slurm_compute": ["gpu001"]})
    assert str(caught.value) == message


def test_the_documented_default_options_are_the_roles():
    """docs/storage.md's table shows autofs_default_options, the one place they live."""
    from tests.conftest import REPO

    rows = {}
    for line in (REPO / "docs" / "storage.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        kind = cells[0].split("`")[1] if cells[0].startswith("`") else ""
        if len(cells) == 4 and kind in autofs.TYPES:
            rows[kind] = cells[2].split("`")[1] if "`" in cells[2] else ""
    defaults = autofs.role_default_options()
    for kind, options in defaults.items():
        assert rows[kind] == ",".join(options), kind
    assert set(rows) - set(defaults) == {"bind", "generic"}  # types with no defaults
