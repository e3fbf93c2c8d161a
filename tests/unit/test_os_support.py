"""kiln.os_support: the operating systems each role supports (kiln.roles), judged from
/etc/os-release as the pre-flight reads it and from cached facts as `kiln inventory
check` reads them; the registry agrees with each role's meta/main.yml."""

import json

import yaml

from kiln import os_support, paths, roles
from tests.collection import collection_plugin
from tests.conftest import REPO

kiln_os_refusals = collection_plugin("filter", "kiln_checks").kiln_os_refusals

OS_RELEASE = REPO / "tests/fixtures/os-release"
EVERY_ROLE = ", ".join(roles.ROLES)
SUPPORTED = "(supported: Debian 12, 13; Ubuntu 22.04, 24.04)"


def test_each_release_is_named_as_the_registry_names_it():
    assert {
        name: os_support.os_release((OS_RELEASE / name).read_text())
        for name in ("debian-bookworm", "ubuntu-jammy", "ubuntu-noble", "rocky-9")
    } == {
        "debian-bookworm": ("Debian", "12"),
        "ubuntu-jammy": ("Ubuntu", "22.04"),
        "ubuntu-noble": ("Ubuntu", "24.04"),
        "rocky-9": ("Rocky Linux", "9"),
    }


CODENAMES = {
    "Debian": {"12": "bookworm", "13": "trixie"},
    "Ubuntu": {"22.04": "jammy", "24.04": "noble"},
}


def test_every_roles_meta_platforms_say_what_the_registry_says():
    for name, role in roles.ROLES.items():
        meta = yaml.safe_load((paths.roles_dir() / name / "meta/main.yml").read_text())
        declared = {p["name"]: p["versions"] for p in meta["galaxy_info"]["platforms"]}
        assert declared == {
            distribution: [CODENAMES[distribution][v] for v in versions]
            for distribution, versions in role.platforms.items()
        }, name


GROUPS = {
    "all": ["ctl", "gpu01", "gpu02", "st01"],
    "slurm_controller": ["ctl"],
    "slurm_compute": ["gpu01", "gpu02"],
    "storage": ["st01"],
}


def test_the_preflight_filter_refuses_rocky_and_names_the_hosts_and_their_roles():
    texts = {
        "ctl": (OS_RELEASE / "ubuntu-noble").read_text(),
        "gpu01": (OS_RELEASE / "rocky-9").read_text(),
        "gpu02": (OS_RELEASE / "rocky-9").read_text(),
        "st01": (OS_RELEASE / "rocky-9").read_text(),
    }
    compute_roles = ", ".join(
        r.name for r in roles.ROLES.values() if {"all", "slurm_compute"} & set(r.groups)
    )
    assert kiln_os_refusals(texts, GROUPS) == [
        f"gpu[01-02]: Rocky Linux 9 is not supported by {compute_roles} {SUPPORTED}",
        f"st01: Rocky Linux 9 is not supported by base, glusterfs_server, autofs, monitoring"
        f" {SUPPORTED}",
    ]


def test_a_release_the_roles_do_not_list_is_refused_as_a_foreign_os_is():
    texts = {host: (OS_RELEASE / "debian-bookworm").read_text() for host in GROUPS["all"]}
    texts["ctl"] = texts["ctl"].replace('VERSION_ID="12"', 'VERSION_ID="11"')
    controller_roles = ", ".join(
        r.name for r in roles.ROLES.values() if {"all", "slurm_controller"} & set(r.groups)
    )
    assert kiln_os_refusals(texts, GROUPS) == [
        f"ctl: Debian 11 is not supported by {controller_roles} {SUPPORTED}"
    ]


def test_supported_releases_and_hosts_not_read_are_not_refused():
    texts = {
        "ctl": (OS_RELEASE / "ubuntu-jammy").read_text(),
        "gpu01": (OS_RELEASE / "ubuntu-noble").read_text(),
        "st01": (OS_RELEASE / "debian-bookworm").read_text(),
    }
    assert kiln_os_refusals(texts, GROUPS) == []


def cache_file(directory, host, facts):
    """A host's facts as ansible-core 2.19's jsonfile cache writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"s1_{host}").write_text(json.dumps({"__payload__": json.dumps(facts)}))


def test_cached_facts_are_read_in_the_jsonfile_caches_shape(tmp_path):
    rocky = {
        "ansible_distribution": "Rocky",
        "ansible_distribution_version": "9.4",
        "ansible_distribution_major_version": "9",
    }
    cache_file(tmp_path, "gpu01", rocky)
    # Before ansible-core 2.19: the facts alone, in a file named for the host.
    noble = {"ansible_distribution": "Ubuntu", "ansible_distribution_version": "24.04"}
    (tmp_path / "gpu02").write_text(json.dumps(noble))
    (tmp_path / "s1_ctl").write_text("not json")
    found = os_support.cached_facts(["gpu01", "gpu02", "ctl", "st01"], tmp_path)
    assert {h: os_support.release(f) for h, f in found.items()} == {
        "gpu01": ("Rocky", "9"),
        "gpu02": ("Ubuntu", "24.04"),
    }


def test_the_filter_judges_facts_as_the_base_role_passes_them():
    rocky = {
        "distribution": "Rocky",
        "distribution_version": "9.4",
        "distribution_major_version": "9",
    }
    noble = {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "distribution_major_version": "24",
    }
    storage_roles = "base, glusterfs_server, autofs, monitoring"
    assert kiln_os_refusals({"st01": rocky, "ctl": noble}, GROUPS) == [
        f"st01: Rocky 9 is not supported by {storage_roles} {SUPPORTED}"
    ]
