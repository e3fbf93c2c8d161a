"""`kiln inventory discover` through Ansible for real: two hosts read on this machine
(connection local) and one that does not answer (a closed port on loopback), which is
named while the others are still read and written."""

import json

import yaml

from kiln.errors import ExitCode
from tests.conftest import run_kiln


def test_an_unreachable_host_is_named_and_the_others_are_written(tmp_path):
    local = {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}
    hosts = {
        "all": {
            "children": {
                "slurm_controller": {"hosts": {"ctl1": local}},
                "slurm_compute": {
                    "hosts": {
                        "gpu001": local,
                        "gpu002": {"ansible_host": "127.0.0.1", "ansible_port": 1},
                    }
                },
            }
        }
    }
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    env = {"KILN_STATE_DIR": str(tmp_path / "state"), "ANSIBLE_HOST_KEY_CHECKING": "False"}
    result = run_kiln(
        "inventory", "discover", "-i", str(inv), "--write", "--json", env=env, timeout=600
    )
    assert result.returncode == ExitCode.HOSTS_FAILED, result.stderr
    found = json.loads(result.stdout)
    assert sorted(found["nodes"]) == ["ctl1", "gpu001"]
    assert list(found["unreachable"]) == ["gpu002"]
    assert (
        "UNREACHABLE" in found["unreachable"]["gpu002"]
        or "connect" in found["unreachable"]["gpu002"].lower()
    )
    this = found["nodes"]["gpu001"]
    with open("/proc/meminfo") as meminfo:
        total_kb = int(meminfo.readline().split()[1])
    assert abs(this["memory_mb"] - total_kb // 1024) <= 1
    assert this["vcpus"] >= 1 and this["os"] and this["architecture"]
    assert (this["gpus"], this["ports"]) == (0, [])
    # A kernel without autofs (this machine's may be one): mounts made at boot.
    with open("/proc/filesystems") as filesystems:
        automounts = "autofs" in filesystems.read().split()
    assert this["autofs"] is automounts
    at_boot = {} if automounts else {"autofs_automount": False}
    # A CPU host: the lab's profile and settings where it is a container (this machine
    # may be one), else nothing but a note.
    proposed = {p["name"]: p["value"] for p in found["proposals"]}
    if this["container"]:
        assert proposed == {
            "validate_profile": "lab-cpu",
            "base_chrony_control_clock": False,
            "base_sysctl_apply": False,
            "slurm_cgroup_enabled": False,
            **at_boot,
        }
        assert found["written"] == [str(inv / "group_vars" / "all" / "discovered.yml")]
        assert run_kiln("inventory", "check", "-i", str(inv), env=env).returncode == 0
    else:
        assert proposed == at_boot
        assert found["written"] == (
            [str(inv / "group_vars" / "all" / "discovered.yml")] * bool(at_boot)
        )
        assert found["notes"][0].startswith("no shipped validation profile fits 0x no GPU")
    # Nothing left behind on the host.
    assert not list(tmp_path.glob("**/kiln-discover.*"))
