"""pyxis (from a STAND-IN source: a SPANK plugin with pyxis's name, build interface and
arguments, adding --kiln-test) built on each node against its own Slurm, wired in
through plugstack.conf and plugstack.conf.d, loaded by srun and by slurmstepd on the
compute nodes, with nothing in the daemons' logs against it."""

import re

import pytest

testinfra_hosts = [
    "podman://slurm-ctl",
    "podman://slurm-c1",
    "podman://slurm-c2",
    "podman://slurm-login",
]
VERSION = "0.24.0"
OPTIONS = "runtime_path=/run/pyxis execute_entrypoint=0 container_scope={scope} sbatch_support=1"
SCOPE = {"slurm-c2": "job"}  # pyxis's own default elsewhere


def slurm_release(host) -> str:
    """The installed Slurm's upstream release (22.05.8 from 22.05.8-4+deb12u3)."""
    return host.check_output("dpkg-query -W -f='${Version}' slurm-client").split("-")[0]


def test_the_build_is_for_the_nodes_slurm_and_pyxis_conf_names_it(host):
    name = host.backend.get_hostname()
    build = f"/usr/local/lib/pyxis/{VERSION}-slurm-{slurm_release(host)}"
    # Only the build for this Slurm: slurm-c2's for 20.11.9 (side_effect) is gone.
    assert host.check_output("ls /usr/local/lib/pyxis").split() == [build.rsplit("/", 1)[1]]
    plugin = host.file(f"{build}/slurm/spank_pyxis.so")
    assert (plugin.user, plugin.group, plugin.mode) == ("root", "root", 0o644)  # make install's
    conf = host.file("/etc/slurm/plugstack.conf.d/pyxis.conf")
    assert (conf.user, conf.mode) == ("root", 0o644)
    assert conf.content_string.splitlines() == [
        f"# Written by Kiln (role pyxis): pyxis {VERSION} built for Slurm {slurm_release(host)}.",
        f"required {build}/slurm/spank_pyxis.so " + OPTIONS.format(scope=SCOPE.get(name, "global")),
    ]
    # What pyxis's make install writes beside it (its README's way of wiring it in).
    installed = host.file("/usr/local/share/pyxis/pyxis.conf").content_string
    assert installed == f"required {build}/slurm/spank_pyxis.so\n"


def test_plugstack_conf_names_each_file_without_a_glob(host):
    # slurm-ctl's was put back to Debian's glob by side_effect.yml, and rewritten.
    assert host.file("/etc/slurm/plugstack.conf").content_string.splitlines() == [
        "# Written by Kiln (roles slurm and pyxis): each file of plugstack.conf.d by name,",
        "# since Slurm's own parser refuses a glob.",
        "include /etc/slurm/plugstack.conf.d/pyxis.conf",
    ]


def test_the_plugin_carries_the_slurm_version_it_was_built_against(host):
    """SPANK_PLUGIN stamps SLURM_VERSION_NUMBER from the headers; Slurm refuses a
    plugin whose number names another release."""
    header = host.file("/usr/include/slurm/slurm_version.h").content_string
    number = next(
        line.split()[2] for line in header.splitlines() if "define SLURM_VERSION_NUMBER" in line
    )
    major, minor, micro = (int(p) for p in slurm_release(host).split("."))
    assert int(number, 16) == (major << 16) + (minor << 8) + micro


def test_srun_offers_the_plugins_option(host):
    help_text = host.check_output("srun --help")
    assert "--kiln-test=VALUE" in help_text
    assert "STAND-IN for pyxis" in help_text


def test_slurmstepd_loads_it_on_every_compute_node_with_its_options(host):
    if host.backend.get_hostname() != "slurm-login":
        pytest.skip("submitted from the login node")
    out = host.check_output(
        "srun -N2 --ntasks-per-node=1 --kiln-test=hello "
        "sh -c 'echo \"$(hostname) $KILN_TEST $KILN_TEST_ARGS\"'"
    )
    assert sorted(out.splitlines()) == [
        f"slurm-c1 hello {OPTIONS.format(scope='global')}",
        f"slurm-c2 hello {OPTIONS.format(scope='job')}",
    ]


def test_slurmd_never_refused_a_plugin(host):
    if host.backend.get_hostname() not in ("slurm-c1", "slurm-c2"):
        pytest.skip("compute nodes only")
    log = host.check_output("journalctl -u slurmd --no-pager; cat /var/log/slurm/slurmd.log")
    assert "Incompatible plugin version" not in log


# The plugin stack's errors, as Slurm words them: a glob or include it could not read,
# a SPANK plugin it could not load or that refused its arguments (pyxis: ...).
PLUGIN_STACK = re.compile(r"glob|[Ii]nclude|plugstack|spank|pyxis")


def test_no_daemon_logged_an_error_about_the_plugin_stack(host):
    """Since each daemon last started: slurmctld (which reads plugstack.conf to serve it
    to configless nodes, where Debian's glob made it log errors) and slurmd."""
    daemon = {"slurm-ctl": "slurmctld", "slurm-c1": "slurmd", "slurm-c2": "slurmd"}.get(
        host.backend.get_hostname()
    )
    if daemon is None:
        pytest.skip("no Slurm daemon here")
    lines = host.file(f"/var/log/slurm/{daemon}.log").content_string.splitlines()
    started = max(i for i, line in enumerate(lines) if f"{daemon} version" in line)
    errors = [line for line in lines[started:] if "error:" in line and PLUGIN_STACK.search(line)]
    assert errors == []
