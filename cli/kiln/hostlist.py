"""Slurm hostlists: compress names into gpu[001-128] form, and expand them back.

Compression groups names by their prefix and the width of their numeric suffix, so
gpu001..gpu128 and gpu1000 stay distinct ranges exactly as Slurm would read them.
"""

import re
from collections import defaultdict
from collections.abc import Iterable

# No cluster has more names; a typo such as c[0-99999999] would otherwise exhaust memory.
MAX_NAMES = 1_000_000
_NUMBERED = re.compile(r"(.*?)([0-9]+)")
_BRACKET = re.compile(r"([^\[\],]*)\[([^\]]+)\](.*)")
_NUMBER = re.compile(r"[0-9]+")  # ASCII digits: str.isdigit() takes "٣" too


def compress(names: Iterable[str]) -> str:
    """Sorted, de-duplicated, comma-separated hostlist of the names."""
    ranges: dict[tuple[str, int], set[int]] = defaultdict(set)
    plain: set[str] = set()
    unpadded: list[tuple[str, str]] = []
    for name in names:
        match = _NUMBERED.fullmatch(name)
        if not match:
            plain.add(name)
            continue
        prefix, digits = match.groups()
        if digits.startswith("0") and len(digits) > 1:
            ranges[(prefix, len(digits))].add(int(digits))
        else:
            unpadded.append((prefix, digits))
    # As in Slurm, gpu100 belongs with gpu001 (width 3); node10 with node1 (no padding).
    for prefix, digits in unpadded:
        width = len(digits) if (prefix, len(digits)) in ranges else 0
        ranges[(prefix, width)].add(int(digits))
    parts = [(name, name) for name in plain]
    for (prefix, width), numbers in ranges.items():
        ordered = sorted(numbers)
        if len(ordered) == 1:
            text = f"{prefix}{str(ordered[0]).zfill(width)}"
        else:
            text = f"{prefix}[{_runs(ordered, width)}]"
        parts.append((f"{prefix}{str(ordered[0]).zfill(width)}", text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: sort_key(p[0])))


def _runs(numbers: list[int], width: int) -> str:
    out = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        first, last = str(start).zfill(width), str(prev).zfill(width)
        out.append(first if start == prev else f"{first}-{last}")
        if n is not None:
            start = prev = n
    return ",".join(out)


def sort_key(name: str) -> tuple[str, int, str]:
    """Natural order: gpu2 before gpu10."""
    match = _NUMBERED.fullmatch(name)
    if match:
        return (match.group(1), int(match.group(2)), name)
    return (name, -1, name)


def expand(hostlist: str) -> list[str]:
    """gpu[001-003,007],login1 -> gpu001, gpu002, gpu003, gpu007, login1. A reversed
    range or one of more than MAX_NAMES names is a ValueError."""
    names: list[str] = []
    for item in _split_top_level(hostlist):
        if count(item) + len(names) > MAX_NAMES:
            raise ValueError(f"hostlist {hostlist!r} names more than {MAX_NAMES:,} hosts")
        names.extend(_expand_one(item))
    return names


def total(hostlist: str) -> int:
    """How many names a hostlist expands to, without expanding it."""
    return sum(count(item) for item in _split_top_level(hostlist))


def check_range(low: int, high: int, where: str) -> None:
    """A numeric range of a hostlist or an Ansible host pattern: ascending and bounded."""
    if high < low:
        raise ValueError(f"reversed range {low}-{high} in {where!r}")
    if high - low + 1 > MAX_NAMES:
        raise ValueError(f"range {low}-{high} in {where!r} names more than {MAX_NAMES:,} hosts")


def count(item: str) -> int:
    """How many names one item expands to, without expanding it."""
    match = _BRACKET.fullmatch(item)
    if not match:
        return 1
    _, body, tail = match.groups()
    total = 0
    for part in body.split(","):
        low, _, high = part.partition("-")
        if not _NUMBER.fullmatch(low) or (high and not _NUMBER.fullmatch(high)):
            raise ValueError(f"bad range {part!r} in hostlist {item!r}")
        check_range(int(low), int(high or low), item)
        total += int(high or low) - int(low) + 1
    return total * count(tail)


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise ValueError(f"unbalanced brackets in hostlist {text!r}")
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _expand_one(item: str) -> list[str]:
    match = _BRACKET.fullmatch(item)
    if not match:
        return [item]
    head, body, tail = match.groups()
    names = []
    for part in body.split(","):
        low, _, high = part.partition("-")
        if not _NUMBER.fullmatch(low) or (high and not _NUMBER.fullmatch(high)):
            raise ValueError(f"bad range {part!r} in hostlist {item!r}")
        width = len(low) if low.startswith("0") else 0
        for number in range(int(low), int(high or low) + 1):
            names.extend(head + str(number).zfill(width) + rest for rest in _expand_one(tail))
    return names
