"""What one node's burn-in stress brought back for a round (roles/validate/files/
kiln-burn-stress), parsed: TFLOP/s per device and interval, nvidia-smi's samples, and the
error counters read before and after the round. nvidia-smi's CSV is parsed by its
header, as it prints it (units in the values, "[N/A]" where a field does not apply),
by kiln_node.nvidia_smi, which also names each XID from NVIDIA's catalogue."""

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime

from kiln_node import nvidia_smi

# Clock-event reasons that mean the GPU is slowed by heat or a power brake. The SW
# power cap is not one: a GPU at full load sits at its power limit (recorded on a
# healthy H100: active the whole time).
THROTTLES = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "sw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
TIMESTAMP = "%Y/%m/%d %H:%M:%S.%f"


@dataclass
class Sample:
    t: float  # seconds since the round started on the node
    temperature_c: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    throttles: list[str]  # THROTTLES active in this sample


@dataclass
class Device:
    name: str
    intervals: list[tuple[float, float]]  # (seconds since the burn-in started, TFLOP/s)
    samples: list[Sample] = field(default_factory=list)
    error: str = ""

    @property
    def tflops(self) -> float | None:
        """The round's figure: the median interval (a first interval that includes the
        warm-up or a last short one does not move it)."""
        values = [v for _, v in self.intervals]
        return float(f"{statistics.median(values):.5g}") if values else None  # 5 digits


@dataclass
class NodeRound:
    node: str
    devices: dict[str, Device]
    new_errors: list[str]  # "gpu 3: 2 new uncorrectable ECC errors", "XID 79 on 0000:..."
    started: float = 0.0  # the node's clock (epoch seconds) when the round's stress began
    error: str = ""  # why the node has no figures this round


def number(text: str) -> float | None:
    """'692.89 W' -> 692.89; '[N/A]', 'N/A', '', 'nan', 'inf' -> None (no reading: NaN
    passes every comparison)."""
    head = text.strip().split(" ")[0]
    try:
        value = float(head)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


rows = nvidia_smi.parse_csv


def parse_samples(text: str, started_local: str) -> dict[str, list[Sample]]:
    """The samples per GPU index, timed from `started_local` (the node's local clock,
    which is what nvidia-smi's timestamps are in). Without an index field (one GPU, as
    recorded by hand) every sample is GPU 0's."""
    start = datetime.strptime(started_local, TIMESTAMP)
    found: dict[str, list[Sample]] = {}
    for row in rows(text):
        try:
            t = (datetime.strptime(row["timestamp"], TIMESTAMP) - start).total_seconds()
        except (KeyError, ValueError):
            continue  # a line cut short when the sampler was stopped
        found.setdefault(row.get("index", "0"), []).append(
            Sample(
                t=round(t, 2),
                temperature_c=number(row.get("temperature.gpu", "")),
                power_w=number(row.get("power.draw", "")),
                sm_clock_mhz=number(row.get("clocks.current.sm", "")),
                throttles=[
                    r for r in THROTTLES if row.get(f"clocks_event_reasons.{r}") == "Active"
                ],
            )
        )
    return found


def new_errors(before: dict, after: dict) -> list[str]:
    """What the round added to the GPUs' error records: uncorrectable ECC errors,
    remapped rows (uncorrectable, pending, failed) and kernel XID lines."""
    found = []
    old = {r.get("index"): r for r in rows(before.get("ecc", ""))}
    for row in rows(after.get("ecc", "")):
        key = "ecc.errors.uncorrected.volatile.total"
        grew = _grew(old.get(row.get("index"), {}).get(key), row.get(key))
        if grew:
            found.append(f"gpu {row.get('index')}: {grew:g} new uncorrectable ECC errors")
    old = {r.get("gpu_bus_id"): r for r in rows(before.get("remapped", ""))}
    for row in rows(after.get("remapped", "")):
        for kind in ("uncorrectable", "pending", "failure"):
            key = f"remapped_rows.{kind}"
            grew = _grew(old.get(row.get("gpu_bus_id"), {}).get(key), row.get(key))
            if grew:
                found.append(f"gpu {row.get('gpu_bus_id')}: remapped rows {kind} +{grew:g}")
    # Every new XID fails the node, the application class too: the only application on
    # the GPUs is Kiln's own stress, in a reservation, and a fault from a known-good
    # workload points at the GPU or its driver.
    seen = set(before.get("xids", []))
    for line in after.get("xids", []):
        if line not in seen:
            found += [
                f"{nvidia_smi.xid_name(x)} on PCI:{pci}" for pci, x in nvidia_smi.parse_xids(line)
            ]
    return found


def _grew(old: str | None, new: str | None) -> float:
    """How much a counter grew; a counter that reads 'Yes'/'No' (pending, failure)
    counts 1 when it turns Yes."""

    def value(text: str | None) -> float:
        if text in ("Yes", "No"):
            return 1.0 if text == "Yes" else 0.0
        return number(text or "") or 0.0

    return max(0.0, value(new) - value(old))


def read_node(node: str, data: dict) -> NodeRound:
    """One node's round from the stress program's JSON."""
    samples = {}
    if data.get("samples"):
        samples = parse_samples(data["samples"], data.get("started_local", ""))
    devices = {
        index: Device(
            name=str(d.get("name", "")),
            intervals=[  # a NaN or infinite figure is none
                (float(t), float(v))
                for t, v in d.get("intervals", [])
                if math.isfinite(float(t)) and math.isfinite(float(v))
            ],
            samples=samples.get(index, []),
            error=str(d.get("error", "")),
        )
        for index, d in (data.get("devices") or {}).items()
    }
    return NodeRound(
        node=node,
        devices=devices,
        new_errors=new_errors(data.get("before") or {}, data.get("after") or {}),
        started=float(data.get("started", 0.0)),
        error=str(data.get("error", "")),
    )
