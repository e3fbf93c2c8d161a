"""Reference profiles: a threshold per test, shipped as YAML files with Kiln.

A profile names the tests it judges (from TESTS, the catalogue) with one number each;
the direction (a minimum or a maximum) and the unit come from the catalogue, so a
profile cannot get them wrong. `extends: OTHER` starts from another profile, shipped or
the operator's own, and overrides what it names.
"""

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kiln import yaml_input
from kiln.errors import InputError
from kiln.files import read_text
from kiln.validation.verdicts import Threshold


@dataclass(frozen=True)
class Test:
    unit: str
    higher_is_better: bool
    about: str


_BUSBW = "bus bandwidth (GB/s) on the large-message plateau (messages of 1 GiB and more)"
TESTS: dict[str, Test] = {
    "slurm.srun_s": Test("s", False, "seconds for `srun` to run a command on the node"),
    "slurm.mpi_latency_us": Test(
        "us", False, "MPI ping-pong latency (8 bytes) to a neighbour node, the best of its pairs"
    ),
    "slurm.mpi_bandwidth": Test(
        "GB/s", True, "MPI ping-pong bandwidth (4 MiB) to a neighbour node, the best of its pairs"
    ),
    "storage.seq_write": Test("MB/s", True, "sequential write, large blocks, per node"),
    "storage.seq_read": Test("MB/s", True, "sequential read, large blocks, per node"),
    "storage.rand_read_iops": Test("IOPS", True, "random 4 KiB reads per node"),
    "storage.metadata_ops": Test("ops/s", True, "small-file create + stat + delete per node"),
    "storage.cold_import_s": Test("s", False, "cold import of a package tree, all nodes at once"),
    **{
        f"collectives.{collective}.{scope}": Test("GB/s", True, f"{collective} {_BUSBW}, {scope}")
        for collective in ("all_reduce", "all_gather", "reduce_scatter")
        for scope in ("single_node", "multi_node")
    },
}


# Checks have a verdict of their own (a mount is there or not); no profile sets them.
CHECKS: dict[str, str] = {
    "slurm.state": "the node's Slurm state before the run",
    "slurm.srun": "a job step starts on the node",
    "slurm.munge": "the node decodes a credential made on the controller",
    "slurm.mpi": "an MPI job across the nodes starts a rank on the node through PMIx",
    "storage.mount": "each declared mount is mounted with its type and answers in time",
    "storage.io": "the benchmarks could read and write on the mount",
    "storage.run": "the storage suite ran on the node",
    "storage.cold_import": "the cold import finished",
    "collectives.run": "the collectives benchmarks ran (unchecked where neither could run)",
    "collectives.nccl_tests": "nccl-tests ran, with no wrong values and no FAILED",
    "collectives.pairwise": "all_reduce with a healthy partner (after a multi-node failure)",
}

# Sizes and limits of the suites, per profile: small in the lab, checkpoint-sized on
# GPU clusters. A profile's `storage:` / `collectives:` override these.
STORAGE_DEFAULTS: dict[str, object] = {
    "file_size_mib": 4096,
    "block_size": "1M",
    "numjobs": 4,
    "direct": True,
    "runtime_s": 30,
    "metadata_files": 10000,
    "import_modules": 3000,
    "timeout_s": 900,
    "mount_timeout_s": 10,
}
COLLECTIVES_DEFAULTS: dict[str, object] = {
    "backend": "nccl",
    "ranks_per_node": 8,
    "min_bytes": 1 << 20,
    "max_bytes": 8 << 30,
    "warmup": 5,
    "iters": 20,
    "timeout_s": 900,
}
# `kiln burn-in`'s settings: a profile without a `burn_in:` section cannot burn in
# (the load and the limits depend on the hardware); keys it leaves out take these.
BURN_IN_DEFAULTS: dict[str, object] = {
    "round_s": 600,  # stress per round; collectives, storage and checks follow it
    "device": "cuda",  # cuda: every GPU; cpu: the lab
    "dtype": "bfloat16",
    "size": 16384,  # n of the n x n matrix products
    "memory_fraction": 0.8,  # of each GPU's free memory the operands fill
    "threads": 0,  # CPU threads (device cpu); 0: torch's own choice
    "sample_s": 5,  # seconds between figures and nvidia-smi samples
    "drop_percent": 10.0,  # below a GPU's own first round, or below the fleet median
    "tflops_min": 0.0,  # per GPU; 0: judged against itself and the fleet only
    "temperature_max_c": 85.0,
    "throttle_percent": 5.0,  # of samples with a thermal or power-brake slowdown
}
SECTIONS = {
    "storage": STORAGE_DEFAULTS,
    "collectives": COLLECTIVES_DEFAULTS,
    "burn_in": BURN_IN_DEFAULTS,
}
# What each setting may be. A profile is checked before any node is touched: a value
# the suites cannot run with fails every node, and drains it. Numbers: inclusive ranges.
RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "storage": {
        "file_size_mib": (1, 1 << 20),  # per fio job: up to 1 TiB
        "numjobs": (1, 1024),
        "runtime_s": (1, 3600),
        "metadata_files": (1, 10_000_000),
        "import_modules": (1, 1_000_000),
        "timeout_s": (10, 86400),
        "mount_timeout_s": (1, 600),
    },
    "collectives": {
        "ranks_per_node": (1, 1024),  # 1: no within-node collectives
        "min_bytes": (1, 1 << 40),
        "max_bytes": (1, 1 << 40),
        "warmup": (0, 10_000),
        "iters": (1, 100_000),
        "timeout_s": (10, 86400),
    },
    "burn_in": {
        "round_s": (10, 86400),
        "size": (16, 1 << 17),
        "sample_s": (1, 86400),
        "memory_fraction": (0, 0.95),
        "threads": (0, 4096),
        "drop_percent": (0, 100),
        "throttle_percent": (0, 100),
        "tflops_min": (0, 1e6),
        "temperature_max_c": (1, 150),
    },
}
CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "collectives": {"backend": ("nccl", "gloo")},
    "burn_in": {"device": ("cuda", "cpu"), "dtype": ("bfloat16", "float16", "float32")},
}
# (a setting, one it must stay under, whether equal is allowed): each fio run ends
# within timeout_s; a sample is taken within a round.
ORDERED: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "storage": (("runtime_s", "timeout_s", False), ("mount_timeout_s", "timeout_s", False)),
    "collectives": (("min_bytes", "max_bytes", True),),
    "burn_in": (("sample_s", "round_s", True),),
}
# fio's sizes: a number with an optional unit (4k, 1M, 1MiB).
FIO_SIZE = re.compile(r"[1-9][0-9]*([kmgtp]i?b?)?", re.IGNORECASE)
# The profile's own percentages: a warn band past 100% warns of everything, and an
# outlier band of 0 fails every node below the median.
PERCENTS = {"warn_band_percent": (0, 100), "outlier_percent": (1, 1000)}


@dataclass(frozen=True)
class Hardware:
    """The nodes a shipped profile is written for (`hardware:`), which `kiln inventory
    discover` proposes it for: GPU models as nvidia-smi names them and how many per node,
    the compute rails' link layer and rate, and whether the nodes are containers (the
    lab). Never inherited through `extends`: each profile states its own."""

    gpu: tuple[str, ...] = ()
    gpus: int = 0
    fabric: str = ""  # InfiniBand, Ethernet; "": none
    rail_gbps: float = 0
    container: bool = False

    def fits(self, model: str, gpus: int, fabric: str, rail_gbps: float, container: bool) -> bool:
        return (
            (not self.gpu or model in self.gpu)
            and gpus == self.gpus
            and fabric == self.fabric
            and rail_gbps == self.rail_gbps
            and container == self.container
        )


HARDWARE_KEYS = {"gpu", "gpus", "fabric", "rail_gbps", "container"}


def measures_gpus(collectives: Mapping[str, object]) -> bool:
    """Whether a profile's collectives suite measures GPUs: its backend is NCCL (every
    shipped GPU profile, and the default without a profile), not gloo on CPUs (the
    lab). On such a profile a node whose collectives could not run is not checked,
    never passed (kiln.validation.suites.collectives_notes)."""
    return collectives.get("backend") == "nccl"


class ProfileError(InputError):
    """A profile that does not exist or does not make sense."""


@dataclass
class Profile:
    name: str
    description: str = ""
    thresholds: dict[str, float] = field(default_factory=dict)
    warn_band_percent: float = 5.0
    outlier_percent: float = 15.0
    storage: dict[str, object] = field(default_factory=lambda: dict(STORAGE_DEFAULTS))
    collectives: dict[str, object] = field(default_factory=lambda: dict(COLLECTIVES_DEFAULTS))
    burn_in: dict[str, object] | None = None  # None: the profile has no `burn_in:` section
    hardware: Hardware | None = None  # None: proposed for no hardware

    def threshold(self, test: str) -> Threshold | None:
        if test not in self.thresholds:
            return None
        return Threshold(
            self.thresholds[test], TESTS[test].higher_is_better, f"profile {self.name}"
        )


def shipped() -> list[str]:
    folder = resources.files("kiln.validation") / "profiles"
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def load(name_or_path: str, _seen: tuple[str, ...] = ()) -> Profile:
    """A shipped profile by name, or a YAML file by path (which may extend either)."""
    if name_or_path in _seen:
        raise ProfileError(f"profile {name_or_path}: extends itself ({' -> '.join(_seen)})")
    text, label, name = _read(name_or_path)
    try:
        data = yaml_input.parse(text, label)
    except InputError as exc:
        raise ProfileError(exc.message) from None
    if not isinstance(data, dict):
        raise ProfileError(f"{label}: expected a mapping with 'thresholds'")
    unknown_keys = set(data) - {
        "description",
        "extends",
        "thresholds",
        "warn_band_percent",
        "outlier_percent",
        "storage",
        "collectives",
        "burn_in",
        "hardware",
    }
    if unknown_keys:
        raise ProfileError(f"{label}: unknown key {sorted(unknown_keys)[0]!r}")
    base = load(str(data["extends"]), (*_seen, name_or_path)) if data.get("extends") else None
    profile = Profile(name=name, description=str(data.get("description", "")))
    if "hardware" in data:
        profile.hardware = _hardware(data["hardware"], label)
    if base:
        profile.thresholds.update(base.thresholds)
        profile.warn_band_percent = base.warn_band_percent
        profile.outlier_percent = base.outlier_percent
        profile.storage = dict(base.storage)
        profile.collectives = dict(base.collectives)
        profile.burn_in = dict(base.burn_in) if base.burn_in is not None else None
    for section in ("storage", "collectives"):
        getattr(profile, section).update(_section(data, section, label))
        _check_settings(section, getattr(profile, section), label)
    if "burn_in" in data:
        given = _section(data, "burn_in", label)
        profile.burn_in = {**(profile.burn_in or BURN_IN_DEFAULTS), **given}
        _check_settings("burn_in", profile.burn_in, label)
    for key, (low, high) in PERCENTS.items():
        if key in data:
            value = _number(data[key], f"{label}: {key}")
            if not low <= value <= high:
                raise ProfileError(f"{label}: {key} {data[key]!r}: must be {low} to {high}")
            setattr(profile, key, value)
    thresholds = data.get("thresholds") or {}
    if not isinstance(thresholds, dict):
        raise ProfileError(f"{label}: 'thresholds' must map test names to numbers")
    for test, value in thresholds.items():
        if test not in TESTS:
            close = difflib.get_close_matches(str(test), TESTS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(TESTS)}"
            raise ProfileError(f"{label}: unknown test {test!r}{hint}")
        profile.thresholds[test] = _number(value, f"{label}: {test}")
        if profile.thresholds[test] == 0 and not TESTS[test].higher_is_better:
            # a maximum of 0 fails every node
            raise ProfileError(f"{label}: {test} 0: a maximum must be above 0")
    return profile


def _hardware(data: object, label: str) -> Hardware:
    if not isinstance(data, dict) or set(data) - HARDWARE_KEYS:
        raise ProfileError(
            f"{label}: 'hardware' must map some of {', '.join(sorted(HARDWARE_KEYS))}"
        )
    models = data.get("gpu", [])
    models = [models] if isinstance(models, str) else models
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ProfileError(f"{label}: hardware.gpu must be a GPU model or a list of them")
    return Hardware(
        gpu=tuple(models),
        gpus=int(_number(data.get("gpus", 0), f"{label}: hardware.gpus")),
        fabric=str(data.get("fabric", "")),
        rail_gbps=_number(data.get("rail_gbps", 0), f"{label}: hardware.rail_gbps"),
        container=data.get("container", False) is True,
    )


def _read(name_or_path: str) -> tuple[str, str, str]:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return read_text(path, f"profile {path}"), str(path), path.stem
    if name_or_path not in shipped():
        close = difflib.get_close_matches(name_or_path, shipped(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ProfileError(
            f"unknown profile {name_or_path!r}; {hint}shipped: {', '.join(shipped())} "
            "(or give a path to your own YAML file)"
        )
    folder = resources.files("kiln.validation") / "profiles"
    return (folder / f"{name_or_path}.yaml").read_text(), f"profile {name_or_path}", name_or_path


_KINDS = {int: "a whole number", float: "a number", bool: "true or false", str: "a string"}


def _section(data: dict, section: str, label: str) -> dict[str, object]:
    """A profile's suite settings: known keys only, each of its default's type."""
    given = data.get(section) or {}
    defaults = SECTIONS[section]
    if not isinstance(given, dict):
        raise ProfileError(f"{label}: '{section}' must be a mapping")
    for key, value in given.items():
        if key not in defaults:
            raise ProfileError(
                f"{label}: unknown {section} setting {key!r}; known: {', '.join(defaults)}"
            )
        wanted = type(defaults[key])
        if wanted is float and type(value) is int:
            value = given[key] = float(value)  # 10 means 10.0 where a number is asked
        if type(value) is not wanted:
            raise ProfileError(f"{label}: {section}.{key} must be {_KINDS[wanted]}, got {value!r}")
    return given


def _check_settings(section: str, settings: dict, label: str) -> None:
    """A suite's settings (after `extends`) that its programs could not run or judge
    with: each number in its range, each word one of its choices, and the pairs in
    order."""
    for key, allowed in CHOICES.get(section, {}).items():
        if settings[key] not in allowed:
            raise ProfileError(f"{label}: {section}.{key} must be one of {', '.join(allowed)}")
    for key, (low, high) in RANGES[section].items():
        value = settings[key]
        if not (math.isfinite(value) and low <= value <= high):
            raise ProfileError(f"{label}: {section}.{key} {value!r}: must be {low} to {high}")
    for key, limit, equal in ORDERED.get(section, ()):
        if settings[key] > settings[limit] or (not equal and settings[key] == settings[limit]):
            relation = "at most" if equal else "under"
            raise ProfileError(
                f"{label}: {section}.{key} {settings[key]!r}: must be {relation} "
                f"{section}.{limit} ({settings[limit]!r})"
            )
    if section == "storage" and not FIO_SIZE.fullmatch(str(settings["block_size"])):
        raise ProfileError(
            f"{label}: storage.block_size {settings['block_size']!r}: must be a size fio "
            "reads, such as 1M or 128k"
        )


def _number(value: object, where: str) -> float:
    # .nan passes every comparison and .inf fails every one: neither is a threshold.
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ProfileError(f"{where}: expected a non-negative number, got {value!r}")
    return float(value)
