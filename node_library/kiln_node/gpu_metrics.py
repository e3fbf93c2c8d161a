"""kiln-metrics' GPU metrics (kiln_gpu.prom): `nvidia-smi -q -x`, `nvidia-smi nvlink -e`
and the kernel's XID lines as the catalogue's kiln_gpu_* series, one set per GPU (label
`gpu`: its index in nvidia-smi's order)."""

from collections import Counter
from collections.abc import Sequence

from kiln_node import metrics, nvidia_smi

# Each per-GPU gauge: the SmiGpu field it reads and the factor to Prometheus's base unit.
_PER_GPU = {
    "kiln_gpu_temperature_celsius": ("temperature_c", 1),
    "kiln_gpu_power_watts": ("power_w", 1),
    "kiln_gpu_power_limit_watts": ("power_limit_w", 1),
    "kiln_gpu_sm_clock_hertz": ("sm_clock_mhz", 1_000_000),
    "kiln_gpu_memory_clock_hertz": ("memory_clock_mhz", 1_000_000),
    "kiln_gpu_utilization_ratio": ("utilization_pct", 0.01),
    "kiln_gpu_memory_used_bytes": ("memory_used_mib", 1 << 20),
    "kiln_gpu_ecc_uncorrected_errors": ("uncorrectable_volatile", 1),
    "kiln_gpu_ecc_corrected_errors": ("correctable_volatile", 1),
    "kiln_gpu_remapped_rows_pending": ("remap_pending", 1),
    "kiln_gpu_remap_failure": ("remap_failure", 1),
}


def pci_slot(address: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI address as nvidia-smi (`00000000:00:06.0`) or the
    kernel's XID line (`0000:00:06`) writes it; None for anything else."""
    try:
        domain, bus, device = address.split(":")
        return int(domain, 16), int(bus, 16), int(device.split(".")[0], 16)
    except ValueError:
        return None


def gauges(
    log: nvidia_smi.SmiLog,
    xids: list[tuple[str, int]],
    node: str,
    ceiling: float | None,
    nvlink: Sequence[nvidia_smi.NvlinkCounter] = (),
) -> list[metrics.Gauge]:
    """The GPU file's gauges, in the catalogue's order. A value nvidia-smi gives as N/A
    has no sample. XIDs count the kernel log's lines since boot, by GPU and XID; a line
    whose address is no GPU's nvidia-smi lists keeps its address as `gpu`. NVLink
    counters in the order `nvidia-smi nvlink -e` printed them (none without NVLink).
    Clock event (throttle) reasons: each one nvidia-smi lists, 1 active and 0 not, so
    a reason's series stays put and a dashboard shows 0 rather than nothing."""
    out = metrics.file_gauges(metrics.GPU)
    index = {pci_slot(g.bus_id): str(i) for i, g in enumerate(log.gpus) if pci_slot(g.bus_id)}
    for i, gpu in enumerate(log.gpus):
        out["kiln_gpu_info"].add(
            1, node=node, gpu=str(i), uuid=gpu.uuid, name=gpu.name, bus_id=gpu.bus_id,
            driver=gpu.driver,
        )  # fmt: skip
        for name, (field, factor) in _PER_GPU.items():
            value = getattr(gpu, field)
            if value is not None:
                out[name].add(round(value * factor, 6), node=node, gpu=str(i))
    if ceiling is not None:
        out["kiln_gpu_temperature_ceiling_celsius"].add(ceiling, node=node)
    counted = Counter((index.get(pci_slot(address), address), xid) for address, xid in xids)
    for (gpu, xid), count in sorted(counted.items()):
        out["kiln_gpu_xid_errors_total"].add(count, node=node, gpu=gpu, xid=str(xid))
    for i, gpu in enumerate(log.gpus):
        for reason, active in gpu.clock_event_states:
            out["kiln_gpu_clock_event_reason"].add(
                int(active), node=node, gpu=str(i), reason=reason
            )
    for c in nvlink:
        out["kiln_gpu_nvlink_errors_total"].add(
            c.value, node=node, gpu=str(c.gpu), link=str(c.link), counter=c.counter
        )
    return list(out.values())
