"""kiln.setting_kinds: each role setting that lands in a file or a command line, judged
by its kind, as `kiln inventory check` (kiln.inventory.checks.value_problems) and each
role's pre-flight (filter kiln_value_problems) judge it. The kinds' text rules are
kiln.formats' (tests/unit/test_formats.py); here, how the table applies them."""

import pytest

from kiln import setting_kinds
from kiln.inventory import checks

NUMBER = "health_active_minutes 0: must be 1 or more"


@pytest.mark.parametrize("value", [1, 60, "60", 10**18])
def test_a_count_is_a_whole_number_in_its_range(value):
    assert checks.value_problems("health_active_minutes", value, {}) == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-5, "-5"),
        ("-5", "'-5'"),
        ("1.5", "'1.5'"),
        ("\u0663", "'\u0663'"),  # a digit to int(), not to a unit file
        ("1" * 5000, "'" + "1" * 76 + "..."),  # int() refuses it; the message is cut
        (" 1", "' 1'"),
    ],
)
def test_anything_else_is_refused_with_its_value_shown_short(value, shown):
    assert checks.value_problems("health_active_minutes", value, {}) == [
        f"health_active_minutes {shown}: must be 1 or more"
    ]


def test_a_port_and_a_range_say_their_bounds():
    assert checks.value_problems("slurm_dbd_port", 0, {}) == [
        "slurm_dbd_port 0: not a port (1-65535)"
    ]
    assert checks.value_problems("monitoring_gpu_temperature_ceiling", 151, {}) == [
        "monitoring_gpu_temperature_ceiling 151: must be 1 to 150 (degrees Celsius)"
    ]
    assert checks.value_problems("health_gpus", 0, {}) == []


def test_a_number_for_a_text_setting_is_judged_as_its_text():
    """Ansible turns 30 into "30" for a str setting: no duration, no path."""
    assert checks.value_problems("monitoring_retention_time", 30, {}) == [
        "monitoring_retention_time 30: is not a Prometheus duration such as 15d, 12h or 1w2d"
    ]
    assert checks.value_problems("monitoring_metrics_dir", 5, {}) == [
        f"monitoring_metrics_dir 5: {setting_kinds.formats.PATH_RULE}"
    ]


def test_lists_mappings_and_fields_name_the_item():
    assert checks.value_problems("validate_scratch_paths", ["/scratch", "/tmp/"], {}) == [
        f"validate_scratch_paths[1] '/tmp/': {setting_kinds.formats.PATH_RULE}"
    ]
    assert checks.value_problems(
        "monitoring_versions", {"prometheus": "2.53.3+ds1-2", "grafana": "11.0 x"}, {}
    ) == [
        "monitoring_versions.grafana '11.0 x': is not an apt version or glob (letters, digits "
        "and . + ~ : * ? -)"
    ]
    assert checks.value_problems("monitoring_versions", {"Prometheus": "1"}, {}) == [
        "monitoring_versions: key 'Prometheus' is not a Debian package name (lower-case "
        "letters, digits and + . -)"
    ]
    assert checks.value_problems(
        "glusterfs_server_volumes", [{"name": "shared", "type": "auto"}, {"name": "a/b"}], {}
    ) == ["glusterfs_server_volumes[1].name 'a/b': may hold only letters, digits, '.', '_' and '-'"]


def test_a_container_of_another_type_is_left_to_the_argument_spec():
    """kiln.inventory.checks gives a check only its kind's type; the argument spec
    reports the rest (one message per mistake)."""
    assert checks.value_problems("validate_scratch_paths", "/scratch", {}) == []
    assert checks.value_problems("monitoring_versions", ["x"], {}) == []
    assert checks.value_problems("glusterfs_server_volumes", ["shared"], {}) == []


def test_empty_means_unset():
    for name, empty in [("nvidia_driver_imex_address", ""), ("monitoring_versions", {})]:
        assert checks.value_problems(name, empty, {}) == []


def test_a_url_with_credentials_is_shown_without_them_even_cut():
    (problem,) = checks.value_problems("enroot_base_url", "https://u:s3cret@m/../x", {})
    assert problem.startswith("enroot_base_url 'https://(secret)@m/../x': expected")
    (problem,) = checks.value_problems("hpcx_url", f"https://u:{'s' * 100}@m/x y", {})
    assert problem.startswith("hpcx_url 'https://(secret)@m/x y': expected")


def test_the_role_pre_flight_reads_the_roles_declared_variables_only():
    """roles/base/tasks/values.yml reads each with the `vars` lookup: a name the role
    has no default for would fail the lookup (validate_schedule is Kiln's, not the
    validate role's)."""
    names = checks.role_variables("validate")
    assert "validate_schedule" not in names and "validate_torch_python" in names
    assert checks.role_variables("glusterfs_server") == [
        "glusterfs_server_brick_root",
        "glusterfs_server_volumes",
    ]
