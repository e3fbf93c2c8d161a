"""Prometheus's alert rules for Kiln (the monitoring role writes them to its rules file,
through the filter kiln_monitoring_rules): each alert is a named query of the library
(kiln.roles.monitoring.queries), a severity, a summary and a runbook line naming the `kiln`
command to run next. docs/monitoring.md ("Alerts and what to do") explains each."""

import re
from dataclasses import dataclass

import yaml

from kiln.roles.monitoring import dcgm
from kiln.roles.monitoring.queries import for_nodes, query

GROUP = "kiln"
DCGM_GROUP = "kiln-dcgm"  # recording rules of dcgm-exporter's fields (roles.monitoring.dcgm)
NODE = "{{ $labels.node }}"
_GPU = "{{ $labels.node }} GPU {{ $labels.gpu }}"
_PORT = "{{ $labels.node }} {{ $labels.device }} port {{ $labels.port }}"


@dataclass(frozen=True)
class Alert:
    name: str
    query: str  # a name in kiln.roles.monitoring.queries.QUERIES
    severity: str  # critical: a node or GPU cannot be trusted with jobs; warning: look soon
    summary: str
    runbook: str
    hold: str = ""  # Prometheus's `for:`; "" fires at the first evaluation that matches


# fmt: off
ALERTS: tuple[Alert, ...] = (
    Alert("KilnNodeDrained", "drained_by_kiln", "warning",
          f"{NODE} drained: {{{{ $labels.reason }}}}",
          f"kiln health --nodes {NODE} (a kiln-health: drain is resumed once it passes);"
          f" a kiln: drain: kiln validate --nodes {NODE}; a kiln-active: drain:"
          " kiln health --schedule"),
    Alert("KilnGpuNewXid", "gpu_xid_new", "warning",
          f"{_GPU}: new XID {{{{ $labels.xid }}}} in the kernel log",
          f"kiln health --nodes {NODE} (drains on a critical XID);"
          f" then kiln validate --nodes {NODE}"),
    Alert("KilnGpuUncorrectableEcc", "gpu_ecc_uncorrected_any", "critical",
          f"{_GPU}: {{{{ $value }}}} uncorrectable ECC errors since the driver loaded",
          f"kiln health --nodes {NODE}; after a GPU reset: kiln validate --nodes {NODE}"),
    Alert("KilnIbPortBelowRate", "ib_below_rate", "warning",
          f"{_PORT} runs at {{{{ $value | humanize }}}}B/s, below its expected rate",
          f"kiln health --nodes {NODE}; after reseating the cable:"
          f" kiln validate --nodes {NODE} --suite collectives"),
    Alert("KilnIbPortDown", "ib_down", "critical",
          f"{_PORT} is not active",
          f"kiln health --nodes {NODE}; after fixing the link:"
          f" kiln validate --nodes {NODE} --suite collectives"),
    Alert("KilnIbPortFlapping", "ib_flapping", "warning",
          f"{_PORT}: the link went down {{{{ $value | printf \"%.0f\" }}}} times in the last"
          " hour",
          f"kiln validate --nodes {NODE} --suite collectives (the port's cable or"
          " transceiver if it repeats)"),
    Alert("KilnGpuNvlinkErrors", "gpu_nvlink_errors_growing", "warning",
          f"{_GPU} NVLink {{{{ $labels.link }}}}: {{{{ $value | printf \"%.0f\" }}}}"
          " {{ $labels.counter }} errors in the last hour",
          f"kiln health --nodes {NODE} (drains on XID 74, NVLink);"
          f" kiln validate --nodes {NODE} --suite collectives (the GPU's baseboard or"
          " NVSwitch if the link keeps counting)"),
    Alert("KilnGpuOverTemperature", "gpu_over_ceiling", "critical",
          f"{_GPU} at {{{{ $value }}}} C, over the profile's ceiling",
          f"kiln health --nodes {NODE}; after fixing the cooling:"
          f" kiln burn-in --nodes {NODE} --duration 1h", hold="2m"),
    Alert("KilnJobCheckUnknown", "job_check_unknown", "warning",
          f"{NODE}: the {{{{ $labels.phase }}}} check {{{{ $labels.check }}}} could not run;"
          " jobs start there unchecked",
          f"kiln health --nodes {NODE} (the full check; slurmd's log has the"
          " Prolog's UNKNOWN line)"),
    Alert("KilnActiveCheckStale", "active_check_stale", "warning",
          "No active health check ran in the last 8 days",
          "kiln health --schedule (the controller's kiln-health-active.timer)",
          hold="15m"),
    Alert("KilnRepairBreakerOpen", "repair_breaker_open", "critical",
          "The repair breaker is open: Kiln's automation repairs nothing",
          "kiln repair status (why it opened); kiln repair reset once the cause is fixed"),
    Alert("KilnDrainHeldByBreaker", "drain_held", "critical",
          f"{NODE} fails a check but was not drained: the breaker's cap is reached",
          "kiln repair status; a failure on many nodes at once is shared infrastructure"),
    Alert("KilnNodeRma", "repair_rma", "warning",
          f"{NODE} sent to RMA after repeated failed repairs ({{{{ $labels.failure }}}})",
          f"kiln repair history {NODE}; the evidence bundle's path is in its drain reason"),
    Alert("KilnRepairNeedsPerson", "repair_alert", "warning",
          f"{NODE}: the repair loop stopped and alerted ({{{{ $labels.failure }}}})",
          f"kiln repair history {NODE}"),
    Alert("KilnRepairRepeated", "repair_repeated", "warning",
          "{{ $labels.failure }}: {{ $value | printf \"%.0f\" }} automatic repairs in a day",
          "kiln repair history (one cause behind them: storage, a driver, a rack?)"),
    Alert("KilnGpuRemapFailed", "gpu_remap_failure", "critical",
          f"{_GPU}: a row remap failed; the GPU cannot retire its bad memory rows",
          f"kiln health --nodes {NODE} (drains on the failed remap; the repair loop resets"
          f" the GPU, then sends it to RMA); kiln repair history {NODE}"),
    Alert("KilnGpuThrottled", "gpu_throttled", "warning",
          f"{_GPU}: clocks held down by {{{{ $labels.reason }}}} for 5 minutes",
          f"kiln health --nodes {NODE}; after fixing the cooling or power:"
          f" kiln burn-in --nodes {NODE} --duration 1h", hold="5m"),
    Alert("KilnIbPortErrors", "ib_port_errors_growing", "warning",
          f"{_PORT}: {{{{ $value | printf \"%.0f\" }}}} receive or link integrity errors"
          " in the last hour",
          f"kiln validate --nodes {NODE} --suite collectives (the port's cable or"
          " transceiver if the errors keep growing)"),
    Alert("KilnIbLinkLost", "ib_link_lost", "critical",
          f"{_PORT} was active in the last day and is not now",
          f"kiln health --nodes {NODE}; after fixing the link:"
          f" kiln validate --nodes {NODE} --suite collectives", hold="2m"),
    Alert("KilnSlurmctldDown", "slurmctld_down", "critical",
          f"slurmctld ({{{{ $labels.role }}}}) on {NODE} does not answer scontrol ping",
          f"kiln provision --limit {NODE} --tags slurm (starts slurmctld as configured;"
          " its journal says why it stopped)", hold="1m"),
    Alert("KilnFilesystemFull", "node_filesystem_full", "warning",
          f"{NODE} {{{{ $labels.mountpoint }}}}: {{{{ $value | humanizePercentage }}}} free",
          f"kiln health --nodes {NODE} (its free_space check drains a compute node below"
          " the health floors); free the space: Kiln repairs no full disk", hold="5m"),
    Alert("KilnNodeDrainedByOther", "drained_by_others", "warning",
          f"{NODE} drained by someone else: {{{{ $labels.reason }}}}",
          f"kiln health --nodes {NODE} (what Kiln's checks find now; Kiln never resumes"
          " another's drain: scontrol update nodename=NODE state=resume once it is fixed)",
          hold="15m"),
    Alert("KilnMetricsStale", "metrics_stale", "warning",
          f"{NODE}: kiln-metrics' {{{{ with $labels.file }}}}{{{{ . }}}}{{{{ else }}}}run"
          "{{ end }} is stale; the GPU, IB and Slurm alerts there go quiet",
          f"kiln provision --limit {NODE} --tags monitoring (reinstalls and starts"
          " kiln-metrics.timer; journalctl -u kiln-metrics says why it failed)", hold="5m"),
    Alert("KilnTargetDown", "targets_down", "critical",
          "{{ $labels.job }} on "
          "{{ with $labels.node }}{{ . }}{{ else }}{{ $labels.instance }}{{ end }}"
          " cannot be scraped",
          "kiln health --nodes {{ $labels.node }} (exit 3: the node is unreachable);"
          " kiln provision --limit {{ $labels.node }} --tags monitoring"),
)
# fmt: on

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(interval: int | str) -> float:
    """A scrape interval: seconds, or a Prometheus duration ("15s", "1m30s")."""
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0:
        return interval
    text = str(interval).strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {interval!r} (seconds, or e.g. 15s, 1m)")
    total = sum(int(n) * _SECONDS[u] for n, u in parts)
    if total <= 0:
        raise ValueError(f"not a duration: {interval!r} (more than 0 s)")
    return total


def _duration(value: float) -> str:
    value = int(value)
    return f"{value // 60}m" if value % 60 == 0 else f"{value}s"


def rules(scrape_interval: int | str = 15, gpu_source: str = "kiln") -> dict:
    """The rules file as data. A target is down once three scrapes in a row failed (at
    least a minute), so one lost scrape does not page anyone. With GPU_SOURCE
    dcgm-exporter, a second group records Kiln's GPU metrics from its fields."""
    if why := dcgm.source_problem(gpu_source):
        raise ValueError(why)
    target_down = _duration(max(60, 3 * seconds(scrape_interval)))
    entries = []
    for alert in ALERTS:
        hold = target_down if alert.name == "KilnTargetDown" else alert.hold
        entries.append(
            {
                "alert": alert.name,
                "expr": for_nodes(query(alert.query).expr),
                **({"for": hold} if hold else {}),
                "labels": {"severity": alert.severity},
                "annotations": {"summary": alert.summary, "runbook": alert.runbook},
            }
        )
    groups = [{"name": GROUP, "rules": entries}]
    if gpu_source == "dcgm-exporter":
        groups.append({"name": DCGM_GROUP, "rules": dcgm.recording_rules()})
    return {"groups": groups}


def rules_text(scrape_interval: int | str = 15, gpu_source: str = "kiln") -> str:
    """The rules file as Prometheus reads it (`promtool check rules` passes)."""
    header = "# Kiln's alert rules, generated by kiln.roles.monitoring.rules: do not edit.\n"
    data = rules(scrape_interval, gpu_source)
    return header + yaml.safe_dump(data, sort_keys=False, width=1000)
