"""kiln-metrics' InfiniBand metrics (kiln_ib.prom): each port under
/sys/class/infiniband (`DEVICE/ports/N/state` `4: ACTIVE`, `rate` `400 Gb/sec (4X NDR)`,
`counters/link_downed`...), and the rate the health settings expect of it."""

import re
from dataclasses import dataclass, field
from pathlib import Path

from kiln_node import metrics, node_files

ROOT = "/sys/class/infiniband"
# The port counters kiln-metrics reports: sysfs file -> metric.
COUNTERS = {
    "link_downed": "kiln_ib_port_link_downed_total",
    "link_error_recovery": "kiln_ib_port_link_error_recovery_total",
    "symbol_error": "kiln_ib_port_symbol_errors_total",
}
GBIT = 1_000_000_000 // 8  # bytes per second in one Gb/s


@dataclass(frozen=True)
class Port:
    device: str
    port: str
    state: str  # the state's name: ACTIVE, DOWN, INIT...
    rate_gbps: float | None
    counters: dict[str, int] = field(default_factory=dict)  # sysfs counter name -> value


def _number(text: str | None) -> float | None:
    match = re.match(r"\s*(\d+(?:\.\d+)?)", text or "")
    return float(match.group(1)) if match else None


def read_ports(root: str = ROOT) -> list[Port]:
    """Every port of every device, by device then port number; [] without InfiniBand."""
    found = []
    for where in sorted(Path(root).glob("*/ports/*"), key=_port_order):
        counters = {}
        for name in COUNTERS:
            value = _number(node_files.read(str(where / "counters" / name)))
            if value is not None:
                counters[name] = int(value)
        found.append(
            Port(
                device=where.parent.parent.name,
                port=where.name,
                state=(node_files.read(str(where / "state")) or "").split(":")[-1].strip(),
                rate_gbps=_number(node_files.read(str(where / "rate"))),
                counters=counters,
            )
        )
    return found


def _port_order(where: Path) -> tuple[str, int]:
    return where.parent.parent.name, int(_number(where.name) or 0)


def expected_ports(entries: list[dict]) -> list[tuple[str, str, float]]:
    """(device, port, rate in Gb/s) of each of the health settings' ports ({device,
    port (default 1), rate}). Raises ValueError on an entry without them."""
    try:
        return [(str(e["device"]), str(e.get("port", 1)), float(e["rate"])) for e in entries]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(
            f"ib_ports: each port needs a device and a rate in Gb/s ({exc!r})"
        ) from exc


def gauges(ports: list[Port], expected: list[dict], node: str) -> list[metrics.Gauge]:
    """The IB file's gauges, in the catalogue's order. `expected`: the health settings'
    ports (expected_ports); one of them that sysfs lacks is a port that is not active
    (0), so its alert fires rather than its series vanishing."""
    out = metrics.file_gauges(metrics.IB)
    wanted = expected_ports(expected)
    present = {(p.device, p.port) for p in ports}
    missing = [Port(d, p, "MISSING", None) for d, p, _ in wanted if (d, p) not in present]
    for port in [*ports, *missing]:
        labels = {"node": node, "device": port.device, "port": port.port}
        out["kiln_ib_port_active"].add(1 if port.state == "ACTIVE" else 0, **labels)
        if port.rate_gbps is not None:
            out["kiln_ib_port_rate_bytes_per_second"].add(port.rate_gbps * GBIT, **labels)
        for counter, value in port.counters.items():
            out[COUNTERS[counter]].add(value, **labels)
    for device, port, rate in wanted:
        labels = {"node": node, "device": device, "port": port}
        out["kiln_ib_port_expected_rate_bytes_per_second"].add(rate * GBIT, **labels)
    return list(out.values())
