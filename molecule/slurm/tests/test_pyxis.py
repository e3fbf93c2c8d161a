"""pyxis (from a STAND-IN source: a SPANK plugin with pyxis's name and build interface,
adding --kiln-test) built on each node against its own Slurm, wired in through
plugstack.conf.d, loaded by srun and by slurmstepd on the compute nodes."""

import pytest

testinfra_hosts = [
    "podman://slurm-ctl",
    "podman://slurm-c1",
    "podman://slurm-c2",
    "podman://slurm-login",
]
OPTIONS = "runtime_path=/run/pyxis execute_entrypoint=0 container_scope={scope} sbatch_support=1"
SCOPE = {"slurm-c2": "global"}


def slurm_release(host) -> str:
    """The installed Slurm's upstream release (22.05.8 from 22.05.8-4+deb12u3)."""
    return host.check_output("dpkg-query -W -f='${Version}' slurm-client").split("-")[0]


def test_the_build_is_for_the_nodes_slurm_and_pyxis_conf_names_it(host):
    name = host.backend.get_hostname()
    build = f"/usr/local/lib/pyxis/0.20.0-slurm-{slurm_release(host)}"
    # Only the build for this Slurm: slurm-c2's for 21.08.5 (side_effect) is gone.
    assert host.check_output("ls /usr/local/lib/pyxis").split() == [build.rsplit("/", 1)[1]]
    plugin = host.file(f"{build}/slurm/spank_pyxis.so")
    assert (plugin.user, plugin.group, plugin.mode) == ("root", "root", 0o755)
    conf = host.file("/etc/slurm/plugstack.conf.d/pyxis.conf")
    assert (conf.user, conf.mode) == ("root", 0o644)
    assert conf.content_string.splitlines() == [
        f"# Written by Kiln (role pyxis): pyxis 0.20.0 built for Slurm {slurm_release(host)}.",
        f"required {build}/slurm/spank_pyxis.so " + OPTIONS.format(scope=SCOPE.get(name, "job")),
    ]
    assert "include /etc/slurm/plugstack.conf.d/*.conf" in (
        host.file("/etc/slurm/plugstack.conf").content_string.splitlines()
    )


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
        f"slurm-c1 hello {OPTIONS.format(scope='job')}",
        f"slurm-c2 hello {OPTIONS.format(scope='global')}",
    ]


def test_slurmd_never_refused_a_plugin(host):
    if host.backend.get_hostname() not in ("slurm-c1", "slurm-c2"):
        pytest.skip("compute nodes only")
    log = host.check_output("journalctl -u slurmd --no-pager; cat /var/log/slurm/slurmd.log")
    assert "Incompatible plugin version" not in log
