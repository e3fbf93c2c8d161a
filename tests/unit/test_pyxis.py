"""kiln.roles.pyxis: the release pinned together, the Slurm release read from its headers,
the build directory keyed by both releases, pyxis.conf, and which builds are stale."""

import base64
import subprocess

import pytest
import yaml

from kiln.roles import pyxis
from tests import standins

SHA = "092c9c86c357a057ca561efd9fb3b705aa1e3b41fec3fa602e0be6ae21a8ba4a"
SETTINGS = {
    "version": "0.24.0",
    "sha256": SHA,
    "base_url": "https://github.com/NVIDIA/pyxis/archive/refs/tags",
    "fetch": "control",
    "runtime_path": "/run/pyxis",
    "execute_entrypoint": False,
    "container_scope": "global",
    "sbatch_support": True,
}
# The part of Debian 12's libslurm-dev slurm/slurm_version.h that names the release.
BOOKWORM_HEADER = """#ifndef _SLURM_VERSION_H_
#define _SLURM_VERSION_H_

#define SLURM_VERSION_NUMBER 0x160508

/*
 * Define Slurm version number.
"""


def test_a_pinned_release_has_no_problems():
    assert pyxis.settings_problems(SETTINGS) == []
    assert pyxis.settings_problems({"version": ""}) == []  # nothing asked for


def test_every_problem_is_named():
    bad = {
        **SETTINGS,
        "version": "v0.24",
        "sha256": "abc",
        "fetch": "mirror",
        "container_scope": "node",
        "runtime_path": "run/pyxis",
    }
    assert pyxis.settings_problems(bad) == [
        "pyxis_version 'v0.24': expected a release such as 0.24.0",
        "pyxis_sha256 'abc' is not a sha256 (64 hex digits, lower case)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in",
        "pyxis_fetch 'mirror': expected one of control, node",
        "pyxis_container_scope 'node': expected one of job, global",
        "pyxis_runtime_path 'run/pyxis': expected an absolute path of letters, digits and "
        ". _ + - /, with no '.' or '..' part, no '//' and no '/' at the end",
    ]


def test_source_in_githubs_tag_archive_layout():
    assert pyxis.source("0.24.0", SHA, "https://mirror.site/pyxis/") == {
        "url": "https://mirror.site/pyxis/v0.24.0.tar.gz",
        "file": "pyxis-0.24.0.tar.gz",
        "top": "pyxis-0.24.0",
        "sha256": SHA,
    }


@pytest.mark.parametrize(
    ("number", "release"),
    [("0x160508", "22.05.8"), ("0x180b05", "24.11.5"), ("0x19050a", "25.05.10")],
)
def test_slurm_release_from_its_version_number(number, release):
    header = BOOKWORM_HEADER.replace("0x160508", number)
    assert pyxis.slurm_version(header) == release


def test_a_header_without_the_number_is_refused():
    with pytest.raises(pyxis.PyxisError, match="has no SLURM_VERSION_NUMBER"):
        pyxis.slurm_version('#define SLURM_VERSION_STRING "22.05.8"\n')


def test_the_build_is_keyed_by_both_releases():
    assert pyxis.build_dir("0.24.0", "22.05.8") == "/usr/local/lib/pyxis/0.24.0-slurm-22.05.8"
    assert pyxis.plugin_path("0.24.0", "24.11.5") == (
        "/usr/local/lib/pyxis/0.24.0-slurm-24.11.5/slurm/spank_pyxis.so"
    )


def test_pyxis_conf_whole():
    assert pyxis.config(SETTINGS, "22.05.8").splitlines() == [
        "# Written by Kiln (role pyxis): pyxis 0.24.0 built for Slurm 22.05.8.",
        "required /usr/local/lib/pyxis/0.24.0-slurm-22.05.8/slurm/spank_pyxis.so "
        "runtime_path=/run/pyxis execute_entrypoint=0 container_scope=global sbatch_support=1",
    ]
    other = {**SETTINGS, "execute_entrypoint": True, "container_scope": "job"}
    other["sbatch_support"] = False
    assert pyxis.config(other, "24.11.5").splitlines()[1] == (
        "required /usr/local/lib/pyxis/0.24.0-slurm-24.11.5/slurm/spank_pyxis.so "
        "runtime_path=/run/pyxis execute_entrypoint=1 container_scope=job sbatch_support=0"
    )


def test_builds_for_another_slurm_or_pyxis_are_stale():
    installed = [
        "/usr/local/lib/pyxis/0.24.0-slurm-22.05.8",
        "/usr/local/lib/pyxis/0.24.0-slurm-24.11.5",
        "/usr/local/lib/pyxis/0.23.0-slurm-24.11.5",
    ]
    assert pyxis.stale_builds(installed, "0.24.0", "24.11.5") == [
        "/usr/local/lib/pyxis/0.23.0-slurm-24.11.5",
        "/usr/local/lib/pyxis/0.24.0-slurm-22.05.8",
    ]
    assert pyxis.stale_builds(["/elsewhere/x"], "0.24.0", "24.11.5") == []


def test_kilns_defaults_are_pyxiss_own():
    """Every option pyxis.conf sets is one of pyxis's arguments, and each role default
    is the value pyxis itself takes when the argument is left out (docs/containers.md)."""
    real = standins.facts("pyxis")["options"]
    defaults = yaml.safe_load((standins.REPO / "roles/pyxis/defaults/main.yml").read_text())
    settings = {**SETTINGS} | {
        key: defaults[f"pyxis_{key}"]
        for key in ("runtime_path", "execute_entrypoint", "container_scope", "sbatch_support")
    }
    arguments = dict(
        option.split("=", 1) for option in pyxis.config(settings, "24.11.5").split()[-4:]
    )
    assert arguments == {key: real[key] for key in arguments}


def test_the_roles_one_read_of_a_node_without_slurms_headers():
    """This machine as a node: no headers. A dry run reads on (it installed none); a real
    run stops, saying why. pyxis.conf is among plugstack.conf.d's files either way: the
    role writes it before plugstack.conf."""
    dry = subprocess.run(pyxis.node_read_argv(True), capture_output=True, text=True)
    assert (dry.returncode, dry.stderr) == (0, "")
    assert pyxis.node_state(dry.stdout) == {
        "header": "",
        "builds": [],
        "plugins": [],
        "plugstack": ["/etc/slurm/plugstack.conf.d/pyxis.conf"],
    }
    real = subprocess.run(pyxis.node_read_argv(False), capture_output=True, text=True)
    assert (real.returncode, real.stdout, real.stderr) == (
        1,
        "",
        "no /usr/include/slurm/slurm_version.h: libslurm-dev installed no headers\n",
    )


def test_the_roles_read_of_a_node_after_a_slurm_upgrade():
    """What node_read_argv prints on a node with Debian 12's headers, the build for them
    and one for an older Slurm without its plugin, and a site's own plugstack file."""
    header = base64.b64encode(BOOKWORM_HEADER.encode()).decode()
    output = (
        f"header {header}\n"
        "build /usr/local/lib/pyxis/0.24.0-slurm-20.11.9\n"
        "build /usr/local/lib/pyxis/0.24.0-slurm-22.05.8\n"
        "plugin /usr/local/lib/pyxis/0.24.0-slurm-22.05.8/slurm/spank_pyxis.so\n"
        "plugstack /etc/slurm/plugstack.conf.d/site.conf\n"
    )
    state = pyxis.node_state(output)
    assert state == {
        "header": BOOKWORM_HEADER,
        "builds": [
            "/usr/local/lib/pyxis/0.24.0-slurm-20.11.9",
            "/usr/local/lib/pyxis/0.24.0-slurm-22.05.8",
        ],
        "plugins": ["/usr/local/lib/pyxis/0.24.0-slurm-22.05.8/slurm/spank_pyxis.so"],
        "plugstack": [
            "/etc/slurm/plugstack.conf.d/pyxis.conf",
            "/etc/slurm/plugstack.conf.d/site.conf",
        ],
    }
    slurm = pyxis.slurm_version(state["header"])
    assert pyxis.plugin_path("0.24.0", slurm) in state["plugins"]
    assert pyxis.stale_builds(state["builds"], "0.24.0", slurm) == [
        "/usr/local/lib/pyxis/0.24.0-slurm-20.11.9"
    ]
