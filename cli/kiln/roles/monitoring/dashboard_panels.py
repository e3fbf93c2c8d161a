"""Kiln's Grafana dashboards as data: each dashboard a list of panels, each panel one or
more named queries of the library (kiln.roles.monitoring.queries, the one the alert rules
read). kiln.roles.monitoring.grafana_build makes Grafana's JSON of them,
kiln.roles.monitoring.consoles Prometheus's console pages."""

from dataclasses import dataclass

from kiln.roles.monitoring.queries import query

WIDTH = 24  # Grafana's grid columns
# The node variable's choices: every node a target carries (the role labels each).
NODE_VALUES = "label_values(up, node)"


@dataclass(frozen=True)
class Panel:
    queries: tuple[str, ...]
    kind: str = "timeseries"  # or stat (one number), table (the series now, as rows)
    width: int = 12
    height: int = 8
    title: str = ""  # "": the first query's title


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    one_node: bool = False  # the node variable picks one node, not any set of them


def _stat(name: str, width: int = 4) -> Panel:
    return Panel((name,), "stat", width, 4)


def _table(name: str, width: int = 12) -> Panel:
    return Panel((name,), "table", width)


# No "estimated FLOP/s" panel (utilization x the last measured matmul rate): nvidia-smi's
# utilization is the share of time any kernel ran, not the tensor cores' throughput, so
# the product reads as a measurement it is not. The measured rate is shown as measured
# (result_flops, "Matmul rate, last run"), beside the utilization.
# fmt: off
DASHBOARDS: tuple[Dashboard, ...] = (
    Dashboard("kiln-overview", "Kiln: cluster overview",
              "Targets, alerts, Slurm's view of the nodes and what Kiln drained.", (
        _stat("targets_up_count"), _stat("targets_count"), _stat("drained_by_kiln_count"),
        _stat("slurm_jobs_running"), _stat("slurm_jobs_pending"),
        _stat("active_last_run_age"),
        _stat("slurmctld_up", 6), _stat("drained_by_others_count", 6),
        _stat("node_filesystem_full_count", 6),
        _stat("metrics_stale_count", 6),
        _table("alerts_firing_by_node"), _table("drained_by_kiln"),
        Panel(("slurm_node_states",)), _table("drained_by_others"),
        Panel(("gpu_temperature",)), _table("health_failing"),
    )),
    Dashboard("kiln-node", "Kiln: node detail",
              "One node: its load, GPUs, InfiniBand ports, checks and metric files.", (
        _stat("node_uptime"), _stat("slurm_node_state"), _stat("textfile_errors"),
        _stat("metrics_last_run_age"), Panel(("node_load",), width=8),
        Panel(("node_cpu_busy",), width=8),
        Panel(("node_memory_used",), width=8), Panel(("node_filesystem_used",)),
        Panel(("textfile_age",)), _table("gpu_info", 24),
        Panel(("gpu_temperature", "gpu_temperature_ceiling"), title="GPU temperature"),
        Panel(("gpu_power", "gpu_power_limit"), title="GPU power"),
        Panel(("gpu_sm_clock",)), Panel(("gpu_memory_clock",)),
        Panel(("gpu_utilization",)), Panel(("gpu_memory_used",)),
        Panel(("gpu_ecc_uncorrected", "gpu_ecc_corrected"), title="GPU ECC errors"),
        Panel(("gpu_xids",)), Panel(("gpu_clock_events",)), Panel(("gpu_remap_failed",)),
        Panel(("ib_rate",)), Panel(("ib_link_downed",)),
        Panel(("ib_port_state",)), Panel(("ib_port_errors",)),
        Panel(("health_check",)), _table("drained_by_kiln"),
    ), one_node=True),
    Dashboard("kiln-gpu-fabric", "Kiln: GPU fleet and fabric",
              "Every GPU, NVLink and InfiniBand port: the last measured matmul rate, heat, "
              "power, clocks and what holds them down, errors and link flaps.", (
        Panel(("result_flops",), width=24), _table("gpu_info", 24),
        Panel(("gpu_temperature",)), Panel(("gpu_power",)),
        Panel(("gpu_utilization",)), Panel(("gpu_sm_clock",)),
        Panel(("gpu_clock_events",)), Panel(("gpu_remap_failed",)),
        Panel(("gpu_ecc_uncorrected",)), Panel(("gpu_xids",)),
        Panel(("gpu_remap_pending",)), Panel(("gpu_nvlink_errors",)),
        Panel(("ib_active",)), Panel(("ib_port_state",)),
        Panel(("ib_rate",)), Panel(("ib_port_traffic",)),
        Panel(("ib_link_downed",)), Panel(("ib_port_errors",)),
        Panel(("ib_symbol_errors",)), Panel(("ib_link_error_recovery",)),
    )),
    Dashboard("kiln-slurm", "Kiln: Slurm queue",
              "The queue by job state and the nodes by Slurm state, from the controller.", (
        _stat("slurm_jobs_running"), _stat("slurm_jobs_pending"),
        _stat("drained_by_kiln_count"), _stat("drained_by_others_count"),
        _stat("slurmctld_up", 8),
        Panel(("slurm_jobs",)), Panel(("slurm_node_states",)),
        _table("drained_by_kiln"), _table("drained_by_others"),
        _table("slurm_node_state", 24),
    )),
    Dashboard("kiln-checks", "Kiln: checks",
              "Kiln's node check, the scheduled active check and the last validate and "
              "burn-in: verdicts over time and when each last ran.", (
        _stat("active_last_run_age"), _stat("drained_by_kiln_count"),
        Panel(("result_last_run_age",), "stat", 8, 4),
        _stat("metrics_last_run_age", 8),
        Panel(("result_verdicts",)), _table("result_verdict"),
        Panel(("health_check",)), _table("health_failing"),
        Panel(("health_last_run_age",)), Panel(("active_check",)),
        Panel(("result_busbw",), width=8), Panel(("result_flops",), width=8),
        Panel(("result_storage",), width=8),
        Panel(("detect_time", "repair_time"), title="Time to detect and to repair", width=8),
        Panel(("health_pass_age",), width=8), Panel(("repair_actions",), width=8),
    )),
)
# fmt: on


def panel_title(panel: Panel) -> str:
    return panel.title or query(panel.queries[0]).title
