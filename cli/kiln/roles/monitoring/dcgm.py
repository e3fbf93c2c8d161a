"""GPU metrics from dcgm-exporter (monitoring_gpu_source: dcgm-exporter): how its DCGM
fields become Kiln's kiln_gpu_* series, so the alert rules, queries, dashboards and
console pages read the same names and units whichever program measured the GPUs.

The one table of the mapping (FIELDS) gives:
- the `dcgm` scrape job's metric_relabel_configs (relabel_configs): dcgm-exporter's
  GPU identity labels under Kiln's names (UUID -> uuid, modelName -> name, pci_bus_id
  -> bus_id, DCGM_FI_DRIVER_VERSION -> driver) and its host label dropped (the target's
  `node` names the host; a containerised exporter reports its container's name);
- Prometheus recording rules (recording_rules), one per Kiln metric: the unit
  conversion (MHz -> Hz, % -> ratio, MiB -> bytes) and the label set Kiln's own series
  have (job, instance, node, gpu). Every DCGM field keeps its own name too, so NVIDIA's
  dashboards and the operator's own queries still work;
- the kiln_gpu_* metrics kiln-metrics leaves out of its GPU file on those hosts
  (from_dcgm), so no series is written twice;
- the lines dcgm-exporter's counters file (its -f option) needs (counters_csv): its
  default file lacks the power limit, ECC and pending-remap fields.

What stays with kiln-metrics on dcgm-exporter hosts: kiln_gpu_xid_errors_total (DCGM's
DCGM_FI_DEV_XID_ERRORS is only the last XID's number, a gauge, not a count of XIDs per
GPU and XID), the temperature ceiling, and any kiln_gpu_* metric not in FIELDS.

Sources: dcgm-exporter's etc/default-counters.csv and its renderer
(internal/pkg/rendermetrics); DCGM's field names as go-dcgm lists them.
"""

from dataclasses import dataclass

SOURCES = ("kiln", "dcgm-exporter")  # monitoring_gpu_source
JOB = "dcgm"  # Prometheus's scrape job of dcgm-exporter
# Kiln's series carry these labels, as the textfile's do (job and instance from the scrape).
_KEEP = "job, instance, node, gpu"
# dcgm-exporter's GPU identity labels -> Kiln's (kiln_gpu_info's). `UUID` is `uuid`
# already when dcgm-exporter runs with --use-old-namespace.
IDENTITY = {
    "UUID": "uuid",
    "modelName": "name",
    "pci_bus_id": "bus_id",
    "DCGM_FI_DRIVER_VERSION": "driver",
}
# Its host label: `Hostname` up to 4.5.3-4.8.2, `hostname` after (its commit d5e5f51).
HOST_LABELS = ("Hostname", "hostname")


def source_problem(value: object) -> str:
    """Why VALUE is no monitoring_gpu_source; "" when it is one."""
    if isinstance(value, str) and value in SOURCES:
        return ""
    return f"{value!r} is not a GPU metrics source ({' or '.join(SOURCES)})"


@dataclass(frozen=True)
class Field:
    dcgm: str  # the DCGM field, as dcgm-exporter names its metric
    unit: str  # its unit in DCGM
    kiln: str  # Kiln's metric (kiln_node.metrics.CATALOGUE)
    factor: float  # to Kiln's unit (Prometheus's base unit)
    default: bool  # in dcgm-exporter's default counters file
    type: str  # its Prometheus type in dcgm-exporter's counters file
    help: str  # its help text there (for counters_csv)


# fmt: off
FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_GPU_TEMP", "C", "kiln_gpu_temperature_celsius", 1, True,
          "gauge", "GPU temperature (in C)."),
    Field("DCGM_FI_DEV_POWER_USAGE", "W", "kiln_gpu_power_watts", 1, True,
          "gauge", "Power draw (in W)."),
    Field("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "W", "kiln_gpu_power_limit_watts", 1, False,
          "gauge", "Enforced power limit (in W)."),
    Field("DCGM_FI_DEV_SM_CLOCK", "MHz", "kiln_gpu_sm_clock_hertz", 1e6, True,
          "gauge", "SM clock frequency (in MHz)."),
    Field("DCGM_FI_DEV_MEM_CLOCK", "MHz", "kiln_gpu_memory_clock_hertz", 1e6, True,
          "gauge", "Memory clock frequency (in MHz)."),
    Field("DCGM_FI_DEV_GPU_UTIL", "%", "kiln_gpu_utilization_ratio", 0.01, True,
          "gauge", "GPU utilization (in %)."),
    Field("DCGM_FI_DEV_FB_USED", "MiB", "kiln_gpu_memory_used_bytes", 1 << 20, True,
          "gauge", "Framebuffer memory used (in MiB)."),
    Field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "errors", "kiln_gpu_ecc_uncorrected_errors", 1,
          False, "counter", "Total number of double-bit volatile ECC errors."),
    Field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "errors", "kiln_gpu_ecc_corrected_errors", 1,
          False, "counter", "Total number of single-bit volatile ECC errors."),
    Field("DCGM_FI_DEV_ROW_REMAP_PENDING", "0/1", "kiln_gpu_remapped_rows_pending", 1, False,
          "gauge", "Whether remapping of rows is pending."),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0/1", "kiln_gpu_remap_failure", 1, True,
          "gauge", "Whether remapping of rows has failed"),
)
# fmt: on
# kiln_gpu_info: one series per GPU with its identity labels, from this field's series
# (any field every GPU reports would do; the temperature is in the default file).
INFO = "kiln_gpu_info"
INFO_FROM = "DCGM_FI_DEV_GPU_TEMP"
DRIVER_FIELD = ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version")


def relabel_configs() -> list[dict]:
    """The `dcgm` job's metric_relabel_configs: identity labels renamed, host label gone.
    A rule copies a label only when it has a value (regex .+), so an exporter that
    already writes `uuid` keeps it."""
    configs: list[dict] = [
        {"source_labels": [source], "regex": "(.+)", "target_label": target}
        for source, target in IDENTITY.items()
    ]
    configs.append({"action": "labeldrop", "regex": "|".join([*IDENTITY, *HOST_LABELS])})
    return configs


def _number(factor: float) -> str:
    return str(int(factor)) if float(factor).is_integer() else repr(factor)


def recording_rules() -> list[dict]:
    """One rule per Kiln metric, in FIELDS' order, then kiln_gpu_info. Each reads the
    field's series of the `dcgm` job only; with MIG, a GPU's instances collapse to their
    largest value (Kiln's metrics are per whole GPU)."""
    found = []
    for field in FIELDS:
        expr = f'max by ({_KEEP}) ({field.dcgm}{{job="{JOB}"}})'
        if field.factor != 1:
            expr = f"{_number(field.factor)} * {expr}"
        found.append({"record": field.kiln, "expr": expr})
    info = f"{_KEEP}, {', '.join(IDENTITY.values())}"
    found.append({"record": INFO, "expr": f'group by ({info}) ({INFO_FROM}{{job="{JOB}"}})'})
    return found


def from_dcgm() -> list[str]:
    """The kiln_gpu_* metrics dcgm-exporter gives (kiln-metrics leaves them out)."""
    return [field.kiln for field in FIELDS] + [INFO]


def counters_csv() -> str:
    """The lines Kiln's mapping needs in dcgm-exporter's counters file, in its format
    (DCGM field, Prometheus type, help): the default file's plus the missing ones."""
    lines = ["# Kiln's GPU metrics (docs/monitoring.md, GPU metrics from DCGM)"]
    lines += [f"{f.dcgm}, {f.type}, {f.help}" for f in FIELDS]
    lines.append(", ".join(DRIVER_FIELD))
    return "\n".join(lines) + "\n"
