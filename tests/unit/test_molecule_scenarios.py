"""The Molecule scenarios as scripts/molecule.sh --ci runs them: two lanes side by side
on one network, so no two scenarios may share a container name or an address."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))


def platforms(scenario: str) -> list[dict]:
    return yaml.safe_load((ROOT / "molecule" / scenario / "molecule.yml").read_text())["platforms"]


def address(platform: dict) -> str:
    (ip,) = [o.removeprefix("--ip=") for o in platform["extra_opts"] if o.startswith("--ip=")]
    return ip


def test_no_two_scenarios_share_a_container_name_or_an_address():
    owners: dict[str, str] = {}
    for scenario in SCENARIOS:
        for platform in platforms(scenario):
            for key in (platform["name"], address(platform)):
                assert key not in owners, f"{key}: {owners.get(key)} and {scenario}"
                owners[key] = scenario


def test_every_scenario_runs_in_ci_once():
    script = (ROOT / "scripts" / "molecule.sh").read_text()
    (lanes,) = re.findall(r"^LANES=\((.*)\)$", script, re.MULTILINE)
    laned = [*" ".join(re.findall(r'"([^"]*)"', lanes)).split(), "slurm"]
    assert sorted(laned) == SCENARIOS
