"""The burn-in rules, round by round, on what the stress brought back
(kiln.validation.burn_in_samples): a GPU fails when its TFLOP/s falls more than the
profile's drop below its own first round or below the fleet's median for the round (or
under the profile's floor), when it throttles for heat or a power brake, when it runs
hotter than the ceiling, and a node fails on new XIDs, ECC errors or remapped rows."""

import statistics
from dataclasses import dataclass

from kiln.validation.burn_in_samples import NodeRound
from kiln.validation.verdicts import Judgement, Verdict, fmt


@dataclass(frozen=True)
class Limits:
    drop_percent: float
    tflops_min: float
    temperature_max_c: float
    throttle_percent: float

    @classmethod
    def from_profile(cls, settings: dict) -> "Limits":
        return cls(
            float(settings["drop_percent"]),
            float(settings["tflops_min"]),
            float(settings["temperature_max_c"]),
            float(settings["throttle_percent"]),
        )


def device_label(index: str) -> str:
    return "cpu" if index == "cpu" else f"gpu {index}"


def judge_round(
    index: int,
    found: dict[str, NodeRound | None],
    first: dict[tuple[str, str], tuple[int, float]],
    limits: Limits,
) -> list[Judgement]:
    """Round `index`'s judgements. `found` has every node under test (None: it brought
    nothing back); `first` holds each device's first figure and its round, and gains
    the devices that report one for the first time."""
    figures = [
        d.tflops for n in found.values() if n for d in n.devices.values() if d.tflops is not None
    ]
    median = statistics.median(figures) if figures else None
    judgements = []
    for node, result in sorted(found.items()):
        where = f"round {index}"
        if result is None or result.error or not result.devices:
            why = (result.error if result else "") or "no stress result came back"
            judgements.append(
                Judgement(node, "burn_in.stress", where, None, "", Verdict.FAIL, f"{where}: {why}")
            )
            continue
        for device, data in sorted(result.devices.items()):
            subject = f"{device_label(device)}, {where}"
            if data.error or data.tflops is None:
                why = data.error or "no figure"
                judgements.append(
                    Judgement(
                        node, "burn_in.stress", subject, None, "", Verdict.FAIL, f"{subject}: {why}"
                    )
                )
                continue
            first.setdefault((node, device), (index, data.tflops))
            judgements.append(
                _throughput(node, subject, data.tflops, first[(node, device)], median, limits)
            )
            judgements += _samples(node, subject, data.samples, limits)
        if result.new_errors:
            judgements.append(
                Judgement(
                    node,
                    "burn_in.errors",
                    where,
                    float(len(result.new_errors)),
                    "",
                    Verdict.FAIL,
                    f"{where}: " + "; ".join(result.new_errors),
                )
            )
    return judgements


def _throughput(
    node: str,
    subject: str,
    value: float,
    first: tuple[int, float],
    median: float | None,
    limits: Limits,
) -> Judgement:
    keep = 1 - limits.drop_percent / 100
    first_round, first_value = first
    floors = [(first_value * keep, f"its round {first_round} ({fmt(first_value)})")]
    if median is not None:
        floors.append((median * keep, f"the fleet median ({fmt(median)})"))
    if limits.tflops_min:
        floors.append((limits.tflops_min, "the profile's floor"))
    under = [(floor, what) for floor, what in floors if value < floor]
    reasons = []
    for floor, what in under:
        if what == "the profile's floor":
            reasons.append(f"under the profile's floor of {fmt(floor)}")
        else:
            reasons.append(f"{(1 - value / (floor / keep)) * 100:.0f}% below {what}")
    return Judgement(
        node,
        "burn_in.tflops",
        subject,
        value,
        "TFLOP/s",
        Verdict.FAIL if under else Verdict.PASS,
        f"{subject}: {fmt(value)} TFLOP/s" + (", " + " and ".join(reasons) if reasons else ""),
        float(f"{max(floor for floor, _ in floors):.5g}"),
    )


def _samples(node: str, subject: str, samples: list, limits: Limits) -> list[Judgement]:
    """Temperature and throttling over the round's nvidia-smi samples (none on CPU)."""
    if not samples:
        return []
    out = []
    temperatures = [s.temperature_c for s in samples if s.temperature_c is not None]
    if temperatures:
        hottest = max(temperatures)
        hot = hottest > limits.temperature_max_c
        out.append(
            Judgement(
                node,
                "burn_in.temperature_c",
                subject,
                hottest,
                "C",
                Verdict.FAIL if hot else Verdict.PASS,
                f"{subject}: reached {fmt(hottest)} C"
                + (f", over the ceiling of {fmt(limits.temperature_max_c)} C" if hot else ""),
                limits.temperature_max_c,
            )
        )
    throttled = [s for s in samples if s.throttles]
    percent = len(throttled) / len(samples) * 100
    bad = percent > limits.throttle_percent
    reasons = sorted({r for s in throttled for r in s.throttles})
    why = f"{subject}: throttled in {percent:.0f}% of {len(samples)} samples"
    out.append(
        Judgement(
            node,
            "burn_in.throttle_percent",
            subject,
            round(percent, 1),
            "%",
            Verdict.FAIL if bad else Verdict.PASS,
            why + (f" ({', '.join(reasons)})" if reasons else ""),
            limits.throttle_percent,
        )
    )
    return out


def first_failures(judgements: list[Judgement], nodes: list[str]) -> dict[str, list[str]]:
    """Per node, each failing test and device once, in the round it first failed."""
    found: dict[str, list[str]] = {n: [] for n in nodes}
    seen = set()
    for j in sorted(judgements, key=lambda j: (_round(j.subject), j.test, j.subject)):
        if j.verdict is not Verdict.FAIL or j.node not in found:
            continue
        key = (j.node, j.test, j.subject.rsplit("round ", 1)[0])
        if key not in seen:
            seen.add(key)
            found[j.node].append(j.reason)
    return found


def _round(subject: str) -> int:
    tail = subject.rsplit("round ", 1)
    return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else 0
