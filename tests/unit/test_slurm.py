"""kiln.roles.slurm: the config model on the rendered text."""

import pytest

from kiln.roles import slurm
from kiln.roles.slurm import NodeShape, SlurmConfigError

SHAPE = NodeShape(
    cpus=128,
    sockets_per_board=2,
    cores_per_socket=32,
    threads_per_core=2,
    real_memory=2000000,
    gpus=8,
)


def test_overrides_win_and_null_or_omit_removes():
    merged = slurm.merge(
        {"A": 1, "B": 2, "C": 3}, {"B": 20, "C": None, "D": "__omit_place_holder__abc123"}
    )
    assert merged == {"A": 1, "B": 20}


def test_settings_lines_are_sorted_with_repeats_and_booleans():
    lines = slurm.settings_lines(
        {"SlurmctldHost": ["ctl1", "ctl2"], "ClusterName": "c", "X": True, "T": ["a", "b"]},
        (24, 11),
    )
    assert lines == ["ClusterName=c", "SlurmctldHost=ctl1", "SlurmctldHost=ctl2", "T=a,b", "X=YES"]


def test_keys_a_version_lacks_are_left_out():
    settings = {"CgroupPlugin": "autodetect", "CgroupAutomount": True, "ConstrainCores": True}
    assert slurm.settings_lines(settings, (22, 5)) == [
        "CgroupAutomount=YES",
        "CgroupPlugin=autodetect",
        "ConstrainCores=YES",
    ]
    assert slurm.settings_lines(settings, (24, 11)) == [
        "CgroupPlugin=autodetect",
        "ConstrainCores=YES",
    ]
    assert slurm.settings_lines(settings, (21, 8)) == ["CgroupAutomount=YES", "ConstrainCores=YES"]


def test_parse_version():
    assert slurm.parse_version("slurm-wlm 24.11.5") == (24, 11)
    assert slurm.parse_version("slurm 22.05.8-4+deb12u3") == (22, 5)
    with pytest.raises(SlurmConfigError):
        slurm.parse_version("nothing")


def test_slurmd_c_and_shapes():
    out = (
        "NodeName=gpu001 CPUs=128 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 "
        "ThreadsPerCore=2 RealMemory=2063937\nUpTime=12-01:02:03\n"
    )
    shape = slurm.parse_slurmd_c(out, gpus=8)
    assert shape == {
        "CPUs": 128,
        "Boards": 1,
        "SocketsPerBoard": 2,
        "CoresPerSocket": 32,
        "ThreadsPerCore": 2,
        "RealMemory": 2063937,
        "Gres": "gpu:8",
    }
    assert slurm.shape_from_dict("gpu001", shape).gpus == 8
    with pytest.raises(SlurmConfigError, match="gave no RealMemory"):
        slurm.parse_slurmd_c(
            "NodeName=x CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1"
        )


def test_declared_shape_errors_name_host_and_key():
    with pytest.raises(
        SlurmConfigError, match=r"gpu009: shape RealMemory must be an integer, got '2T'"
    ):
        slurm.shape_from_dict("gpu009", {"CPUs": 8, "RealMemory": "2T"})
    with pytest.raises(SlurmConfigError, match="Gres must look like gpu:8"):
        slurm.shape_from_dict("gpu009", {"CPUs": 8, "RealMemory": 1, "Gres": "eight"})


def test_node_lines_group_identical_shapes_with_compressed_hostlists():
    small = NodeShape(cpus=2, cores_per_socket=2, real_memory=4000)
    lines = slurm.node_lines({"gpu001": SHAPE, "gpu002": SHAPE, "gpu003": SHAPE, "cpu1": small})
    assert lines == [
        "NodeName=cpu1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
        "RealMemory=4000 State=UNKNOWN",
        "NodeName=gpu[001-003] CPUs=128 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 "
        "ThreadsPerCore=2 RealMemory=2000000 Gres=gpu:8 State=UNKNOWN",
    ]


def test_partitions_by_group_or_hostlist():
    groups = {"slurm_compute": ["gpu001", "gpu002", "gpu003"], "su1": ["gpu001", "gpu002"]}
    parts = slurm.partitions(
        [
            {"name": "batch", "nodes": "slurm_compute"},
            {"name": "su1", "nodes": "su1", "max_time": "1-00:00:00"},
            {"name": "one", "nodes": "gpu[002-003]", "default": True, "extra": {"Hidden": True}},
        ],
        groups,
        groups["slurm_compute"],
    )
    assert [p.line() for p in parts] == [
        "PartitionName=batch Nodes=gpu[001-003] Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=su1 Nodes=gpu[001-002] Default=NO MaxTime=1-00:00:00 State=UP",
        "PartitionName=one Nodes=gpu[002-003] Default=YES MaxTime=INFINITE State=UP Hidden=YES",
    ]


def test_partition_errors():
    groups = {"slurm_compute": ["gpu001"]}
    with pytest.raises(SlurmConfigError, match="'gpus' is neither an inventory group"):
        slurm.partitions([{"name": "p", "nodes": "gpus"}], groups, ["gpu001"])
    with pytest.raises(SlurmConfigError, match=r"gpu009 are not compute nodes"):
        slurm.partitions([{"name": "p", "nodes": "gpu[001,009]"}], groups, ["gpu001"])


def test_first_partition_is_default_when_none_is():
    parts = slurm.partitions([{"name": "a"}, {"name": "b"}], {"slurm_compute": ["n1"]}, ["n1"])
    assert [p.default for p in parts] == [True, False]


def test_gres_conf_autodetect_explicit_and_cpu_only():
    cpu = NodeShape(cpus=2, real_memory=1)
    one = NodeShape(cpus=2, real_memory=1, gpus=1)
    shapes = {"gpu001": SHAPE, "gpu002": SHAPE, "cpu1": cpu, "tiny1": one}
    assert slurm.gres_conf(shapes, "nvml") == (
        "# Managed by Kiln (slurm role).\n"
        "NodeName=tiny1 AutoDetect=nvml\n"
        "NodeName=gpu[001-002] AutoDetect=nvml\n"
    )
    assert slurm.gres_conf(shapes, "nvidia").splitlines()[1:] == [
        "NodeName=tiny1 AutoDetect=nvidia",
        "NodeName=gpu[001-002] AutoDetect=nvidia",
    ]
    assert slurm.gres_conf(shapes, "").splitlines()[1:] == [
        "NodeName=tiny1 Name=gpu File=/dev/nvidia0",
        "NodeName=gpu[001-002] Name=gpu File=/dev/nvidia[0-7]",
    ]
    assert slurm.gres_conf({"cpu1": cpu}, "nvml").splitlines()[1:] == []


@pytest.mark.parametrize(
    ("plugins", "mode"),
    [
        (["gpu_nvml.so", "gpu_generic.so"], "nvml"),
        # Slurm 24.11 built without NVML (Debian 13): its own NVIDIA plugin, not nvml.
        (["gpu_nvidia.so", "gpu_generic.so"], "nvidia"),
        (["gpu_nvml.so", "gpu_nvidia.so"], "nvml"),
        (["gpu_generic.so", "mpi_pmix.so"], ""),
    ],
)
def test_gpu_autodetect_follows_the_detection_plugin_the_build_has(plugins, mode):
    assert slurm.Cluster(["ctl"], plugins).gpu_autodetect == mode


def test_whole_slurm_conf():
    text = slurm.slurm_conf(
        {"ClusterName": "c", "SlurmctldHost": ["ctl1"]},
        (24, 11),
        {"gpu001": SHAPE},
        [slurm.Partition("batch", ["gpu001"], True)],
    )
    assert text.splitlines()[2:] == [
        "ClusterName=c",
        "SlurmctldHost=ctl1",
        "",
        "# Nodes",
        "NodeName=gpu001 CPUs=128 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=2 "
        "RealMemory=2000000 Gres=gpu:8 State=UNKNOWN",
        "",
        "# Partitions",
        "PartitionName=batch Nodes=gpu001 Default=YES MaxTime=INFINITE State=UP",
    ]


def test_node_state():
    idle = slurm.node_state("NodeName=n1 Arch=x86_64 State=IDLE ThreadsPerCore=1")
    assert idle == {"state": "IDLE", "base": "IDLE", "reason": "", "usable": True, "settled": True}
    drained = slurm.node_state(
        "NodeName=n1 State=IDLE+DRAIN ThreadsPerCore=1"
        " Reason=kiln: slow disk [root@2026-11-22T03:00:00]"
    )
    assert drained["usable"] is False
    assert drained["reason"] == "kiln: slow disk"
    assert drained["settled"] is True
    down = slurm.node_state("NodeName=n1 State=DOWN* Reason=Not responding [slurm@2026]")
    assert (down["base"], down["usable"], down["settled"]) == ("DOWN", False, False)


def test_conf_value():
    assert slurm.conf_value("A=1\nStoragePass=s3cret x\n", "StoragePass") == "s3cret x"
    assert slurm.conf_value("", "StoragePass") == ""


def test_settings_computed_for_a_cluster_then_overridden():
    cluster = slurm.Cluster(
        controllers=["ctl1", "ctl2"],
        plugins=["mpi_pmix.so", "libpmix.so.2", "libpmix.so", "gpu_nvml.so"],
        topology_plugin="topology/tree",
        configless=True,
        cgroup=True,
        accounting=True,
        dbd_host="ctl1",
    )
    assert cluster.pmix and cluster.gpu_autodetect == "nvml"
    found = slurm.settings(
        {"ClusterName": "c", "SchedulerType": "sched/backfill"},
        cluster,
        {"SchedulerType": None, "PrologFlags": "Contain,X11"},
    )
    assert found == {
        "ClusterName": "c",
        "SlurmctldHost": ["ctl1", "ctl2"],
        "MpiDefault": "pmix",
        "TopologyPlugin": "topology/tree",
        "SlurmctldParameters": "enable_configless",
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup,task/affinity",
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "PrologFlags": "Contain,X11",
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": "ctl1",
        "AccountingStoragePort": 6819,
        "AccountingStorageTRES": "gres/gpu",
    }


def test_settings_without_cgroups_accounting_or_the_pmix_library():
    # Debian's slurm-wlm-basic-plugins ships mpi_pmix.so without libpmix-dev, whose
    # unversioned libpmix.so the plugin loads: libpmix.so.2 (Open MPI's) is not enough.
    cluster = slurm.Cluster(
        controllers=["ctl"], plugins=["mpi_pmix.so", "libpmix.so.2"], cgroup=False
    )
    assert not cluster.pmix and cluster.gpu_autodetect == ""
    assert cluster.pmix_problem == (
        "the PMIx library Slurm's plugin loads (libpmix.so, Debian's libpmix-dev) is not installed"
    )
    assert slurm.settings({}, cluster, {}) == {
        "SlurmctldHost": ["ctl"],
        "MpiDefault": "none",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/linux",
    }


def test_kilns_prolog_and_epilog_come_first_and_the_operators_after():
    cluster = slurm.Cluster(
        controllers=["ctl"],
        plugins=[],
        prolog=True,
        epilog=True,
        prolog_extra=["/etc/slurm/site-prolog"],
    )
    assert slurm.settings({"ClusterName": "c"}, cluster, {}) == {
        "ClusterName": "c",
        "SlurmctldHost": ["ctl"],
        "MpiDefault": "none",
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup,task/affinity",
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "PrologFlags": "Contain",
        "Prolog": "/usr/local/sbin/kiln-prolog,/etc/slurm/site-prolog",
        "Epilog": "/usr/local/sbin/kiln-epilog",
    }
    # Without cgroups the Prolog still runs at allocation; Kiln's off, the operator's stay.
    bare = slurm.Cluster(["ctl"], [], cgroup=False, epilog_extra=["/etc/slurm/clean"])
    assert slurm.job_programs(bare) == {"Epilog": "/etc/slurm/clean"}
    alloc = slurm.Cluster(["ctl"], [], cgroup=False, prolog=True)
    assert slurm.job_programs(alloc) == {
        "Prolog": "/usr/local/sbin/kiln-prolog",
        "PrologFlags": "Alloc",
    }


@pytest.mark.parametrize("program", ["site-prolog", "/a,/b"])
def test_an_operators_prolog_must_be_one_absolute_path(program):
    check = slurm.INVENTORY_CHECKS["slurm_prolog_extra"][1]
    with pytest.raises(slurm.SlurmConfigError) as caught:
        check([program], {})
    assert str(caught.value) == (
        f"Prolog {program!r}: expected one absolute path (slurmd runs it with no PATH)"
    )


def test_mpi_default_is_what_was_asked_where_it_can_work():
    found = ["mpi_pmix.so", "libpmix.so"]
    assert slurm.Cluster(["c"], found).mpi_default == "pmix"
    assert slurm.Cluster(["c"], found, mpi="pmi2").mpi_default == "pmi2"
    assert slurm.Cluster(["c"], found, mpi="none").mpi_default == "none"
    assert slurm.Cluster(["c"], ["libpmix.so"]).mpi_default == "none"
    assert slurm.Cluster(["c"], ["libpmix.so"]).pmix_problem == (
        "this Slurm build has no PMIx plugin (mpi_pmix.so): Open MPI programs start"
        " with mpirun inside an allocation"
    )
    assert slurm.Cluster(["c"], []).mpi_default == "none"
    assert slurm.Cluster(["c"], [], mpi="pmi2").mpi_default == "pmi2"


def test_config_files_are_every_file_the_role_writes():
    shape = {"CPUs": 8, "RealMemory": 64000, "Gres": "gpu:2"}
    shapes = {"gpu1": slurm.shape_from_dict("gpu1", shape)}
    parts = slurm.partitions([{"name": "batch"}], {"slurm_compute": ["gpu1"]}, ["gpu1"])
    files = slurm.config_files(
        {"ClusterName": "c"}, {"ConstrainCores": True}, (24, 11), shapes, parts, gpu_autodetect=""
    )
    assert sorted(files) == ["cgroup.conf", "gres.conf", "slurm.conf"]
    assert files["slurm.conf"] == slurm.slurm_conf({"ClusterName": "c"}, (24, 11), shapes, parts)
    assert files["gres.conf"].splitlines()[1] == "NodeName=gpu1 Name=gpu File=/dev/nvidia[0-1]"
    assert files["cgroup.conf"].splitlines()[1:] == ["ConstrainCores=YES"]


def test_plugstack_conf_names_each_file_of_plugstack_conf_d():
    # As a glob orders them; nothing outside the directory, no file a blank would cut.
    found = [
        "/etc/slurm/plugstack.conf.d/pyxis.conf",
        "/etc/slurm/plugstack.conf.d/10-site.conf",
        "/etc/slurm/plugstack.conf.d/with space.conf",
        "/etc/slurm/elsewhere.conf",
    ]
    assert slurm.plugstack_conf(found).splitlines() == [
        "# Written by Kiln (roles slurm and pyxis): each file of plugstack.conf.d by name,",
        "# since Slurm's own parser refuses a glob.",
        "include /etc/slurm/plugstack.conf.d/10-site.conf",
        "include /etc/slurm/plugstack.conf.d/pyxis.conf",
    ]
    assert slurm.plugstack_conf([]).splitlines() == slurm.plugstack_conf(found).splitlines()[:2]
