"""kiln.inventory.edit: variables set in group_vars files as an operator would by hand,
every other line kept, and every file put back when the inventory no longer passes."""

import pytest

from kiln.inventory import edit
from kiln.inventory.edit import Change


def test_a_line_in_yamls_flow_style():
    assert edit.line("health_gpus", 8) == "health_gpus: 8"
    assert edit.line("validate_profile", "lab-cpu") == "validate_profile: lab-cpu"
    assert edit.line("nvidia_driver_version", "580") == "nvidia_driver_version: '580'"
    assert edit.line("base_sysctl_apply", False) == "base_sysctl_apply: false"
    assert (
        edit.line("health_ib_ports", [{"device": "mlx5_0", "port": 1, "rate": 400}])
        == "health_ib_ports: [{device: mlx5_0, port: 1, rate: 400}]"
    )
    assert edit.line("slurm_topology_fabric_hosts", []) == "slurm_topology_fabric_hosts: []"


def test_set_replaces_uncomments_or_adds(tmp_path):
    group_vars = tmp_path / "group_vars"
    (group_vars / "all").mkdir(parents=True)
    (group_vars / "all" / "health.yml").write_text(
        '---\n# GPUs the node must show.\n# health_gpus: ""\n\n# Ports.\nhealth_ib_ports:\n'
        "  - {device: mlx5_0, port: 1, rate: 200}\n  - {device: mlx5_1, port: 1, rate: 200}\n\n"
        "# The time limit.\nhealth_timeout: 45\n"
    )
    (group_vars / "slurm.yml").write_text("slurm_cluster_name: a\n")
    texts = edit.plan(
        tmp_path,
        [
            Change("all", "health_gpus", 8, "8 GPUs"),
            Change("all", "health_ib_ports", [{"device": "mlx5_0", "port": 1, "rate": 400}]),
            Change("all", "validate_profile", "lab-cpu", "the lab"),
            Change("slurm", "slurm_cgroup_enabled", False, "containers"),
        ],
        "discovered.yml",
    )
    assert texts == {
        group_vars / "all" / "health.yml": (
            "---\n# GPUs the node must show.\nhealth_gpus: 8\n\n# Ports.\n"
            "health_ib_ports: [{device: mlx5_0, port: 1, rate: 400}]\n\n"
            "# The time limit.\nhealth_timeout: 45\n"
        ),
        group_vars / "all" / "discovered.yml": "---\n# the lab\nvalidate_profile: lab-cpu\n",
        # A group kept in one file gets the setting there, not in a directory beside it.
        group_vars
        / "slurm.yml": "slurm_cluster_name: a\n# containers\nslurm_cgroup_enabled: false\n",
    }


def test_a_failed_check_puts_every_file_back(tmp_path):
    kept = tmp_path / "group_vars" / "all" / "base.yml"
    kept.parent.mkdir(parents=True)
    kept.write_text("base_packages: [curl]\n")
    kept.chmod(0o640)
    texts = edit.plan(
        tmp_path,
        [Change("all", "base_packages", ["jq"]), Change("compute", "health_gpus", 8)],
        "discovered.yml",
    )

    def refuse():
        raise RuntimeError("no longer valid")

    with pytest.raises(RuntimeError):
        edit.apply(texts, refuse)
    assert kept.read_text() == "base_packages: [curl]\n"
    assert not (tmp_path / "group_vars" / "compute").exists() or not any(
        (tmp_path / "group_vars" / "compute").iterdir()
    )
    written = edit.apply(texts, lambda: None)
    assert sorted(p.name for p in written) == ["base.yml", "discovered.yml"]
    assert kept.read_text() == "base_packages: [jq]\n" and kept.stat().st_mode & 0o777 == 0o640
    assert edit.apply(texts, lambda: None) == []  # the same texts again: nothing written


def test_a_long_value_is_written_as_a_block_and_replaced_whole(tmp_path):
    ports = [{"device": f"mlx5_{i}", "port": 1, "rate": 400} for i in range(8)]
    assert edit.lines("health_ib_ports", ports) == [
        "health_ib_ports:",
        *[f"- {{device: mlx5_{i}, port: 1, rate: 400}}" for i in range(8)],
    ]
    held = tmp_path / "group_vars" / "slurm_compute" / "hardware.yml"
    held.parent.mkdir(parents=True)
    held.write_text("---\n# Ports.\n# health_ib_ports: []\n\n# GPUs.\n# health_gpus: ''\n")
    once = edit.plan(tmp_path, [Change("slurm_compute", "health_ib_ports", ports)], "d.yml")
    edit.apply(once, lambda: None)
    twice = edit.plan(tmp_path, [Change("slurm_compute", "health_ib_ports", ports[:2])], "d.yml")
    assert twice[held] == (
        "---\n# Ports.\nhealth_ib_ports: [{device: mlx5_0, port: 1, rate: 400}, {device: mlx5_1, "
        "port: 1, rate: 400}]\n\n# GPUs.\n# health_gpus: ''\n"
    )
