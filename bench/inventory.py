#!/usr/bin/env python3
"""`kiln inventory check` and `kiln inventory diff` on large inventories (run by hand;
figures in docs/performance.md).

    .venv/bin/python bench/inventory.py [--hosts 100000] [--diff-hosts 30000] [--limit-s 10]

Writes an inventory of --hosts compute nodes the way large sites keep theirs: one child
group of slurm_compute per rack of 32 nodes, each node with its own ansible_host, two
controllers and a login node, cluster settings in group_vars/all.yml (two partitions,
one of them a rack); with --ranges, each rack is one host range and no node has
variables of its own. Times, in CPU seconds of this process: reading and checking it
(kiln.inventory.load), and the whole `kiln inventory check` as the CLI runs it, with
its JSON and with its text output. Then
`kiln inventory diff` of two inventories of --diff-hosts nodes a side, the second a
migration of the first (new addresses, a setting changed, 1% of the nodes replaced).
Reports the peak resident memory, and exits 1 when the check takes over --limit-s.
"""

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kiln import inventory
from kiln.cli import cli

PER_RACK = 32
WIDTH = 7  # gpu0000001: room for 1,000,000 nodes


def node(number: int) -> str:
    return f"gpu{number:0{WIDTH}d}"


def address(number: int, site: int) -> str:
    return f"10.{site + (number >> 16)}.{number >> 8 & 255}.{number & 255}"


def hosts_yml(numbers: range | list[int], site: int = 0, ranges: bool = False) -> dict[str, Any]:
    """hosts.yml: nodes NUMBERS in racks of PER_RACK (rack = number // PER_RACK),
    addressed in 10.SITE.0.0/16 and up; or, with `ranges`, each whole rack written as
    one host range (gpu[0000000:0000031]) whose nodes Ansible addresses by name."""
    racks: dict[str, dict[str, Any]] = {}
    for number in numbers:
        rack = racks.setdefault(f"rack{number // PER_RACK:05d}", {"hosts": {}})
        if not ranges:
            rack["hosts"][node(number)] = {"ansible_host": address(number, site)}
        elif number % PER_RACK == 0:
            rack["hosts"][f"gpu[{number:0{WIDTH}d}:{number + PER_RACK - 1:0{WIDTH}d}]"] = None
    return {
        "all": {
            "children": {
                "slurm_controller": {
                    "hosts": {
                        "ctl1": {"ansible_host": f"10.{site}.255.1"},
                        "ctl2": {"ansible_host": f"10.{site}.255.2"},
                    }
                },
                "slurm_login": {"hosts": {"login1": {"ansible_host": f"10.{site}.255.3"}}},
                "slurm_compute": {"children": racks},
            }
        }
    }


def group_vars(cluster: str) -> dict[str, Any]:
    return {
        "slurm_cluster_name": cluster,
        "slurm_partitions": [
            {"name": "batch", "nodes": "slurm_compute", "default": True, "max_time": "2-00:00:00"},
            {"name": "debug", "nodes": "rack00000", "max_time": "01:00:00"},
        ],
        "base_chrony_enabled": True,
    }


def migration(hosts: int) -> tuple[list[int], list[int]]:
    """The nodes of a site before and after its migration: 1% of them replaced."""
    replaced = max(1, hosts // 100)
    return list(range(hosts)), [*range(hosts - replaced), *range(hosts, hosts + replaced)]


def write(
    directory: Path, numbers: range | list[int], site: int, cluster: str, ranges: bool = False
) -> float:
    """The inventory in DIRECTORY; the size of its hosts.yml in MB."""
    (directory / "group_vars").mkdir(parents=True)
    data = hosts_yml(numbers, site, ranges)
    text = yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False)
    (directory / "hosts.yml").write_text(text)
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars(cluster)))
    return len(text) / 1e6


def cpu(action) -> tuple[float, Any]:
    start = time.process_time()
    result = action()
    return round(time.process_time() - start, 2), result


def kiln(*argv: str) -> str:
    result = CliRunner().invoke(cli, list(argv), catch_exceptions=False)
    assert result.exit_code == 0, result.output[-2000:]
    return result.output


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--ranges", action="store_true", help="Racks as host ranges.")
    parser.add_argument("--diff-hosts", type=int, default=30_000, help="0: no diff.")
    parser.add_argument("--limit-s", type=float, default=10.0)
    options = parser.parse_args()
    figures: dict[str, Any] = {"hosts": options.hosts, "ranges": options.ranges}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-inventory-") as tmp:
        big = Path(tmp) / "big"
        figures["hosts_yml_mb"] = round(
            write(big, range(options.hosts), 0, "big", options.ranges), 1
        )
        load_s, spec = cpu(lambda: inventory.load(big))
        assert len(spec.group("slurm_compute")) == options.hosts
        json_s, shown = cpu(lambda: kiln("inventory", "check", "-i", str(big), "--json"))
        assert len(json.loads(shown)["hosts"]) == options.hosts + 3
        text_s, shown = cpu(lambda: kiln("inventory", "check", "-i", str(big)))
        assert shown.count("\n") > options.hosts + 3  # a line for each host
        figures.update(load_cpu_s=load_s, check_json_cpu_s=json_s, check_text_cpu_s=text_s)
        if options.diff_hosts:
            before, after = Path(tmp) / "before", Path(tmp) / "after"
            old, new = migration(options.diff_hosts)
            write(before, old, 0, "old")
            write(after, new, 100, "new")
            diff_s, shown = cpu(lambda: kiln("inventory", "diff", str(before), str(after)))
            figures.update(diff_hosts=options.diff_hosts, diff_cpu_s=diff_s)
            figures["diff_lines"] = shown.count("\n")
    figures["rss_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(figures, indent=2))
    slowest = max(json_s, text_s)
    if slowest > options.limit_s:
        print(f"inventory check of {options.hosts} hosts: {slowest} s > {options.limit_s} s")
        sys.exit(1)


if __name__ == "__main__":
    main()
