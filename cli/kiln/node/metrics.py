"""Metrics for node_exporter's textfile collector: each file written whole, then renamed
into place, so the collector never reads half of one."""

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Gauge:
    name: str
    help: str
    samples: list[tuple[dict[str, str], int | float]] = field(default_factory=list)

    def add(self, value: int | float, **labels: str) -> None:
        self.samples.append((labels, value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def text(gauges: list[Gauge]) -> str:
    """The exposition format: HELP, TYPE, then one line per sample."""
    lines = []
    for gauge in gauges:
        lines += [f"# HELP {gauge.name} {gauge.help}", f"# TYPE {gauge.name} gauge"]
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
