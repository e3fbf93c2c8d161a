"""How a dashboard panel shows a query of the library (kiln.roles.monitoring.queries):
the thresholds and colours where a threshold exists (most of them the alert rules' own),
the value mappings that turn 0/1 and state numbers into words, the range of a ratio.
The unit is the query's own (Query.unit). kiln.roles.monitoring.grafana_build turns this
into Grafana's field config."""

from dataclasses import dataclass

from kiln.roles.monitoring.queries import STALE_INTERVALS

GREEN, ORANGE, RED, BLUE = "green", "orange", "red", "blue"


@dataclass(frozen=True)
class Display:
    # The base colour, then (value, colour) from which on each applies.
    thresholds: tuple[str | tuple[float, str], ...] = ()
    # A number as a word, and its colour: (value, text, colour).
    mappings: tuple[tuple[int, str, str], ...] = ()
    # A text value coloured by the first pattern it matches: (regex, colour).
    patterns: tuple[tuple[str, str], ...] = ()
    # A stat of this label's text (the series as a table row), not of the number.
    text_label: str = ""
    low: float | None = None
    high: float | None = None


_PASS_FAIL = ((1, "pass", GREEN), (0, "fail", RED), (-1, "could not run", ORANGE))
_NONE_IS_GOOD = (GREEN, (1, ORANGE))
_RATIO = {"low": 0.0, "high": 1.0}
# Slurm's state words (IDLE+DRAIN, DOWN+NOT_RESPONDING, MIXED...), worst first.
SLURM_STATES = (
    (r".*(DOWN|FAIL|NOT_RESPONDING).*", RED),
    (r".*(DRAIN|MAINT|REBOOT).*", ORANGE),
    (r"(ALLOCATED|MIXED|COMPLETING).*", BLUE),
    (r"IDLE.*", GREEN),
)
# node_exporter's infiniband state_id
_IB_STATES = (
    (1, "down", RED), (2, "init", ORANGE), (3, "armed", ORANGE), (4, "active", GREEN),
    (5, "active defer", ORANGE),
)  # fmt: skip

# fmt: off
DISPLAY: dict[str, Display] = {
    "drained_by_kiln_count": Display(_NONE_IS_GOOD),
    "drained_by_others_count": Display(_NONE_IS_GOOD),
    "node_filesystem_full_count": Display((GREEN, (1, RED))),
    "metrics_stale_count": Display(_NONE_IS_GOOD),
    "targets_up_count": Display((RED, (1, GREEN))),
    # KilnActiveCheckStale's 8 days
    "active_last_run_age": Display((GREEN, (8 * 86400, RED))),
    "slurmctld_up": Display((RED, (1, GREEN)), ((1, "UP", GREEN), (0, "DOWN", RED))),
    "slurm_node_state": Display(patterns=SLURM_STATES, text_label="state"),
    "health_check": Display((RED, (1, GREEN)), _PASS_FAIL),
    "health_failing": Display((RED,), _PASS_FAIL),
    "active_check": Display((RED, (1, GREEN)), _PASS_FAIL),
    "textfile_errors": Display((GREEN, (1, RED)), ((0, "parsed", GREEN),
                                                   (1, "did not parse", RED))),
    "gpu_ecc_uncorrected": Display((GREEN, (1, RED))),
    "gpu_remap_pending": Display((GREEN, (1, ORANGE)), ((0, "no", GREEN),
                                                        (1, "pending", ORANGE))),
    "gpu_remap_failed": Display((GREEN, (1, RED)), ((0, "no", GREEN), (1, "failed", RED))),
    "gpu_clock_events": Display(_NONE_IS_GOOD, ((0, "not active", GREEN),
                                                (1, "active", ORANGE)), low=0, high=1),
    "gpu_utilization": Display(**_RATIO),
    "ib_active": Display((RED, (1, GREEN)), ((0, "down", RED), (1, "active", GREEN))),
    "ib_port_state": Display((RED, (2, ORANGE), (4, GREEN), (5, ORANGE)), _IB_STATES),
    "ib_port_errors": Display(_NONE_IS_GOOD),
    "node_cpu_busy": Display(**_RATIO),
    "node_memory_used": Display((GREEN, (0.9, ORANGE)), **_RATIO),
    # KilnFilesystemFull fires under 5% free
    "node_filesystem_used": Display((GREEN, (0.85, ORANGE), (0.95, RED)), **_RATIO),
}
# fmt: on

# kiln-metrics' own age: stale past STALE_INTERVALS of its default 30 s interval
DISPLAY["metrics_last_run_age"] = Display((GREEN, (STALE_INTERVALS * 30, RED)))


def display(name: str) -> Display:
    return DISPLAY.get(name, Display())
