"""kiln.roles.health: the node check's settings as `kiln inventory check` judges them;
kiln.health: the results `kiln health` reads back from kiln-health --json."""

import json

import pytest

from kiln import health
from kiln.inventory import checks
from kiln.roles import health as health_role
from kiln.validation import drain
from kiln.validation.verdicts import Verdict


def test_settings_a_cluster_uses_pass():
    assert health_role.settings_problems({}) == []
    assert (
        health_role.settings_problems(
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
    assert health_role.settings_problems(
        {
            "timeout": 60,
            "check_timeout": 61,
            "prolog_timeout": 0,
            "ib_ports": [{"device": "mlx5_0", "rate": "400G"}, "mlx5_1"],
            "free_space": [{"path": "var/tmp", "min_mb": 10}, {"path": "/tmp"}],
        }
    ) == [
        "health_timeout 60: must be under 60 s, when slurmd kills its HealthCheckProgram",
        "health_check_timeout 61: must be between 1 and health_timeout (60)",
        "health_prolog_timeout 0: must be between 1 and 60 s (every job start waits for it)",
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


def test_a_runs_verdict_is_its_worst_nodes_by_the_one_status_mapping():
    """kiln.health.VERDICTS reads kiln-health's statuses for `kiln health`'s exit code
    (and burn-in's rounds, and the scheduled runs' reports): a failed node beats one
    that could not be read, which beats a warning."""

    def node(name: str, *statuses: str, error: str = "") -> health.NodeHealth:
        results = [health.CheckResult(f"c{i}", s, "") for i, s in enumerate(statuses)]
        return health.NodeHealth(name, results, error=error)

    ok, warned = node("a", "OK"), node("b", "OK", "WARN")
    failed, unread = node("c", "WARN", "FAIL"), node("d", error="no result")
    runs = {
        "none": [],
        "ok": [ok],
        "warn": [ok, warned],
        "unread": [warned, unread],
        "fail": [unread, failed, ok],
    }
    assert {name: health.Health(nodes, None).verdict for name, nodes in runs.items()} == {
        "none": Verdict.PASS,
        "ok": Verdict.PASS,
        "warn": Verdict.WARN,
        "unread": Verdict.UNCHECKED,
        "fail": Verdict.FAIL,
    }
    assert health.VERDICTS == {"OK": Verdict.PASS, "WARN": Verdict.WARN, "FAIL": Verdict.FAIL}


def test_one_conversion_to_judgements_and_one_rule_for_a_node_that_could_not_report():
    """kiln.health.judgements, for the rollout's batch check, burn-in's rounds and the
    scheduled runs' reports: a judgement per check by VERDICTS, and a node that could
    not report (unreachable, its output unreadable or of a status kiln-health never
    writes, its run cut short beside some results) is not checked: never a pass,
    never a failure by itself, and never among the verdicts a campaign resumes on."""
    printed = {
        "results": [
            {"check": "munge", "status": "OK", "reason": "munge answers"},
            {"check": "gpu_xid", "status": "WARN", "reason": "XID 63 row remapping pending"},
            {"check": "gpu_ecc", "status": "FAIL", "reason": "2 uncorrectable"},
        ]
    }
    checked = [
        health.read_node("gpu001", json.dumps(printed)),
        health.NodeHealth("gpu002", error="ssh: connect to host gpu002 port 22: timed out"),
        health.read_node("gpu003", "Traceback (most recent call last):"),
        health.read_node(
            "gpu004", json.dumps({"results": [{"check": "gpu", "status": "MAYBE", "reason": ""}]})
        ),
        health.from_results("gpu005", printed["results"][:1], error="srun: step cancelled"),
    ]
    unread = "kiln-health printed no readable result (Expecting value: line 1 column 1 (char 0))"
    said = [(j.node, j.test, j.verdict, j.reason) for j in health.judgements(checked)]
    unchecked = Verdict.UNCHECKED
    assert said == [
        ("gpu001", "health.munge", Verdict.PASS, "munge answers"),
        ("gpu001", "health.gpu_xid", Verdict.WARN, "XID 63 row remapping pending"),
        ("gpu001", "health.gpu_ecc", Verdict.FAIL, "2 uncorrectable"),
        ("gpu002", "health.run", unchecked, "ssh: connect to host gpu002 port 22: timed out"),
        ("gpu003", "health.run", unchecked, unread),
        ("gpu004", "health.run", unchecked, "kiln-health reported an unknown status 'MAYBE'"),
        ("gpu005", "health.munge", Verdict.PASS, "munge answers"),
        ("gpu005", "health.run", unchecked, "srun: step cancelled"),
    ]
    # Judged by the node and check alone: no subject, value, unit or threshold.
    assert {(j.subject, j.value, j.unit, j.threshold) for j in health.judgements(checked)} == {
        ("", None, "", None)
    }
    verdicts = {node.node: node.verdict for node in checked}
    assert verdicts == {
        "gpu001": Verdict.FAIL,
        "gpu002": Verdict.UNCHECKED,
        "gpu003": Verdict.UNCHECKED,
        "gpu004": Verdict.UNCHECKED,
        "gpu005": Verdict.UNCHECKED,  # one check passed: the rest were not reported
    }
    # Held where it was drained: a campaign resumes only passing nodes.
    assert [n for n, v in verdicts.items() if v in drain.PASSING] == []


def test_active_check_settings_that_cannot_work_are_named():
    """Each by its kind (kiln.setting_kinds), as `kiln inventory check` and the role's
    pre-flight judge them."""
    assert checks.value_problems("health_active_schedule", "Sun *-*-* 03:00:00", {}) == []
    found = {
        name: checks.value_problems(name, value, {})
        for name, value in {
            "health_active_schedule": "daily\nExecStartPre=/bin/true",
            "health_active_minutes": 0,
            "health_active_keep": -1,
            "health_active_nice": 2**31,
            "health_active_reservation": "kiln maint",
        }.items()
    }
    assert found == {
        "health_active_schedule": [
            "health_active_schedule 'daily\\nExecStartPre=/bin/true': must be a systemd "
            "OnCalendar expression on one line, of letters, digits, spaces and * . , : ~ / _ + @ "
            '- (such as "Sun *-*-* 03:00:00")'
        ],
        "health_active_minutes": ["health_active_minutes 0: must be 1 or more"],
        "health_active_keep": ["health_active_keep -1: must be 1 or more"],
        "health_active_nice": [
            "health_active_nice 2147483648: must be a Slurm nice value (-2147483645 to 2147483645)"
        ],
        "health_active_reservation": [
            "health_active_reservation 'kiln maint': may hold only letters, digits, '.', '_' "
            "and '-'"
        ],
    }


SETTINGS = {
    "timeout": 45,
    "check_timeout": 10,
    "prolog_timeout": 10,
    "gpus": "",
    "nvlinks_per_gpu": "",
    "ib_ports": [{"device": "mlx5_0", "port": 1, "rate": 400}],
    "free_space": [{"path": "/tmp", "min_mb": 1024}],
    "mount_check": "",
    "metrics_dir": "/var/lib/prometheus/node-exporter",
    "dcgm_diag_level": 2,
}


def config(gpus: int, nvswitches: int, nvlinks: int) -> dict:
    """health.json as kiln-health reads it, with the parts that follow from the node."""
    return {
        "timeout": 45,
        "check_timeout": 10,
        "prolog_timeout": 10,
        "gpus": gpus,
        "nvswitches": nvswitches,
        "nvlinks_per_gpu": nvlinks,
        "ib_ports": [{"device": "mlx5_0", "port": 1, "rate": 400}],
        "free_space": [{"path": "/tmp", "min_mb": 1024}],
        "munge": True,
        "slurm": True,
        "mount_check": "",
        "metrics_dir": "/var/lib/prometheus/node-exporter",
        "dcgm_diag_level": 2,
        "nvlink_domain": False,
        "imex": False,
    }


def test_node_config_judges_the_nvl72_fabric_and_imex_where_the_node_has_them():
    domain = {"cluster_uuid": "8c1f2a4e-5b3d-4e6f-9a7b-0c1d2e3f4a5b", "clique_id": "32766"}
    fact = {"gpu_count": 4, "gpu_model": "NVIDIA GB200", "nvlink_domain": domain}
    # In an NVLink domain, IMEX not set up (nvidia_driver_imex off): the fabric only.
    assert health_role.node_config(fact, SETTINGS) == {
        **config(4, 0, 0),
        "nvlink_domain": True,
    }
    assert health_role.node_config({**fact, "imex": True}, SETTINGS) == {
        **config(4, 0, 0),
        "nvlink_domain": True,
        "imex": True,
    }


@pytest.mark.parametrize(
    ("model", "nvswitches", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", 6, config(8, 6, 12)),
        ("NVIDIA H100 80GB HBM3", 4, config(8, 4, 18)),
        ("NVIDIA H200", 4, config(8, 4, 18)),
        ("NVIDIA B200", 2, config(8, 2, 18)),
        ("NVIDIA H100 PCIe", 0, config(8, 0, 0)),
    ],
)
def test_node_config_follows_the_nodes_gpu_model(model, nvswitches, expected):
    fact = {"gpu_count": 8, "gpu_model": model, "nvswitch_count": nvswitches}
    assert health_role.node_config(fact, SETTINGS) == expected


def test_an_a100_node_is_not_held_to_18_nvlinks():
    """The role used to expect 18 NVLinks wherever NVSwitches are: HGX A100 has 12, so
    the passive check drained every A100 node."""
    fact = {"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB", "nvswitch_count": 6}
    assert health_role.node_config(fact, SETTINGS)["nvlinks_per_gpu"] == 12


def test_the_operators_counts_win_over_the_nodes():
    fact = {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3", "nvswitch_count": 4}
    settings = {**SETTINGS, "gpus": 4, "nvlinks_per_gpu": 16, "mount_check": "/usr/bin/x"}
    assert health_role.node_config(fact, settings) == {
        **config(4, 4, 16),
        "mount_check": "/usr/bin/x",
    }
    # 0 is a value: NVLinks are not judged even where the model has them.
    assert health_role.node_config(fact, {**settings, "nvlinks_per_gpu": 0})["nvlinks_per_gpu"] == 0


def test_a_node_without_the_gpu_fact_checks_no_gpu():
    assert health_role.node_config({}, SETTINGS) == config(0, 0, 0)


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars_files: [{defaults}, {vars}]
  tasks:
    - ansible.builtin.debug:
        msg: "{{{{ _health_config }}}}"
      vars:
        ansible_local: {{kiln_gpu: {fact}}}
"""


@pytest.mark.parametrize(
    ("model", "expected"),
    [("NVIDIA A100-SXM4-80GB", 12), ("NVIDIA H100 80GB HBM3", 18), ("NVIDIA H100 PCIe", 0)],
)
def test_the_roles_health_json_holds_the_models_nvlinks(model, expected, tmp_path):
    """The role's own variables, rendered by ansible-playbook: on HGX A100 (NVSwitches,
    12 links) the role used to write 18, and the check drained every node."""
    from tests.collection import local_playbook
    from tests.conftest import REPO

    fact = {"gpu_count": 8, "gpu_model": model, "nvswitch_count": 0 if "PCIe" in model else 6}
    role = REPO / "roles" / "health"
    playbook = tmp_path / "show.yml"
    playbook.write_text(
        PLAYBOOK.format(
            defaults=role / "defaults" / "main.yml",
            vars=role / "vars" / "main.yml",
            fact=json.dumps(fact),
        )
    )
    [task] = local_playbook(playbook)["plays"][0]["tasks"]
    assert task["hosts"]["localhost"]["msg"] == {
        **config(8, fact["nvswitch_count"], expected),
        "ib_ports": [],
        "free_space": [
            {"path": "/var/lib/slurm/slurmd", "min_mb": 1024},
            {"path": "/var/lib/enroot", "min_mb": 10240},
            {"path": "/tmp", "min_mb": 1024},
        ],
    }
