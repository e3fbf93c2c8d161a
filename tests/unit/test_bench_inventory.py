"""bench/inventory.py's pieces, at a size that runs in a test: the inventories it writes
are valid and read as it says, and its migration differs as it says."""

import importlib.util

from kiln import inventory
from kiln.inventory import diff
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("bench_inventory", REPO / "bench/inventory.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_inventory_has_racks_of_nodes_with_their_addresses(tmp_path):
    bench.write(tmp_path / "inv", range(70), 0, "big")
    found = inventory.load(tmp_path / "inv")
    racks = {
        f"rack{n:05d}": [bench.node(i) for i in range(32 * n, min(70, 32 * n + 32))]
        for n in (0, 1, 2)
    }
    assert found.groups == {
        **racks,
        "slurm_compute": [bench.node(i) for i in range(70)],
        "slurm_controller": ["ctl1", "ctl2"],
        "slurm_login": ["login1"],
    }
    assert found.hosts["gpu0000069"].address == "10.0.0.69"
    assert found.hosts["gpu0000069"].groups == ["rack00002", "slurm_compute"]
    assert found.hosts["ctl2"].address == "10.0.255.2"
    assert bench.address(65536 + 258, 100) == "10.101.1.2"


def test_ranges_declare_the_same_nodes(tmp_path):
    bench.write(tmp_path / "listed", range(64), 0, "big")
    bench.write(tmp_path / "ranges", range(64), 0, "big", ranges=True)
    listed, ranges = inventory.load(tmp_path / "listed"), inventory.load(tmp_path / "ranges")
    assert ranges.groups == listed.groups
    assert ranges.hosts["gpu0000063"].address == "gpu0000063"  # named, not addressed
    # One rack's nodes share one dict of variables: judged once per rack.
    assert ranges.hosts["gpu0000000"].vars is ranges.hosts["gpu0000031"].vars


def test_the_migration_replaces_one_node_in_a_hundred_and_readdresses_all(tmp_path):
    old, new = bench.migration(200)
    bench.write(tmp_path / "before", old, 0, "old")
    bench.write(tmp_path / "after", new, 100, "new")
    found = diff.diff(inventory.load(tmp_path / "before"), inventory.load(tmp_path / "after"))
    groups = [g for g in found.to_dict()["groups"] if not g["group"].startswith("host ")]
    assert groups == [
        {
            "group": "all",
            "hosts_added": ["gpu0000200", "gpu0000201"],
            "hosts_removed": ["gpu0000198", "gpu0000199"],
            "variables": [
                {"name": "slurm_cluster_name", "before": "old", "after": "new", "secret": False}
            ],
        },
        {
            "group": "rack00006",
            "hosts_added": ["gpu0000200", "gpu0000201"],
            "hosts_removed": ["gpu0000198", "gpu0000199"],
            "variables": [],
        },
        {
            "group": "slurm_compute",
            "hosts_added": ["gpu0000200", "gpu0000201"],
            "hosts_removed": ["gpu0000198", "gpu0000199"],
            "variables": [],
        },
        {  # its one host's address: said once, for the group
            "group": "slurm_login",
            "hosts_added": [],
            "hosts_removed": [],
            "variables": [
                {
                    "name": "ansible_host",
                    "before": "10.0.255.3",
                    "after": "10.100.255.3",
                    "secret": False,
                }
            ],
        },
    ]
    per_host = [g for g in found.to_dict()["groups"] if g["group"].startswith("host ")]
    assert len(per_host) == 198 + 2  # every kept node and the controllers, readdressed
    assert per_host[0]["variables"] == [
        {"name": "ansible_host", "before": "10.0.255.1", "after": "10.100.255.1", "secret": False}
    ]
