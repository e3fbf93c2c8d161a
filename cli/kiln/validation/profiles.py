"""Reference profiles: a threshold per test, shipped as YAML files with Kiln.

A profile names the tests it judges (from TESTS, the catalogue) with one number each;
the direction (a minimum or a maximum) and the unit come from the catalogue, so a
profile cannot get them wrong. `extends: OTHER` starts from another profile, shipped or
the operator's own, and overrides what it names.
"""

import difflib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from kiln.errors import InputError
from kiln.validation.verdicts import Threshold


@dataclass(frozen=True)
class Test:
    unit: str
    higher_is_better: bool
    about: str


_BUSBW = "bus bandwidth (GB/s) on the large-message plateau (messages of 1 GiB and more)"
TESTS: dict[str, Test] = {
    "slurm.srun_s": Test("s", False, "seconds for `srun` to run a command on the node"),
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


class ProfileError(InputError):
    """A profile that does not exist or does not make sense."""


@dataclass
class Profile:
    name: str
    description: str = ""
    thresholds: dict[str, float] = field(default_factory=dict)
    warn_band_percent: float = 5.0
    outlier_percent: float = 15.0

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
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{label}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{label}: expected a mapping with 'thresholds'")
    unknown_keys = set(data) - {
        "description",
        "extends",
        "thresholds",
        "warn_band_percent",
        "outlier_percent",
    }
    if unknown_keys:
        raise ProfileError(f"{label}: unknown key {sorted(unknown_keys)[0]!r}")
    base = load(str(data["extends"]), (*_seen, name_or_path)) if data.get("extends") else None
    profile = Profile(name=name, description=str(data.get("description", "")))
    if base:
        profile.thresholds.update(base.thresholds)
        profile.warn_band_percent = base.warn_band_percent
        profile.outlier_percent = base.outlier_percent
    for key in ("warn_band_percent", "outlier_percent"):
        if key in data:
            setattr(profile, key, _number(data[key], f"{label}: {key}"))
    thresholds = data.get("thresholds") or {}
    if not isinstance(thresholds, dict):
        raise ProfileError(f"{label}: 'thresholds' must map test names to numbers")
    for test, value in thresholds.items():
        if test not in TESTS:
            close = difflib.get_close_matches(str(test), TESTS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(TESTS)}"
            raise ProfileError(f"{label}: unknown test {test!r}{hint}")
        profile.thresholds[test] = _number(value, f"{label}: {test}")
    return profile


def _read(name_or_path: str) -> tuple[str, str, str]:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        try:
            return path.read_text(), str(path), path.stem
        except OSError as exc:
            raise ProfileError(f"profile {path}: cannot read: {exc.strerror}") from None
    if name_or_path not in shipped():
        raise ProfileError(
            f"unknown profile {name_or_path!r}; shipped: {', '.join(shipped())} "
            "(or give a path to your own YAML file)"
        )
    folder = resources.files("kiln.validation") / "profiles"
    return (folder / f"{name_or_path}.yaml").read_text(), f"profile {name_or_path}", name_or_path


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ProfileError(f"{where}: expected a non-negative number, got {value!r}")
    return float(value)
