"""Metrics for node_exporter's textfile collector: every metric Kiln writes, in one
catalogue (CATALOGUE), and the files, each written whole, then renamed into place, so
the collector never reads half of one.

The naming scheme (docs/monitoring.md): `kiln_<area>_<quantity>_<base unit>`, with
Prometheus's base units (seconds, celsius, watts, hertz, bytes; rates in bytes per
second, as promtool asks) and `_total` on counters; a 0/1 gauge for a pass or a state; a
gauge of 1 whose labels carry text (a state, a reason, a verdict). Every series of a
node carries `node`, its Slurm (inventory) name: `instance` is only the exporter's
address. The areas:

- `kiln_health_*`: kiln-health, the passive check (each compute node), and the
  scheduled active check (`kiln_health_active_*`, the first controller);
- `kiln_gpu_*`, `kiln_ib_*`: kiln-metrics on each GPU node, from nvidia-smi (`-q -x`
  and `nvlink -e`), the kernel's XID lines and the InfiniBand ports' sysfs counters;
- `kiln_slurm_*`: kiln-metrics on the first controller, from scontrol and squeue;
- `kiln_result_*`: the last `kiln validate` and `kiln burn-in` (label `campaign`),
  written on the first controller when the run acts in Slurm.

Dashboards and alert rules (kiln.roles.monitoring) name metrics only from here and from
node_exporter and Prometheus themselves: a unit test fails on any other name.
"""

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Metric:
    name: str
    help: str
    labels: tuple[str, ...]
    file: str  # the textfile it is written to, under the collector's directory
    type: str = "gauge"  # or "counter" (names ending in _total)

    def gauge(self) -> "Gauge":
        return Gauge(self.name, self.help, type=self.type, labels=self.labels)


def _m(name: str, help: str, labels: str, file: str) -> Metric:
    return Metric(
        name, help, tuple(labels.split()), file, "counter" if name.endswith("_total") else "gauge"
    )


HEALTH = "kiln_health.prom"
HEALTH_ACTIVE = "kiln_health_active.prom"
HEALTH_JOB = "kiln_health_{phase}.prom"  # kiln-prolog: one file per phase, prolog and epilog
GPU = "kiln_gpu.prom"
IB = "kiln_ib.prom"
SLURM = "kiln_slurm.prom"
RESULTS = "kiln_result_{campaign}.prom"
REPAIR = "kiln_repair.prom"  # one file per campaign: validate, burn_in
SLURMCTLD = "kiln_slurmctld.prom"  # apart from SLURM: written when slurmctld does not answer
RUN = "kiln_metrics.prom"  # kiln-metrics' own run, written at every run whatever it read

# fmt: off
CATALOGUE: dict[str, Metric] = {m.name: m for m in (
    # kiln-health (Slurm's HealthCheckProgram), each compute node
    _m("kiln_health_check", "1 when Kiln's node check passed (OK or WARN), 0 when it failed.",
       "node check", HEALTH),
    _m("kiln_health_drain_held", "1 when a failing check did not drain the node: the repair "
       "breaker's cap was reached.", "node", HEALTH),
    _m("kiln_health_last_run_timestamp_seconds", "When Kiln's node check last ran.",
       "node", HEALTH),
    _m("kiln_health_last_pass_timestamp_seconds", "When Kiln's node check last passed "
       "(every check OK or WARN).", "node", HEALTH),
    _m("kiln_health_time_to_detect_seconds", "At the node check's last drain: seconds "
       "since its last pass, the most a fault went unseen (at most the interval).", "node",
       HEALTH),
    # kiln-prolog (Slurm's Prolog and Epilog), each compute node
    _m("kiln_health_job_check", "Kiln's check at a job's start or end (phase): 1 passed (OK "
       "or WARN), 0 failed, -1 could not run (UNKNOWN: the job started).",
       "node phase check", HEALTH_JOB),
    _m("kiln_health_job_check_duration_seconds", "How long the last job-edge check took.",
       "node phase", HEALTH_JOB),
    _m("kiln_health_job_check_last_run_timestamp_seconds", "When the job-edge check last ran.",
       "node phase", HEALTH_JOB),
    # kiln-health-active (its timer), the first controller
    _m("kiln_health_active_check", "1 when the scheduled active check passed, 0 when not.",
       "node check", HEALTH_ACTIVE),
    _m("kiln_health_active_last_run_timestamp_seconds", "When the active check last ran.",
       "", HEALTH_ACTIVE),
    # kiln-metrics, each GPU node: nvidia-smi -q -x, nvidia-smi nvlink -e and the kernel's
    # XID lines
    _m("kiln_gpu_info", "1 for each GPU, its identity in labels.",
       "node gpu uuid name bus_id driver", GPU),
    _m("kiln_gpu_temperature_celsius", "GPU core temperature.", "node gpu", GPU),
    _m("kiln_gpu_temperature_ceiling_celsius",
       "The validation profile's GPU temperature ceiling for this node.", "node", GPU),
    _m("kiln_gpu_power_watts", "GPU power draw.", "node gpu", GPU),
    _m("kiln_gpu_power_limit_watts", "GPU enforced power limit.", "node gpu", GPU),
    _m("kiln_gpu_sm_clock_hertz", "GPU SM clock.", "node gpu", GPU),
    _m("kiln_gpu_memory_clock_hertz", "GPU memory clock.", "node gpu", GPU),
    _m("kiln_gpu_utilization_ratio", "GPU busy share of the last sample period (0-1).",
       "node gpu", GPU),
    _m("kiln_gpu_memory_used_bytes", "GPU frame buffer memory in use.", "node gpu", GPU),
    _m("kiln_gpu_ecc_uncorrected_errors", "Volatile uncorrectable ECC errors since the "
       "driver loaded.", "node gpu", GPU),
    _m("kiln_gpu_ecc_corrected_errors", "Volatile correctable ECC errors since the driver "
       "loaded.", "node gpu", GPU),
    _m("kiln_gpu_remapped_rows_pending", "1 when a row remap waits for a GPU reset.",
       "node gpu", GPU),
    _m("kiln_gpu_remap_failure", "1 when a row remap failed.", "node gpu", GPU),
    _m("kiln_gpu_clock_event_reason", "1 while the clock event (throttle) reason holds the "
       "GPU's clocks down, 0 when not; one series per reason nvidia-smi lists.",
       "node gpu reason", GPU),
    _m("kiln_gpu_xid_errors_total", "XID lines in the kernel log since boot, by GPU and XID.",
       "node gpu xid", GPU),
    _m("kiln_gpu_nvlink_errors_total", "NVLink error counters (nvidia-smi nvlink -e), by "
       "GPU, link and counter.", "node gpu link counter", GPU),
    # kiln-metrics, each node with InfiniBand ports: /sys/class/infiniband
    _m("kiln_ib_port_active", "1 when the port's state is ACTIVE.", "node device port", IB),
    _m("kiln_ib_port_rate_bytes_per_second", "The port's link rate.", "node device port", IB),
    _m("kiln_ib_port_expected_rate_bytes_per_second",
       "The rate the health settings expect of the port (health_ib_ports).",
       "node device port", IB),
    _m("kiln_ib_port_link_downed_total", "Times the port's link went down.",
       "node device port", IB),
    _m("kiln_ib_port_link_error_recovery_total", "The port's link error recoveries.",
       "node device port", IB),
    _m("kiln_ib_port_symbol_errors_total", "The port's symbol errors.",
       "node device port", IB),
    # kiln-metrics --slurm, the first controller
    _m("kiln_slurm_node_state", "1 for each node, its Slurm state in `state`.",
       "node state", SLURM),
    _m("kiln_slurm_node_out_of_service", "1 for each node that runs no new job (drained, "
       "down, failed, not responding or rebooting), 0 for one in service.", "node", SLURM),
    _m("kiln_slurm_node_drain_info", "1 for each node a Kiln program drained, with its "
       "reason and the program (`by`).", "node by reason", SLURM),
    _m("kiln_slurm_node_drain_other_info", "1 for each node drained by anyone but Kiln's "
       "programs (an operator, Slurm itself), with its reason.", "node reason", SLURM),
    _m("kiln_slurm_jobs", "Jobs in Slurm's queue, by state.", "state", SLURM),
    _m("kiln_slurm_controller_up", "1 when the slurmctld answered `scontrol ping`, 0 when "
       "not, by controller (node) and its role (primary, backup...).", "node role",
       SLURMCTLD),
    # kiln-metrics itself, each node
    _m("kiln_metrics_last_run_timestamp_seconds", "When kiln-metrics last ran.", "node", RUN),
    _m("kiln_metrics_interval_seconds", "How often kiln-metrics runs (its timer).", "node",
       RUN),
    # kiln-repair, the first controller: from its history and the breaker's file
    _m("kiln_repair_actions_total", "The repair loop's actions, by failure class, step and "
       "outcome.", "failure step outcome", REPAIR),
    _m("kiln_repair_breaker_open", "1 while the repair breaker is open (`kiln repair "
       "reset` closes it).", "", REPAIR),
    _m("kiln_repair_rma", "1 for each node the repair loop sent to RMA.", "node failure",
       REPAIR),
    _m("kiln_repair_alert", "1 for each node whose last repair action was an alert.",
       "node failure", REPAIR),
    _m("kiln_repair_time_to_repair_seconds", "A node's last automatic repair: its first "
       "action to its return to service.", "node", REPAIR),
    _m("kiln_repair_last_run_timestamp_seconds", "When the repair program last ran.", "",
       REPAIR),
    # the last kiln validate / burn-in, the first controller
    _m("kiln_result_verdict", "1 for each node of the campaign's last run, its verdict in "
       "`verdict`.", "campaign node verdict", RESULTS),
    _m("kiln_result_last_run_timestamp_seconds", "When the campaign's last run finished.",
       "campaign", RESULTS),
    _m("kiln_result_busbw_bytes_per_second", "NCCL bus bandwidth at the large-message "
       "plateau, last run.", "campaign node test", RESULTS),
    _m("kiln_result_flops_per_second", "GPU matmul rate, last run.", "campaign node test",
       RESULTS),
    _m("kiln_result_storage_bytes_per_second", "Storage throughput (fio), last run.",
       "campaign node test", RESULTS),
)}
# fmt: on


@dataclass
class Gauge:
    """One metric's samples (a counter too: `type`). Made from CATALOGUE's entry
    (`CATALOGUE[name].gauge()`), which fixes its labels."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], int | float]] = field(default_factory=list)
    type: str = "gauge"
    labels: tuple[str, ...] | None = None  # None: any

    def add(self, value: int | float, **labels: str) -> None:
        if self.labels is not None and tuple(labels) != self.labels:
            raise ValueError(f"{self.name} takes labels {self.labels}, not {tuple(labels)}")
        self.samples.append((labels, value))


def gauge(name: str) -> Gauge:
    """An empty Gauge for CATALOGUE's metric `name`."""
    return CATALOGUE[name].gauge()


def file_gauges(file: str) -> dict[str, Gauge]:
    """An empty Gauge for each metric of textfile `file` (GPU, IB...), by name, in the
    catalogue's order: the order the file lists them in."""
    return {name: metric.gauge() for name, metric in CATALOGUE.items() if metric.file == file}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def text(gauges: list[Gauge]) -> str:
    """The exposition format: HELP, TYPE, then one line per sample."""
    lines = []
    for gauge in gauges:
        lines += [f"# HELP {gauge.name} {gauge.help}", f"# TYPE {gauge.name} {gauge.type}"]
        for labels, value in gauge.samples:
            pairs = ",".join(f'{k}="{_label(str(v))}"' for k, v in labels.items())
            lines.append(f"{gauge.name}{{{pairs}}}" if pairs else gauge.name)
            lines[-1] += f" {_value(value)}"
    return "\n".join(lines) + "\n"


def write(directory: str, name: str, gauges: list[Gauge]) -> None:
    """DIRECTORY/NAME (e.g. kiln_health.prom), made whole beside it, then renamed."""
    target = Path(directory) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".prom.tmp")
    partial.write_text(text(gauges))
    partial.replace(target)
