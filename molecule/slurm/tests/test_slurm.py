"""A real Slurm cluster in four containers: jobs run, accounting records them, one
munge key everywhere, a login node that submits without running slurmd."""

import json
import os
import re

import pytest

testinfra_hosts = [
    "podman://slurm-ctl",
    "podman://slurm-c1",
    "podman://slurm-c2",
    "podman://slurm-login",
]
CONFIG_MODE = os.environ.get("KILN_SLURM_CONFIG_MODE", "configless")
CONFIG_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")


@pytest.fixture(scope="module")
def ctl(host):
    import testinfra

    return testinfra.get_host("podman://slurm-ctl")


def test_daemons_by_role(host):
    name = host.backend.get_hostname()
    assert host.service("munge").is_running
    if name == "slurm-ctl":
        for daemon in ("slurmctld", "slurmdbd", "mariadb"):
            assert host.service(daemon).is_running, daemon
        assert not host.package("slurmd").is_installed
    elif name == "slurm-login":
        assert host.package("slurm-client").is_installed
        for package in ("slurmd", "slurmctld", "slurmdbd"):
            assert not host.package(package).is_installed, package
    else:
        assert host.service("slurmd").is_running
        assert not host.package("slurmctld").is_installed


def test_config_files_by_mode(host, ctl):
    name = host.backend.get_hostname()
    if name == "slurm-ctl":
        pytest.skip("the controller always has the files")
    local = [host.file(f"/etc/slurm/{f}") for f in CONFIG_FILES]
    if name == "slurm-login" or CONFIG_MODE == "pushed":
        # the same bytes as the controller's: one rendering for the whole cluster
        for conf, f in zip(local, CONFIG_FILES, strict=True):
            assert conf.sha256sum == ctl.file(f"/etc/slurm/{f}").sha256sum, f
    if name == "slurm-login":
        return
    options = host.file("/etc/default/slurmd").content_string
    if CONFIG_MODE == "configless":
        # no local files: slurmd fetched them from slurmctld into its cache
        assert not any(conf.exists for conf in local)
        assert "--conf-server slurm-ctl:6817" in options
        assert "slurm.conf" in host.check_output(
            "ls /run/slurm/conf || ls /var/lib/slurm/slurmd/conf-cache"
        )
    else:
        assert "--conf-server" not in options
        assert "enable_configless" not in ctl.file("/etc/slurm/slurm.conf").content_string


def test_munge_key_is_private_and_the_same_everywhere(host, ctl):
    key = host.file("/etc/munge/munge.key")
    assert key.user == "munge"
    assert key.mode == 0o400
    assert key.sha256sum == ctl.file("/etc/munge/munge.key").sha256sum
    # a credential made on the controller decodes here
    credential = ctl.check_output("munge -n")
    assert host.run(f"echo '{credential}' | unmunge").rc == 0


def test_nodes_idle_in_the_declared_partitions(host, ctl):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("checked from the controller")
    lines = ctl.check_output("sinfo -h -N -o '%N %P %t'").splitlines()
    assert sorted(lines) == [
        "slurm-c1 batch* idle",
        "slurm-c1 debug idle",
        "slurm-c2 batch* idle",
    ]
    debug = ctl.check_output("scontrol show partition debug --oneliner")
    assert "MaxTime=00:30:00" in debug and "Hidden=YES" in debug


def test_a_job_runs_on_both_nodes_and_accounting_records_it(host, ctl):
    """Runs after side_effect.yml dropped the accounting database and provisioned again:
    the job lands in the database the role made again."""
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("run from the controller")
    out = ctl.check_output("srun -N2 --job-name=kiln-molecule hostname")
    assert sorted(out.split()) == ["slurm-c1", "slurm-c2"]
    jobs = ctl.check_output(
        "for i in $(seq 20); do sacct -X -n -P -o JobName,State,NNodes --name kiln-molecule "
        "| grep -q COMPLETED && break; sleep 1; done; "
        "sacct -X -n -P -o JobName,State,NNodes --name kiln-molecule"
    )
    assert "kiln-molecule|COMPLETED|2" in jobs.splitlines()
    assert "molecule" in ctl.check_output("sacctmgr -n -P list cluster format=cluster")


def test_secrets_are_private(host):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("the database password lives on the dbd host")
    conf = host.file("/etc/slurm/slurmdbd.conf")
    assert conf.mode == 0o600
    assert conf.user == "slurm"


def test_the_login_node_submits_jobs(host):
    if host.backend.get_hostname() != "slurm-login":
        pytest.skip("login node only")
    assert "slurm-c[1-2]" in host.check_output("sinfo -h -p batch -o %N")
    out = host.check_output("srun -N2 --job-name=kiln-login hostname")
    assert sorted(out.split()) == ["slurm-c1", "slurm-c2"]
    # not a Slurm node itself
    assert "slurm-login" not in host.check_output("sinfo -h -N -o %N")


def test_detected_shape_matches_slurmd(host, ctl):
    name = host.backend.get_hostname()
    if name in ("slurm-ctl", "slurm-login"):
        pytest.skip("compute nodes only")
    words = host.check_output("slurmd -C").splitlines()[0].split()
    detected = {k: int(v) for k, v in (w.split("=", 1) for w in words[1:6])}
    node = dict(
        w.split("=", 1)
        for w in ctl.check_output(f"scontrol show node {name} --oneliner").split()
        if "=" in w
    )
    # What slurm.conf declares for the node is what slurmd finds on it, field by field.
    assert {
        "CPUs": int(node["CPUTot"]),
        "Boards": int(node["Boards"]),
        "SocketsPerBoard": int(node["Sockets"]) // int(node["Boards"]),
        "CoresPerSocket": int(node["CoresPerSocket"]),
        "ThreadsPerCore": int(node["ThreadsPerCore"]),
    } == detected


def test_the_gpu_the_driver_role_recorded_is_declared_and_given_to_jobs(host, ctl):
    """slurm-c2 carries the nvidia_driver role's fact (one GPU) and /dev/nvidia0."""
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("checked from the controller")
    # gres.conf follows the build's detection plugin: Debian 13's Slurm 24.11 has
    # gpu_nvidia.so (AutoDetect=nvidia, never nvml), Ubuntu 24.04's 23.11 none (files).
    plugins = set(ctl.check_output("find /usr/lib -name 'gpu_nv*.so' -printf '%f\\n'").split())
    if "gpu_nvml.so" in plugins:
        line = "NodeName=slurm-c2 AutoDetect=nvml"
    elif "gpu_nvidia.so" in plugins:
        line = "NodeName=slurm-c2 AutoDetect=nvidia"
    else:
        line = "NodeName=slurm-c2 Name=gpu File=/dev/nvidia0"
    assert ctl.file("/etc/slurm/gres.conf").content_string == (
        f"# Managed by Kiln (slurm role).\n{line}\n"
    )
    # Detected (Slurm's fake_gpus.conf stands in for the driver), so with its socket.
    assert sorted(ctl.check_output("sinfo -h -N -p batch -o '%N %G'").splitlines()) == [
        "slurm-c1 (null)",
        "slurm-c2 gpu:1(S:0)",
    ]
    visible = ctl.check_output("srun -p batch --gres=gpu:1 printenv CUDA_VISIBLE_DEVICES")
    assert visible.strip() == "0"
    assert ctl.run("srun -p batch -w slurm-c1 --gres=gpu:1 true").rc != 0


def test_slurm_uses_the_topology_from_the_labels(host, ctl):
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("checked from the controller")
    conf = ctl.file("/etc/slurm/topology.conf").content_string
    assert conf.startswith("# Generated by Kiln from inventory labels")
    assert "TopologyPlugin=topology/tree" in ctl.file("/etc/slurm/slurm.conf").content_string
    shown = {
        line.split()[0]: line
        for line in ctl.check_output("scontrol show topology").splitlines()
        if line.startswith("SwitchName=")
    }
    assert set(shown) == {"SwitchName=leaf1", "SwitchName=leaf2", "SwitchName=spine1"}
    assert "Nodes=slurm-c1" in shown["SwitchName=leaf1"]
    assert "Nodes=slurm-c2" in shown["SwitchName=leaf2"]
    assert "Switches=leaf[1-2]" in shown["SwitchName=spine1"]


def pmix_listed(ctl) -> bool:
    """Whether this Slurm has a PMIx plugin: Ubuntu 22.04's 21.08 is built without one."""
    return "pmix" in ctl.check_output("srun --mpi=list 2>&1").split()


def codename(host) -> str:
    return host.check_output(". /etc/os-release && echo $VERSION_CODENAME")


def test_job_steps_start_through_pmix(host, ctl):
    """MpiDefault=pmix: a two-task step gets PMIx ranks 0 and 1, one per node, with no
    --mpi flag (Slurm's plugin found the PMIx library the role installed). Where this
    Slurm has no PMIx plugin (only Ubuntu 22.04's), MpiDefault=none and steps start."""
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("run from the controller")
    config = ctl.check_output("scontrol show config")
    if not pmix_listed(ctl):
        assert codename(ctl) == "jammy"
        assert re.search(r"^MpiDefault\s+= none$", config, re.M)
        out = ctl.check_output("srun -N2 -n2 sh -c 'echo $SLURM_PROCID $(hostname)'")
        assert sorted(out.splitlines()) == ["0 slurm-c1", "1 slurm-c2"]
        return
    assert re.search(r"^MpiDefault\s+= pmix$", config, re.M)
    out = ctl.check_output("srun -N2 -n2 sh -c 'echo $PMIX_RANK $(hostname)'")
    assert sorted(out.splitlines()) == ["0 slurm-c1", "1 slurm-c2"]


def test_open_mpi_programs_run_across_nodes_under_srun(host, ctl):
    """Kiln's MPI check, built by the mpi role with the distribution's mpicc, started by
    srun alone (MpiDefault=pmix): four ranks, two on each node, and a ping-pong between
    the nodes. Without PMIx (Ubuntu 22.04) srun cannot start Open MPI's ranks: mpirun
    inside a batch job starts them (its daemons through srun)."""
    if host.backend.get_hostname() != "slurm-ctl":
        pytest.skip("run from the controller")
    if pmix_listed(ctl):
        out = ctl.check_output("srun -N2 -n4 /usr/local/libexec/kiln/kiln-mpi-check")
    else:
        import testinfra

        job = ctl.check_output(
            "sbatch --parsable --wait -N2 --ntasks-per-node=2 -o /tmp/kiln-mpi-%j.out"
            " --wrap 'mpirun --allow-run-as-root /usr/local/libexec/kiln/kiln-mpi-check'"
        )
        # The batch script ran on the job's first node, and wrote its output there.
        c1 = testinfra.get_host("podman://slurm-c1")
        out = c1.file(f"/tmp/kiln-mpi-{job}.out").content_string
    [line] = [line for line in out.splitlines() if line.startswith("{")]
    report = json.loads(line)
    assert report["ranks"] == 4
    assert report["hosts"] == ["slurm-c1", "slurm-c1", "slurm-c2", "slurm-c2"]
    [pair] = report["pairs"]
    assert (pair["node"], pair["peer"]) == ("slurm-c1", "slurm-c2")
    assert pair["latency_us"] > 0 and pair["bandwidth_gbps"] > 0


# A second MPI module of the family, outside Kiln's path, to load over mpi/openmpi
# (Ubuntu 22.04's Tcl Modules has no `family` command: conflict alone there).
OTHER_MPI = "#%Module1.0\n{family}conflict mpi\nsetenv MPI_HOME /opt/other-mpi\n"


def test_mpi_modules_load_and_conflict(host):
    """Lmod on the compute nodes swaps one MPI module for another; Tcl Modules on the
    login node refuses the second until the first is unloaded."""
    name = host.backend.get_hostname()
    if name == "slurm-ctl":
        pytest.skip("no MPI on the controller")
    # %b: the escapes are the argument's, and its '%' no directive.
    family = "" if name == "slurm-login" and codename(host) == "jammy" else "family mpi\n"
    other = OTHER_MPI.format(family=family)
    host.run_test(f"mkdir -p /tmp/other/mpi && printf %b '{other}' > /tmp/other/mpi/other")
    # A login shell, as a user's: /etc/profile.d sets up `module` and its search path.
    loaded = host.run("bash -lc 'module load mpi && echo $MPI_HOME'")
    assert loaded.rc == 0 and loaded.stdout.strip() == "/usr/lib/x86_64-linux-gnu/openmpi"
    second = host.run(
        "bash -lc 'module use /tmp/other; module load mpi/openmpi; module load mpi/other;"
        " echo rc=$? $MPI_HOME'"
    )
    if name == "slurm-login":
        assert "rc=1 /usr/lib/x86_64-linux-gnu/openmpi" in second.stdout
        assert "conflict" in second.stderr
    else:
        assert "rc=0 /opt/other-mpi" in second.stdout
        assert "mpi/openmpi => mpi/other" in second.stderr


def test_kiln_module_files_and_search_path(host):
    name = host.backend.get_hostname()
    if name == "slurm-ctl":
        pytest.skip("no MPI on the controller")
    system = "environment-modules" if name == "slurm-login" else "lmod"
    search = f"/etc/{system}/modulespath"
    assert "/opt/kiln/modulefiles" in host.file(search).content_string.splitlines()
    found = host.check_output("ls -A /opt/kiln/modulefiles/mpi").split()
    # slurm-c1 got a site module and a retired Kiln module in the side effect: provisioning
    # again removed only Kiln's.
    expected = [".modulerc", "openmpi"] + (["site-mpi"] if name == "slurm-c1" else [])
    assert sorted(found) == expected
    module = host.file("/opt/kiln/modulefiles/mpi/openmpi")
    assert module.mode == 0o644 and module.user == "root"
    # Ubuntu 22.04's Modules (the login node's) has no family command: conflict alone.
    lines = module.content_string.splitlines()
    assert ("family mpi" in lines) == (system == "lmod" or codename(host) != "jammy")
    assert "conflict mpi" in lines
