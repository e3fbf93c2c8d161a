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


IMAGE = re.compile(
    r"localhost/kiln-(?:node|molecule):(?:\$\{(KILN_MOLECULE_DISTRO|KILN_MOLECULE_OLDER|KILN_MOLECULE_UBUNTU)"
    r":-(\w+)\}|(\w+))"
)
DEFAULTS = {"KILN_MOLECULE_DISTRO": "trixie", "KILN_MOLECULE_OLDER": "bookworm"}


def test_every_scenario_takes_its_releases_from_the_variables_but_debians_driver_nodes():
    """Ubuntu (or any lab release) is chosen for every scenario by KILN_MOLECULE_DISTRO and
    KILN_MOLECULE_OLDER (scripts/molecule.sh --os); only the nodes of the driver's debian
    source, Debian's alone, name their release, and its ubuntu source's node, Ubuntu's
    alone, takes KILN_MOLECULE_UBUNTU (Ubuntu 24.04 unless it names 22.04)."""
    fixed, ubuntu = {}, []
    for scenario in SCENARIOS:
        for platform in platforms(scenario):
            variable, default, named = IMAGE.fullmatch(platform["image"]).groups()
            if named:
                fixed[platform["name"]] = named
            elif variable == "KILN_MOLECULE_UBUNTU":
                ubuntu.append((platform["name"], default))
            else:
                assert default == DEFAULTS[variable]
    assert fixed == {"drv-bookworm": "bookworm", "drv-trixie": "trixie"}
    assert ubuntu == [("drv-ubuntu", "noble")]


def test_only_the_scenario_of_bases_tests_starts_from_raw_nodes():
    """Base's package install runs once per release, in enroot's scenario (which holds
    base's tests); the others start from scripts/molecule.sh's kiln-molecule images,
    whose packages are base's own list."""
    raw = {
        scenario
        for scenario in SCENARIOS
        for platform in platforms(scenario)
        if platform["image"].startswith("localhost/kiln-node:")
    }
    assert raw == {"enroot"}
    script = (ROOT / "scripts" / "molecule.sh").read_text()
    assert 'yaml.safe_load(open("roles/base/defaults/main.yml"))["base_packages"]' in script


def test_ci_names_known_releases_for_every_scenario():
    script = (ROOT / "scripts" / "molecule.sh").read_text()
    block = script.split("declare -A CI_RELEASES=(")[1].split(")\n")[0]
    releases = dict(re.findall(r'\[(\w+)\]="(\w+ \w+)"', block))
    assert sorted(releases) == SCENARIOS
    known = {"trixie", "bookworm", "noble", "jammy"}
    assert all(set(pair.split()) <= known for pair in releases.values())
    # The compute node's roles on Ubuntu 24.04 (docs/performance.md says why these).
    assert {s for s, pair in releases.items() if pair.split()[0] == "noble"} == {
        "enroot",
        "monitoring",
        "slurm",
        "storage",
    }
