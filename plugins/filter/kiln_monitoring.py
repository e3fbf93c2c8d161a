"""Filters that give the monitoring role what kiln.roles.monitoring builds from its one query
library: Prometheus's alert rules, Grafana's dashboards and provisioning files, and
Prometheus's console pages."""

from ansible.errors import AnsibleFilterError
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.roles.monitoring import consoles, dashboards, dcgm, rules


def kiln_monitoring_rules(scrape_interval, gpu_source="kiln"):
    """The rules file's text; SCRAPE_INTERVAL: seconds or a duration ("15s"); GPU_SOURCE:
    monitoring_gpu_source (dcgm-exporter adds the recording rules of its fields)."""
    try:
        return rules.rules_text(scrape_interval, gpu_source)
    except ValueError as error:
        raise AnsibleFilterError(f"kiln_monitoring_rules: {error}") from None


def kiln_monitoring_dashboards(datasource_uid=None):
    """{file name: dashboard JSON text}; DATASOURCE_UID: the Prometheus datasource they
    open on (none: the one kiln_monitoring_grafana_provisioning defines)."""
    return dashboards.dashboard_files(datasource_uid or None)


def kiln_monitoring_grafana_provisioning(prometheus_url, dashboards_dir, scrape_interval=15):
    """{path under Grafana's provisioning directory: YAML text}."""
    try:
        return dashboards.provisioning_files(prometheus_url, dashboards_dir, scrape_interval)
    except ValueError as error:
        raise AnsibleFilterError(f"kiln_monitoring_grafana_provisioning: {error}") from None


def kiln_monitoring_consoles(_=None):
    """{file name: console page}, for Prometheus's consoles directory."""
    return consoles.console_pages()


def kiln_monitoring_dcgm_relabel_configs(_=None):
    """The `dcgm` scrape job's metric_relabel_configs (kiln.roles.monitoring.dcgm)."""
    return dcgm.relabel_configs()


def kiln_monitoring_dcgm_metrics(_=None):
    """The kiln_gpu_* metrics dcgm-exporter gives: kiln-metrics leaves them out there."""
    return dcgm.from_dcgm()


class FilterModule:
    def filters(self):
        return {
            "kiln_monitoring_rules": kiln_monitoring_rules,
            "kiln_monitoring_dashboards": kiln_monitoring_dashboards,
            "kiln_monitoring_grafana_provisioning": kiln_monitoring_grafana_provisioning,
            "kiln_monitoring_consoles": kiln_monitoring_consoles,
            "kiln_monitoring_dcgm_relabel_configs": kiln_monitoring_dcgm_relabel_configs,
            "kiln_monitoring_dcgm_metrics": kiln_monitoring_dcgm_metrics,
        }
