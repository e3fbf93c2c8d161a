"""The query library: every PromQL expression Kiln's alert rules, Grafana dashboards and
Prometheus console pages show, by name, so a panel and the rule it explains read the
same series.

An expression that looks at chosen nodes carries the matcher `node=~"$node"`: Grafana
fills `$node` from its dashboard variable, a console page from its URL;
`for_nodes` fills it in or removes it. Every metric an expression names is in
kiln_node.metrics.CATALOGUE or in EXTERNAL (node_exporter's and Prometheus's own), as
`metric_names` reads it: tests/unit/test_monitoring_rules.py fails on any other name.
"""

import re
from dataclasses import dataclass

from kiln_node.metrics import CATALOGUE

# Metrics Kiln does not write that the queries name: Prometheus's own and node_exporter's.
EXTERNAL = frozenset(
    {
        "up",  # Prometheus: 1 when the last scrape of a target worked
        "ALERTS",  # Prometheus: each pending or firing alert as a series
        "node_load1",
        "node_cpu_seconds_total",
        "node_memory_MemAvailable_bytes",
        "node_memory_MemTotal_bytes",
        "node_filesystem_avail_bytes",
        "node_filesystem_size_bytes",
        "node_filesystem_readonly",  # 1 for a filesystem mounted read-only
        # node_exporter's infiniband collector (/sys/class/infiniband), labels device, port
        "node_infiniband_state_id",  # 1 down, 2 init, 3 armed, 4 active, 5 active defer
        "node_infiniband_port_errors_received_total",  # PortRcvErrors: bad packets in
        "node_infiniband_local_link_integrity_errors_total",
        "node_infiniband_port_data_received_bytes_total",
        "node_infiniband_port_data_transmitted_bytes_total",
        "node_textfile_scrape_error",  # 1 when a .prom file of the collector did not parse
        "node_textfile_mtime_seconds",  # each .prom file's modification time
        "node_boot_time_seconds",
    }
)

NODE = 'node=~"$node"'
# The filesystems node_exporter reports that can fill: tmpfs too (/run, a pyxis runtime
# path), not an image's read-only layers. node_exporter already leaves out /dev, /proc,
# /sys and the pseudo filesystems.
FILESYSTEMS = 'fstype!~"overlay|squashfs"'
# Clock event reasons that mean the hardware or the driver's thermal guard holds the
# clocks down (kiln_node.gpu_checks' HW_SLOWDOWNS and the software thermal one); the
# power cap under full load and an idle GPU's low clocks are normal.
THROTTLES = "hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown|sw_thermal_slowdown"
# kiln-metrics is stale past this many of its intervals.
STALE_INTERVALS = 5


@dataclass(frozen=True)
class Query:
    name: str
    expr: str
    title: str
    unit: str = "short"  # Grafana's unit id: celsius, watt, hertz, bytes, Bps, s, percentunit
    legend: str = ""  # Grafana's legend format, e.g. "{{node}} GPU {{gpu}}"


def _q(name: str, expr: str, title: str, unit: str = "short", legend: str = "") -> Query:
    return Query(name, " ".join(expr.split()), title, unit, legend)


_GPU = "{{node}} GPU {{gpu}}"
# Less than 5% free on a filesystem that can be written (kiln-health's free_space floors
# judge the compute nodes' own paths; this sees every node, the controller's Prometheus
# and slurmctld state too).
_FULL = (
    f"node_filesystem_avail_bytes{{{FILESYSTEMS}}} / node_filesystem_size_bytes"
    f"{{{FILESYSTEMS}}} < 0.05 and node_filesystem_readonly == 0"
)
# kiln-metrics stale: no run for STALE_INTERVALS of its intervals; one of its source
# files not rewritten for as long (a source that keeps failing: its alerts would go
# quiet); or a node scraped whose kiln-metrics never wrote.
_STALE = (
    f"time() - kiln_metrics_last_run_timestamp_seconds"
    f" > {STALE_INTERVALS} * kiln_metrics_interval_seconds"
    f' or time() - node_textfile_mtime_seconds{{file=~".*/kiln_(gpu|ib|slurm|slurmctld)'
    f'[.]prom"}} > on (node) group_left {STALE_INTERVALS} * kiln_metrics_interval_seconds'
    f' or up{{job="node"}} == 1 unless on (node) kiln_metrics_last_run_timestamp_seconds'
)
_PORT = "{{node}} {{device}}/{{port}}"

# fmt: off
QUERIES: dict[str, Query] = {q.name: q for q in (
    # targets and alerts
    _q("targets_up", f"up{{{NODE}}}", "Scrape targets up", legend="{{node}} {{job}}"),
    # Each node once, whatever number of targets it has (the server has three).
    _q("nodes", "count by (node) (up)", "Nodes", legend="{{node}}"),
    _q("targets_down", "up == 0", "Scrape targets down", legend="{{node}} {{job}}"),
    # Counts answer 0, not nothing, when no series matches.
    _q("targets_up_count", f"count(up{{{NODE}}} == 1) or vector(0)", "Targets up"),
    _q("targets_count", f"count(up{{{NODE}}}) or vector(0)", "Targets scraped"),
    _q("alerts_firing", 'count by (alertname) (ALERTS{alertstate="firing"})',
       "Alerts firing", legend="{{alertname}}"),
    _q("alerts_firing_by_node",
       f'count by (node, alertname) (ALERTS{{alertstate="firing",{NODE}}})',
       "Alerts firing by node", legend="{{node}} {{alertname}}"),
    # Slurm, from the first controller
    _q("slurm_node_states", f"count by (state) (kiln_slurm_node_state{{{NODE}}})",
       "Nodes by Slurm state", legend="{{state}}"),
    _q("slurm_node_state", f"kiln_slurm_node_state{{{NODE}}}", "Slurm state",
       legend="{{node}} {{state}}"),
    _q("slurm_jobs", "sum by (state) (kiln_slurm_jobs)", "Jobs in the queue",
       legend="{{state}}"),
    _q("slurm_jobs_pending", 'sum(kiln_slurm_jobs{state="PENDING"}) or vector(0)',
       "Jobs pending"),
    _q("slurm_jobs_running", 'sum(kiln_slurm_jobs{state="RUNNING"}) or vector(0)',
       "Jobs running"),
    _q("drained_by_kiln", f"kiln_slurm_node_drain_info{{{NODE}}}", "Nodes drained by Kiln",
       legend="{{node}} {{by}}: {{reason}}"),
    _q("drained_by_kiln_count",
       f"count(kiln_slurm_node_drain_info{{{NODE}}}) or vector(0)", "Nodes drained by Kiln"),
    # Drains Kiln did not set (an operator's, Slurm's own such as "Kill task failed"):
    # Kiln never resumes them, so a forgotten one keeps a node out for good.
    _q("drained_by_others", f"kiln_slurm_node_drain_other_info{{{NODE}}}",
       "Nodes drained by others", legend="{{node}}: {{reason}}"),
    _q("drained_by_others_count",
       f"count(kiln_slurm_node_drain_other_info{{{NODE}}}) or vector(0)",
       "Nodes drained by others"),
    # each slurmctld as `scontrol ping` on the first controller sees it
    _q("slurmctld_up", "kiln_slurm_controller_up", "slurmctld answering",
       legend="{{node}} ({{role}})"),
    _q("slurmctld_down", "kiln_slurm_controller_up == 0", "slurmctld not answering",
       legend="{{node}} ({{role}})"),
    # Kiln's checks: kiln-health (passive), the active check, validate and burn-in
    _q("health_check", f"kiln_health_check{{{NODE}}}", "Node check (1 pass, 0 fail)",
       legend="{{node}} {{check}}"),
    _q("health_failing", f"kiln_health_check{{{NODE}}} == 0", "Node checks failing",
       legend="{{node}} {{check}}"),
    _q("health_last_run_age", f"time() - kiln_health_last_run_timestamp_seconds{{{NODE}}}",
       "Since the node check ran", "s", "{{node}}"),
    # kiln-prolog, at each job's start and end (phase): -1 is a check that could not run
    _q("job_check_unknown", f"kiln_health_job_check{{{NODE}}} == -1",
       "Job-edge checks that could not run", legend="{{node}} {{phase}} {{check}}"),
    _q("job_check_duration", f"kiln_health_job_check_duration_seconds{{{NODE}}}",
       "Job-edge check time", "s", "{{node}} {{phase}}"),
    _q("job_check_last_run_age",
       f"time() - kiln_health_job_check_last_run_timestamp_seconds{{{NODE}}}",
       "Since the job-edge check ran", "s", "{{node}} {{phase}}"),
    _q("active_check", f"kiln_health_active_check{{{NODE}}}",
       "Active check (1 pass, 0 fail)", legend="{{node}} {{check}}"),
    _q("active_last_run_age", "time() - max(kiln_health_active_last_run_timestamp_seconds)",
       "Since the active check ran", "s"),
    _q("active_check_stale",
       "time() - max(kiln_health_active_last_run_timestamp_seconds) > 8 * 86400"
       " or absent(kiln_health_active_last_run_timestamp_seconds)",
       "Active check older than 8 days, or never seen", "s"),
    # the repair loop (kiln-repair on the first controller) and kiln-health's breaker
    _q("repair_actions", "sum by (failure, step, outcome) (kiln_repair_actions_total)",
       "Repair actions", legend="{{failure}} {{step}} {{outcome}}"),
    _q("repair_breaker_open", "kiln_repair_breaker_open == 1", "Repair breaker open"),
    _q("drain_held", f"kiln_health_drain_held{{{NODE}}} == 1",
       "Failing nodes not drained (breaker cap)", legend="{{node}}"),
    # Only while the node is still out: kiln-repair writes its file on Slurm's events,
    # and a node resumed by a person (or by kiln-health) makes none.
    _q("repair_rma",
       f"kiln_repair_rma{{{NODE}}} == 1 and on(node) kiln_slurm_node_out_of_service == 1",
       "Nodes sent to RMA", legend="{{node}} {{failure}}"),
    _q("repair_alert",
       f"kiln_repair_alert{{{NODE}}} == 1 and on(node) kiln_slurm_node_out_of_service == 1",
       "Repairs waiting for a person", legend="{{node}} {{failure}}"),
    _q("repair_repeated",
       'sum by (failure) (increase(kiln_repair_actions_total{step="return"}[1d])) >= 3',
       "Repairs of one class in a day", legend="{{failure}}"),
    _q("repair_time", f"kiln_repair_time_to_repair_seconds{{{NODE}}}",
       "Time to repair, last episode", "s", "{{node}}"),
    _q("detect_time", f"kiln_health_time_to_detect_seconds{{{NODE}}}",
       "Time to detect, last drain (at most)", "s", "{{node}}"),
    _q("health_pass_age", f"time() - kiln_health_last_pass_timestamp_seconds{{{NODE}}}",
       "Since the node check last passed", "s", "{{node}}"),
    _q("repair_last_run_age", "time() - kiln_repair_last_run_timestamp_seconds",
       "Since the repair program ran", "s"),
    _q("result_verdicts", "count by (campaign, verdict) (kiln_result_verdict)",
       "Verdicts of the last runs", legend="{{campaign}} {{verdict}}"),
    _q("result_verdict", f"kiln_result_verdict{{{NODE}}}", "Verdict of the last run",
       legend="{{campaign}} {{node}} {{verdict}}"),
    _q("result_last_run_age", "time() - kiln_result_last_run_timestamp_seconds",
       "Since the last run", "s", "{{campaign}}"),
    _q("result_busbw", f"kiln_result_busbw_bytes_per_second{{{NODE}}}",
       "NCCL bus bandwidth, last run", "Bps", "{{campaign}} {{node}} {{test}}"),
    _q("result_flops", f"kiln_result_flops_per_second{{{NODE}}}",
       "Matmul rate, last run", "flops", "{{campaign}} {{node}} {{test}}"),
    _q("result_storage", f"kiln_result_storage_bytes_per_second{{{NODE}}}",
       "Storage throughput, last run", "Bps", "{{campaign}} {{node}} {{test}}"),
    # GPUs, from kiln-metrics on each GPU node
    _q("gpu_info", f"kiln_gpu_info{{{NODE}}}", "GPUs",
       legend="{{node}} GPU {{gpu}} {{name}} {{bus_id}} driver {{driver}}"),
    _q("gpu_temperature", f"kiln_gpu_temperature_celsius{{{NODE}}}", "GPU temperature",
       "celsius", _GPU),
    _q("gpu_temperature_ceiling", f"kiln_gpu_temperature_ceiling_celsius{{{NODE}}}",
       "Temperature ceiling", "celsius", "{{node}} ceiling"),
    _q("gpu_over_ceiling",
       "kiln_gpu_temperature_celsius > on (node) group_left"
       " kiln_gpu_temperature_ceiling_celsius",
       "GPUs over the temperature ceiling", "celsius", _GPU),
    _q("gpu_power", f"kiln_gpu_power_watts{{{NODE}}}", "GPU power", "watt", _GPU),
    _q("gpu_power_limit", f"kiln_gpu_power_limit_watts{{{NODE}}}", "GPU power limit",
       "watt", _GPU),
    _q("gpu_sm_clock", f"kiln_gpu_sm_clock_hertz{{{NODE}}}", "SM clock", "hertz", _GPU),
    _q("gpu_memory_clock", f"kiln_gpu_memory_clock_hertz{{{NODE}}}", "Memory clock",
       "hertz", _GPU),
    _q("gpu_utilization", f"kiln_gpu_utilization_ratio{{{NODE}}}", "GPU utilization",
       "percentunit", _GPU),
    _q("gpu_memory_used", f"kiln_gpu_memory_used_bytes{{{NODE}}}", "GPU memory used",
       "bytes", _GPU),
    _q("gpu_ecc_uncorrected", f"kiln_gpu_ecc_uncorrected_errors{{{NODE}}}",
       "Uncorrectable ECC errors (volatile)", legend=_GPU),
    _q("gpu_ecc_uncorrected_any", "kiln_gpu_ecc_uncorrected_errors > 0",
       "GPUs with uncorrectable ECC errors", legend=_GPU),
    _q("gpu_ecc_corrected", f"kiln_gpu_ecc_corrected_errors{{{NODE}}}",
       "Correctable ECC errors (volatile)", legend=_GPU),
    _q("gpu_remap_failure", "kiln_gpu_remap_failure == 1", "GPUs whose row remap failed",
       legend=_GPU),
    _q("gpu_remap_failed", f"kiln_gpu_remap_failure{{{NODE}}}", "Row remap failed (1 yes)",
       legend=_GPU),
    # every reason but idle, 0 or 1: which one holds each GPU's clocks down
    _q("gpu_clock_events", f'kiln_gpu_clock_event_reason{{reason!="gpu_idle",{NODE}}}',
       "GPU clock event (throttle) reasons, 1 active", legend=_GPU + " {{reason}}"),
    _q("gpu_throttled", f'kiln_gpu_clock_event_reason{{reason=~"{THROTTLES}"}} == 1',
       "GPUs held down by a hardware or thermal slowdown", legend=_GPU + " {{reason}}"),
    _q("gpu_remap_pending", f"kiln_gpu_remapped_rows_pending{{{NODE}}}",
       "Row remap waiting for a reset", legend=_GPU),
    _q("gpu_xids", f"sum by (node, gpu, xid) (kiln_gpu_xid_errors_total{{{NODE}}})",
       "XIDs since boot", legend="{{node}} GPU {{gpu}} XID {{xid}}"),
    # More XIDs than an hour ago: a count that grew, or a GPU/XID pair that is new (its
    # series starts above 0, which increase() would not see). A reboot resets the count.
    _q("gpu_xid_new",
       "kiln_gpu_xid_errors_total > (kiln_gpu_xid_errors_total offset 1h"
       " or kiln_gpu_xid_errors_total * 0)",
       "GPUs with new XIDs in the last hour", legend="{{node}} GPU {{gpu}} XID {{xid}}"),
    # NVLink, from kiln-metrics' `nvidia-smi nvlink -e` (no series without NVLink)
    _q("gpu_nvlink_errors",
       f"sum by (node, gpu, link, counter)"
       f" (rate(kiln_gpu_nvlink_errors_total{{{NODE}}}[5m]))",
       "NVLink errors per second", "ops", "{{node}} GPU {{gpu}} link {{link}} {{counter}}"),
    # The link-level error counters (any CRC name older drivers print) that grew.
    _q("gpu_nvlink_errors_growing",
       'increase(kiln_gpu_nvlink_errors_total{counter=~"replay|recovery|crc.*"}[1h]) > 0',
       "NVLink links whose replay, recovery or CRC errors grew in the last hour",
       legend="{{node}} GPU {{gpu}} link {{link}} {{counter}}"),
    # InfiniBand ports, from kiln-metrics on each node with ports
    _q("ib_active", f"kiln_ib_port_active{{{NODE}}}", "IB port active", legend=_PORT),
    _q("ib_rate", f"kiln_ib_port_rate_bytes_per_second{{{NODE}}}", "IB port rate", "Bps",
       _PORT),
    _q("ib_below_rate",
       "kiln_ib_port_rate_bytes_per_second < on (node, device, port) group_left"
       " kiln_ib_port_expected_rate_bytes_per_second",
       "IB ports below their expected rate", "Bps", _PORT),
    # Only the ports the health settings expect: a spare port may well be down.
    _q("ib_down",
       "kiln_ib_port_active == 0 and on (node, device, port)"
       " kiln_ib_port_expected_rate_bytes_per_second",
       "Expected IB ports not active", legend=_PORT),
    _q("ib_link_downed", f"increase(kiln_ib_port_link_downed_total{{{NODE}}}[1h])",
       "IB link down events per hour", legend=_PORT),
    _q("ib_flapping", "increase(kiln_ib_port_link_downed_total[1h]) > 0",
       "IB ports whose link went down in the last hour", legend=_PORT),
    _q("ib_symbol_errors", f"increase(kiln_ib_port_symbol_errors_total{{{NODE}}}[1h])",
       "IB symbol errors per hour", legend=_PORT),
    _q("ib_link_error_recovery",
       f"increase(kiln_ib_port_link_error_recovery_total{{{NODE}}}[1h])",
       "IB link error recoveries per hour", legend=_PORT),
    # every port, from node_exporter's infiniband collector (no series without InfiniBand)
    _q("ib_port_state", f"node_infiniband_state_id{{{NODE}}}", "IB port state", legend=_PORT),
    _q("ib_port_errors",
       f"increase(node_infiniband_port_errors_received_total{{{NODE}}}[1h])",
       "IB packets received with errors per hour", legend=_PORT),
    _q("ib_port_traffic",
       f"rate(node_infiniband_port_data_received_bytes_total{{{NODE}}}[5m])"
       f" + rate(node_infiniband_port_data_transmitted_bytes_total{{{NODE}}}[5m])",
       "IB port traffic, both ways", "Bps", _PORT),
    # Receive or link integrity errors that grew: a cable, transceiver or port going bad.
    _q("ib_port_errors_growing",
       "increase(node_infiniband_port_errors_received_total[1h]) > 0"
       " or increase(node_infiniband_local_link_integrity_errors_total[1h]) > 0",
       "IB ports whose receive or link integrity errors grew in the last hour",
       legend=_PORT),
    # A port that was ACTIVE in the last day and is not now: any port, where Kiln's
    # ib_down sees only those the health settings expect.
    _q("ib_link_lost",
       "node_infiniband_state_id != 4 and max_over_time(node_infiniband_state_id[1d]) == 4",
       "IB ports active in the last day that are not now", legend=_PORT),
    # the node itself, from node_exporter
    _q("node_load", f"node_load1{{{NODE}}}", "Load (1 min)", legend="{{node}}"),
    _q("node_cpu_busy",
       f'1 - avg by (node) (rate(node_cpu_seconds_total{{mode="idle",{NODE}}}[5m]))',
       "CPU busy", "percentunit", "{{node}}"),
    _q("node_memory_used",
       f"1 - node_memory_MemAvailable_bytes{{{NODE}}} / node_memory_MemTotal_bytes{{{NODE}}}",
       "Memory used", "percentunit", "{{node}}"),
    _q("node_filesystem_used",
       f"1 - node_filesystem_avail_bytes{{{FILESYSTEMS},{NODE}}}"
       f" / node_filesystem_size_bytes{{{FILESYSTEMS},{NODE}}}",
       "Filesystem used", "percentunit", "{{node}} {{mountpoint}}"),
    _q("node_filesystem_avail", f"node_filesystem_avail_bytes{{{FILESYSTEMS},{NODE}}}",
       "Filesystem space free", "bytes", "{{node}} {{mountpoint}}"),
    _q("node_filesystem_full", _FULL, "Filesystems under 5% free", "percentunit",
       "{{node}} {{mountpoint}}"),
    _q("node_filesystem_full_count", f"count({_FULL}) or vector(0)",
       "Filesystems under 5% free"),
    _q("node_uptime", f"time() - node_boot_time_seconds{{{NODE}}}", "Uptime", "s",
       "{{node}}"),
    _q("textfile_errors", f"node_textfile_scrape_error{{{NODE}}}",
       "Textfile collector errors (1: a .prom file did not parse)", legend="{{node}}"),
    # node_exporter's `file` is the file's whole path
    _q("textfile_age", f'time() - node_textfile_mtime_seconds{{file=~".*/kiln_.*",{NODE}}}',
       "Age of Kiln's metric files", "s", "{{node}} {{file}}"),
    # kiln-metrics itself: when it last ran, against its own interval
    _q("metrics_last_run_age",
       f"time() - kiln_metrics_last_run_timestamp_seconds{{{NODE}}}",
       "Since kiln-metrics ran", "s", "{{node}}"),
    _q("metrics_stale", _STALE, "kiln-metrics runs or files gone stale", "s",
       "{{node}} {{file}}"),
    _q("metrics_stale_count", f"count({_STALE}) or vector(0)",
       "kiln-metrics runs or files gone stale"),
)}
# fmt: on


def query(name: str) -> Query:
    return QUERIES[name]


def for_nodes(expr: str, nodes: str | None = None) -> str:
    """EXPR for the nodes whose names match the regex NODES; None: every node, the
    matcher gone (a rule, or a page of the whole cluster)."""
    if nodes is not None:
        return expr.replace("$node", nodes)
    return expr.replace(f"{{{NODE}}}", "").replace(f",{NODE}", "").replace(f"{NODE},", "")


# PromQL words that are not metric names where an identifier can stand.
_KEYWORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
     "offset", "bool", "atan2", "inf", "nan", "sum", "min", "max", "avg", "group", "stddev",
     "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk",
     "limit_ratio"}
)  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|' r"'(?:[^'\\]|\\.)*'|`[^`]*`")
_BRACES = re.compile(r"\{[^{}]*\}")  # label matchers (strings already removed)
_RANGE = re.compile(r"\[[^\]]*\]")  # [5m], [1h:1m]
_GROUPING = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", re.IGNORECASE
)
_IDENT = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_DURATION = re.compile(r"^\d")


def metric_names(expr: str) -> set[str]:
    """The metric names EXPR reads: identifiers that are neither keywords, functions
    (followed by "("), label names nor durations."""
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    found = set()
    for match in _IDENT.finditer(text):
        word, call = match.groups()
        if call or word.lower() in _KEYWORDS:
            continue
        found.add(word)
    return found


def unknown_metrics(expr: str) -> set[str]:
    """Metric names in EXPR that neither Kiln nor node_exporter/Prometheus write."""
    return metric_names(expr) - set(CATALOGUE) - EXTERNAL
