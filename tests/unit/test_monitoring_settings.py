"""The monitoring role's settings as `kiln inventory check` and the role's pre-flight
judge them (kiln.roles.monitoring.settings through kiln.inventory.checks)."""

import pytest

from kiln.inventory import checks
from kiln.roles.monitoring import settings

GROUPS = {"slurm_controller": ["ctl1"], "slurm_compute": ["gpu001", "gpu002"]}


@pytest.mark.parametrize("value", ["15d", "12h", "1w2d", "1y", "90m", "30s", "100ms", "1d12h"])
def test_prometheus_durations_pass(value):
    assert checks.value_problems("monitoring_retention_time", value, GROUPS) == []


@pytest.mark.parametrize("value", ["15 days", "2d1w", "0s", "0", "15", "1.5d", "15D", "-1d"])
def test_anything_else_is_not_a_retention(value):
    assert checks.value_problems("monitoring_retention_time", value, GROUPS) == [
        f"monitoring_retention_time {value!r}: {settings.DURATION_RULE}"
    ]


OTHER_SHA = "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae"


def test_the_scrape_interval_is_a_duration_too():
    assert checks.value_problems("monitoring_scrape_interval", "30 s", GROUPS) == [
        f"monitoring_scrape_interval '30 s': {settings.DURATION_RULE}"
    ]


@pytest.mark.parametrize("value", ["512MB", "50GB", "1TB", "100B"])
def test_retention_sizes_pass(value):
    assert checks.value_problems("monitoring_retention_size", value, GROUPS) == []


@pytest.mark.parametrize("value", ["50G", "50 GB", "0GB", "50GiB", "lots"])
def test_anything_else_is_not_a_size(value):
    assert checks.value_problems("monitoring_retention_size", value, GROUPS) == [
        f"monitoring_retention_size {value!r}: {settings.SIZE_RULE}"
    ]


def test_scrape_targets_are_inventory_hosts():
    assert checks.value_problems("monitoring_scrape_hosts", ["ctl1", "gpu002"], GROUPS) == []
    assert checks.value_problems(
        "monitoring_scrape_hosts", ["ctl1", "gpu003", "db.example.com"], GROUPS
    ) == ["monitoring_scrape_hosts: 'gpu003', 'db.example.com' are not hosts in the inventory"]
    assert checks.value_problems("monitoring_scrape_hosts", ["gpu9"], GROUPS) == [
        "monitoring_scrape_hosts: 'gpu9' is not a host in the inventory"
    ]


def test_values_on_the_command_line_are_one_word():
    assert checks.value_problems(
        "monitoring_listen_address", "10.0.0.1 --web.enable-admin-api", GROUPS
    ) == [
        "monitoring_listen_address '10.0.0.1 --web.enable-admin-api': must be one word of"
        " printable ASCII: no spaces, line breaks, '\"', '#' or '\\'"
    ]
    assert checks.value_problems("monitoring_storage_path", "/srv/prometheus", GROUPS) == []


def test_a_mirror_is_a_url():
    assert (
        checks.value_problems("monitoring_repository_url", "http://mirror:3142/debian", GROUPS)
        == []
    )
    (problem,) = checks.value_problems("monitoring_repository_url", "mirror debian", GROUPS)
    assert problem.startswith("monitoring_repository_url 'mirror debian': expected a URL")


def test_grafana_needs_its_keys_sha256():
    """Grafana's repository key is trusted by its sha256 alone: without one (or with
    something else), monitoring_grafana is refused; without Grafana, nothing is asked."""
    needs = [
        "monitoring_grafana needs monitoring_grafana_repository_key_sha256: the repository's "
        "signing key's sha256 (64 hex digits)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    assert settings.settings_problems({"grafana": True}) == needs
    assert settings.settings_problems(
        {"grafana": True, "grafana_repository_key_sha256": "A" * 64}
    ) == [
        f"monitoring_grafana_repository_key_sha256 {'A' * 64!r} is not a sha256 (64 hex "
        "digits, lower case)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    assert (
        settings.settings_problems(
            {
                "grafana": True,
                "grafana_repository_key_sha256": OTHER_SHA,
            }
        )
        == []
    )
    assert settings.settings_problems({"grafana": False}) == []
