"""kiln.roles.nccl_env: the fabric from /sys/class/infiniband dumps (tests/fixtures/nccl, written
from the kernel's sysfs formats), the preset for it, overrides, and /etc/nccl.conf as
NCCL reads it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kiln.commands.nccl import in_effect as nccl_show
from kiln.roles import nccl_env

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10"]


def fabric(name: str, **extra) -> nccl_env.Fabric:
    sysfs = yaml.safe_load((FIXTURES / f"{name}.yml").read_text())
    return nccl_env.Fabric(ports=tuple(nccl_env.read_ports(sysfs)), **extra)


def test_the_ports_of_a_dgx_h100():
    ports = nccl_env.read_ports(yaml.safe_load((FIXTURES / "dgx-h100-ib.yml").read_text()))
    assert [p.device for p in ports] == [f"mlx5_{n}" for n in range(12)]  # mlx5_10 after 9
    assert ports[0] == nccl_env.Port(
        device="mlx5_0",
        port=1,
        state="ACTIVE",
        rate_gbps=400.0,
        link_layer="InfiniBand",
        driver="mlx5_core",
        netdevs=("ibp24s0",),
        roce_v2_gid=None,
    )
    assert ports[1] == nccl_env.Port(
        device="mlx5_1",
        port=1,
        state="ACTIVE",
        rate_gbps=200.0,
        link_layer="Ethernet",
        driver="mlx5_core",
        netdevs=("enp41s0f0np0",),
        roce_v2_gid=3,  # GID 1 is RoCE v2 too, but link-local IPv6
    )
    assert ports[11].state == "DOWN"


def test_infiniband_preset_uses_active_compute_rails_by_exact_name():
    name, settings = nccl_env.preset(fabric("dgx-h100-ib", socket_ifname="enp170s0f0np0"))
    assert name == "infiniband"
    assert settings.values == {
        "NCCL_IB_HCA": "=" + ",".join(f"{d}:1" for d in COMPUTE),
        "NCCL_SOCKET_IFNAME": "=enp170s0f0np0",
    }
    assert settings.notes == [
        "mlx5_1:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_2:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_7:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_8:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "mlx5_11:1 left out: DOWN",
    ]


def test_the_whole_file_for_a_dgx_h100_with_an_exclusion_and_an_override():
    name, settings = nccl_env.preset(fabric("dgx-h100-ib", socket_ifname="bond0"), ["mlx5_10"])
    settings = nccl_env.with_overrides(settings, {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": ""})
    text = nccl_env.render(name, settings)
    assert text.splitlines() == [
        "# Written by Kiln (role nccl_env): preset infiniband",
        "# infiniband: NCCL's environment variable documentation (NCCL_IB_HCA exact match)",
        "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1",
        "# override: the operator's nccl_env_overrides",
        "NCCL_DEBUG=WARN",
        "# mlx5_1:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_2:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_7:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_8:1 left out: Ethernet at 200 Gb/s, the compute rails are InfiniBand at 400 "
        "Gb/s (a storage rail?)",
        "# mlx5_10:1 excluded by nccl_env_exclude_hcas",
        "# mlx5_11:1 left out: DOWN",
        "# NCCL_SOCKET_IFNAME removed by nccl_env_overrides",
    ]
    # What NCCL takes from it: the settings, and nothing from the comments.
    assert nccl_env.parse(text) == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1",
        "NCCL_DEBUG": "WARN",
    }


def test_roce_preset_takes_the_common_roce_v2_gid():
    name, settings = nccl_env.preset(fabric("roce-8rail", socket_ifname="eno1"))
    assert name == "roce"
    assert settings.values == {
        "NCCL_IB_HCA": "=" + ",".join(f"mlx5_{n}:1" for n in range(8)),
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_SOCKET_IFNAME": "=eno1",
    }
    assert settings.notes == []


def test_efa_sets_little():
    name, settings = nccl_env.preset(fabric("aws-p5-efa", socket_ifname="enp71s0", cloud="aws"))
    assert (name, settings.values) == ("efa", {"FI_PROVIDER": "efa"})


def test_azure_ndv5_adds_its_topology_file():
    azure = fabric("dgx-h100-ib", cloud="azure", machine="Standard_ND96isr_H100_v5")
    name, settings = nccl_env.preset(azure)
    assert name == "azure-ndv5"
    assert list(settings.values) == [
        "NCCL_IB_HCA",
        "NCCL_TOPO_FILE",
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "NCCL_IGNORE_CPU_AFFINITY",
    ]
    assert settings.values["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv5/topo.xml"


def test_no_rdma_device_means_sockets():
    name, settings = nccl_env.preset(nccl_env.Fabric(socket_ifname="eth0"))
    assert (name, settings.values) == (
        "socket",
        {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0"},
    )


@pytest.mark.parametrize(
    ("line", "taken"),
    [
        ("NCCL_DEBUG=INFO", {"NCCL_DEBUG": "INFO"}),
        ("  NCCL_DEBUG = INFO", {"  NCCL_DEBUG ": " INFO"}),  # a variable NCCL never reads
        ("# a comment", {}),
        ("# NCCL_DEBUG=INFO", {"# NCCL_DEBUG": "INFO"}),
        ("NCCL_IB_HCA==mlx5_0:1", {"NCCL_IB_HCA": "=mlx5_0:1"}),
    ],
)
def test_parse_reads_lines_as_nccl_does(line, taken):
    assert nccl_env.parse(line + "\n") == taken


def test_the_first_of_two_lines_wins_as_in_nccl():
    assert nccl_env.parse("NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n") == {"NCCL_DEBUG": "WARN"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nccl_debug": "INFO"}, "nccl_env_overrides: 'nccl_debug' is not an environment"),
        ({"NCCL_DEBUG": " INFO"}, "nccl_env_overrides: NCCL_DEBUG's value ' INFO' has a"),
        ({"NCCL_DEBUG": "INFO\nX=1"}, "nccl_env_overrides: NCCL_DEBUG's value 'INFO\\nX=1'"),
    ],
)
def test_overrides_nccl_would_misread_are_refused(overrides, message):
    with pytest.raises(nccl_env.NcclError, match="^" + re.escape(message)):
        nccl_env.with_overrides(nccl_env.Settings(), overrides)


def test_clouds_from_dmi():
    assert nccl_env.cloud_of({"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"}) == "aws"
    azure = {"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}
    assert nccl_env.cloud_of(azure) == "azure"
    assert (
        nccl_env.cloud_of({"sys_vendor": "Google", "product_name": "Google Compute Engine"})
        == "gcp"
    )
    assert nccl_env.cloud_of({"sys_vendor": "NVIDIA", "product_name": "DGXH100"}) == ""


# --- the node probe, the role's plan, `kiln nccl show` -------------------------------------

PROBE = Path(__file__).resolve().parents[2] / "roles" / "nccl_env" / "files" / "kiln-nccl-probe"


def sysfs_copy(root: Path, dump: dict[str, str]) -> None:
    """A /sys tree as the kernel lays it out: device/driver a link to the driver."""
    for path, content in dump.items():
        target = root / "class" / "infiniband" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith("/device/driver"):
            target.symlink_to(f"../../../bus/pci/drivers/{content}")
        elif "/device/net/" in path:
            target.mkdir()
        else:
            target.write_text(f"{content}\n")
    dmi = root / "class" / "dmi" / "id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_text("Supermicro\n")
    (dmi / "product_name").write_text("SYS-821GE-TNHR\n")


def run_probe(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["dgx-h100-ib", "roce-8rail", "aws-p5-efa"])
def test_the_probe_reads_back_every_file_of_a_recorded_tree(name, tmp_path):
    dump = yaml.safe_load((FIXTURES / f"{name}.yml").read_text())
    sysfs_copy(tmp_path, dump)
    found = run_probe("--root", str(tmp_path))
    assert found["infiniband"] == {k: str(v) for k, v in dump.items()}
    assert found["dmi"] == {"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR"}
    # Nothing else: the probe asks a metadata service only when told (--metadata).
    assert list(found) == ["infiniband", "dmi", "socket_ifname"]


def test_the_probe_reads_what_a_plugin_script_sets(tmp_path):
    script = tmp_path / "set_nccl_env.sh"
    script.write_text(
        "#!/bin/bash\n"
        "# comments, conditionals and expansions are the shell's business\n"
        'export NCCL_NET="gIB"\n'
        "if true; then export NCCL_IB_TC=52; fi\n"
        "export LD_LIBRARY_PATH=/usr/local/gib/lib64:${LD_LIBRARY_PATH}\n"
        "HELPER=/usr/local/gib\n"
    )
    found = run_probe("--plugin-script", str(script))["plugin_env"]
    assert found == {
        "NCCL_NET": "gIB",
        "NCCL_IB_TC": "52",
        "LD_LIBRARY_PATH": "/usr/local/gib/lib64:",
    }  # not HELPER: only what the script exports reaches a job
    assert run_probe("--plugin-script", str(tmp_path / "missing.sh")) == {"plugin_env": None}


GCP = {"sys_vendor": "Google", "product_name": "Google Compute Engine"}
PLUGINS = {
    "tcpx": {"env_script": "", "library_dir": "/var/lib/tcpx/lib64"},
    "gib": {
        "env_script": "/usr/local/gib/scripts/set_nccl_env.sh",
        "library_dir": "/usr/local/gib/lib64",
    },
}


def test_a3_ultra_takes_the_gib_plugins_own_settings():
    probe = {"infiniband": {}, "dmi": GCP, "socket_ifname": "enp0s12", "machine": "a3-ultragpu-8g"}
    assert nccl_env.plugin_script(probe, PLUGINS) == "/usr/local/gib/scripts/set_nccl_env.sh"
    planned = nccl_env.plan(
        probe,
        {"NCCL_DEBUG": "WARN"},
        [],
        {"NCCL_NET": "gIB", "NCCL_IB_TC": "52", "LD_LIBRARY_PATH": "/usr/local/gib/lib64:"},
        "/usr/local/gib/lib64",
    )
    assert planned == {
        "preset": "gcp-gib",
        "conf": "\n".join(
            [
                "# Written by Kiln (role nccl_env): preset gcp-gib",
                "# gcp-gib: Google's gIB NCCL plugin: its environment script",
                "NCCL_NET=gIB",
                "NCCL_IB_TC=52",
                "# override: the operator's nccl_env_overrides",
                "NCCL_DEBUG=WARN",
                "# LD_LIBRARY_PATH from the plugin's script left out: the loader reads it when "
                "a process starts, before NCCL reads this file",
                "# the plugin's libraries are in /usr/local/gib/lib64: jobs need it on "
                "LD_LIBRARY_PATH",
            ]
        )
        + "\n",
        "fact": {
            "preset": "gcp-gib",
            "values": {"NCCL_NET": "gIB", "NCCL_IB_TC": "52", "NCCL_DEBUG": "WARN"},
            "sources": {"NCCL_NET": "gcp-gib", "NCCL_IB_TC": "gcp-gib", "NCCL_DEBUG": "override"},
            "notes": [
                "LD_LIBRARY_PATH from the plugin's script left out: the loader reads it when a "
                "process starts, before NCCL reads this file",
                "the plugin's libraries are in /usr/local/gib/lib64: jobs need it on "
                "LD_LIBRARY_PATH",
            ],
            "library_dir": "/usr/local/gib/lib64",
        },
    }


def test_a_gcp_machine_whose_plugin_script_is_missing_gets_the_generic_preset():
    probe = {"infiniband": {}, "dmi": GCP, "socket_ifname": "ens4", "machine": "a3-highgpu-8g"}
    assert nccl_env.plugin_script(probe, PLUGINS) == ""  # no TCPX script configured
    planned = nccl_env.plan(probe, {}, [])
    assert planned["fact"] == {
        "preset": "socket",
        "values": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=ens4"},
        "sources": {"NCCL_IB_DISABLE": "socket", "NCCL_SOCKET_IFNAME": "socket"},
        "notes": [
            "a3-highgpu-8g needs Google's tcpx NCCL plugin; its environment script is not on "
            "this node (nccl_env_gcp_plugins), so the generic preset is used"
        ],
    }


def test_other_machines_and_clouds_need_no_plugin():
    on_gcp = {"dmi": GCP, "machine": "n2-standard-8"}
    elsewhere = {"dmi": {"sys_vendor": "Dell Inc."}, "machine": "a3-ultragpu-8g"}
    assert (
        nccl_env.plugin_script(on_gcp, PLUGINS) == nccl_env.plugin_script(elsewhere, PLUGINS) == ""
    )


def test_what_is_in_effect_names_every_source():
    planned = nccl_env.plan({"socket_ifname": "eth0"}, {"NCCL_DEBUG": "WARN"}, [])
    conf = planned["conf"] + "NCCL_P2P_LEVEL=NVL\n"  # added by hand after Kiln wrote it
    conf = conf.replace("NCCL_DEBUG=WARN", "NCCL_DEBUG=INFO")  # and one changed
    found = nccl_env.effective(conf, planned["fact"], {"NCCL_IB_DISABLE": "0", "HOME": "/root"})
    assert found == [
        nccl_env.Effective("NCCL_IB_DISABLE", "0", "environment"),
        nccl_env.Effective("NCCL_SOCKET_IFNAME", "=eth0", "preset socket"),
        nccl_env.Effective("NCCL_DEBUG", "INFO", "file"),
        nccl_env.Effective("NCCL_P2P_LEVEL", "NVL", "file"),
    ]


def test_groups_whose_nodes_differ_are_named():
    same = [nccl_env.Effective("NCCL_IB_HCA", "=mlx5_0:1", "preset infiniband")]
    other = [nccl_env.Effective("NCCL_IB_HCA", "=mlx5_1:1", "preset infiniband")]
    extra = [*same, nccl_env.Effective("NCCL_DEBUG", "INFO", "environment")]
    settings = {"gpu01": same, "gpu02": same, "gpu03": other, "gpu04": extra}
    groups = {"rack1": ["gpu01", "gpu02"], "rack2": ["gpu03", "gpu04"], "solo": ["gpu01"]}
    assert nccl_env.differences(settings, groups) == [
        "group rack2: NCCL_DEBUG differs: (unset) on gpu03; INFO on gpu04",
        "group rack2: NCCL_IB_HCA differs: =mlx5_1:1 on gpu03; =mlx5_0:1 on gpu04",
    ]


def test_show_reads_what_the_playbook_brought_back():
    planned = nccl_env.plan({"socket_ifname": "eth0"}, {}, [])
    raw = {
        "conf": planned["conf"],
        "fact": json.dumps(planned["fact"]),
        "environment": ["NCCL_DEBUG=INFO"],
    }
    assert nccl_show.read_node("c1", raw) == nccl_show.NodeSettings(
        node="c1",
        preset="socket",
        settings=[
            nccl_env.Effective("NCCL_IB_DISABLE", "1", "preset socket"),
            nccl_env.Effective("NCCL_SOCKET_IFNAME", "=eth0", "preset socket"),
            nccl_env.Effective("NCCL_DEBUG", "INFO", "environment"),
        ],
    )
    bare = nccl_show.read_node("c2", {"conf": "", "fact": "", "environment": []})
    assert bare == nccl_show.NodeSettings(
        node="c2", note="no /etc/nccl.conf: the nccl_env role has not run here"
    )
