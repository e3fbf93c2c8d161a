"""kiln.health: the node check's settings as `kiln inventory check` judges them, and the
results `kiln health` reads back from kiln-health --json."""

import json

from kiln import health


def test_settings_a_cluster_uses_pass():
    assert health.settings_problems({}) == []
    assert (
        health.settings_problems(
            {
                "timeout": 50,
                "check_timeout": 15,
                "ib_ports": [
                    {"device": "mlx5_0", "port": 1, "rate": 400},
                    {"device": "mlx5_1", "rate": 400},
                ],
                "free_space": [{"path": "/var/lib/enroot", "min_mb": 0}],
            }
        )
        == []
    )


def test_settings_that_cannot_work_are_named():
    assert health.settings_problems(
        {
            "timeout": 60,
            "check_timeout": 61,
            "ib_ports": [{"device": "mlx5_0", "rate": "400G"}, "mlx5_1"],
            "free_space": [{"path": "var/tmp", "min_mb": 10}, {"path": "/tmp"}],
        }
    ) == [
        "health_timeout 60: must be under 60 s, when slurmd kills its HealthCheckProgram",
        "health_check_timeout 61: must be between 1 and health_timeout (60)",
        "health_ib_ports: {'device': 'mlx5_0', 'rate': '400G'} is not "
        "{device: mlx5_0, port: 1, rate: 400} (Gb/s)",
        "health_ib_ports: 'mlx5_1' is not {device: mlx5_0, port: 1, rate: 400} (Gb/s)",
        "health_free_space: {'path': 'var/tmp', 'min_mb': 10} is not "
        "{path: /absolute/path, min_mb: 1024}",
        "health_free_space: {'path': '/tmp'} is not {path: /absolute/path, min_mb: 1024}",
    ]


def test_a_nodes_results_read_whole():
    printed = {
        "node": "gpu001",
        "results": [
            {"check": "gpu_ecc", "status": "FAIL", "reason": "00000000:18:00.0 2 uncorrectable"},
            {"check": "gpu_xid", "status": "WARN", "reason": "XID 63 row remapping pending"},
            {"check": "munge", "status": "OK", "reason": "munge answers"},
        ],
        "action": "drained gpu001: kiln-health: gpu_ecc: 00000000:18:00.0 2 uncorrectable",
    }
    node = health.read_node("gpu001", json.dumps(printed))
    assert node.to_json() == {
        "status": "FAIL",
        "results": printed["results"],
        "action": printed["action"],
        "error": "",
    }
    warned = health.read_node("gpu002", json.dumps({**printed, "results": printed["results"][1:]}))
    assert warned.status == "WARN"


def test_unreadable_results_are_an_error_not_a_pass():
    assert health.read_node("gpu001", "").error.startswith("kiln-health printed no readable result")
    odd = {"results": [{"check": "munge", "status": "MAYBE", "reason": ""}]}
    assert health.read_node("gpu001", json.dumps(odd)).to_json() == {
        "status": "ERROR",
        "results": [],
        "action": "",
        "error": "kiln-health reported an unknown status 'MAYBE'",
    }


def test_active_check_settings_that_cannot_work_are_named():
    assert health.settings_problems({"active_schedule": "Sun *-*-* 03:00:00"}) == []
    assert health.settings_problems(
        {"active_schedule": "daily\nExecStartPre=/bin/true", "active_minutes": 0, "active_keep": -1}
    ) == [
        "health_active_schedule 'daily\\nExecStartPre=/bin/true': must be one line, "
        'a systemd OnCalendar expression such as "Sun *-*-* 03:00:00"',
        "health_active_minutes 0: must be 1 or more",
        "health_active_keep -1: must be 1 or more",
    ]
