"""kiln.image: the build inventory and the manifest's pins and packages."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from kiln import inventory
from kiln.image import manifest, target
from kiln.run.execute import collections_path
from tests.conftest import cluster_inventory

# `dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\n'` as Debian 13 prints
# it (stdout): installed ("ii"), removed with its configuration kept ("rc"), and a
# package dpkg knows of and never installed ("un", no version).
DPKG = (
    "slurmd ii  24.11.5-4+deb13u1\n"
    "munge ii  0.5.16-1.1~deb13u1\n"
    "lmod ii  8.7.60-1\n"
    "environment-modules rc  5.5.0-1\n"
    "nvidia-driver un  \n"
)


def test_installed_packages_are_read_from_dpkg():
    assert manifest.parse_dpkg(DPKG) == {
        "lmod": "8.7.60-1",
        "munge": "0.5.16-1.1~deb13u1",
        "slurmd": "24.11.5-4+deb13u1",
    }


def _spec(write_inventory, files=None):
    hosts = cluster_inventory(
        compute=("gpu001", "gpu002"),
        host_vars={
            "ctl1": {"ansible_host": "10.0.0.1"},
            "gpu001": {"ansible_host": "10.0.0.11", "ansible_user": "admin", "rack": "r1"},
        },
    )
    return inventory.load(write_inventory(hosts, files=files))


def test_the_build_host_has_the_like_nodes_variables_and_podman_s_connection(write_inventory):
    spec = _spec(write_inventory, {"group_vars/all/kiln.yml": {"slurm_cluster_name": "c1"}})
    tree = target.hosts_yml(spec, "gpu001", "kiln-image-0a1b")
    assert tree == {
        "all": {
            "children": {
                "slurm_compute": {
                    "hosts": {
                        "kiln-image-0a1b": {
                            "rack": "r1",
                            "slurm_cluster_name": "c1",
                            "ansible_connection": "kiln.cluster.kiln_podman",
                            "ansible_host": "kiln-image-0a1b",
                            "ansible_python_interpreter": "/usr/bin/python3",
                        }
                    }
                },
                "slurm_controller": {"hosts": {"ctl1": {}}},
                "slurm_login": {"hosts": {}},
                "storage": {"hosts": {}},
            }
        }
    }


def test_the_build_inventory_is_written_and_described(write_inventory, tmp_path):
    spec = _spec(write_inventory)
    build = target.write(spec, "gpu002", "kiln-image-0a1b", tmp_path)
    assert yaml.safe_load((tmp_path / "hosts.yml").read_text()) == target.hosts_yml(
        spec, "gpu002", "kiln-image-0a1b"
    )
    assert build.source == tmp_path / "hosts.yml"
    assert build.groups == {
        "slurm_compute": ["kiln-image-0a1b"],
        "slurm_controller": ["ctl1"],
        "slurm_login": [],
        "storage": [],
    }
    assert build.hosts["kiln-image-0a1b"].groups == ["slurm_compute"]


DIGEST = "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae"
CAPS = "0c4d2e1f6b7a8c9d3e5f1a2b4c6d8e0f1a3b5c7d9e2f4a6b8c0d1e3f5a7b9c2d"


def test_the_pins_are_the_like_nodes_values_over_the_roles_defaults(write_inventory):
    spec = _spec(
        write_inventory,
        {
            "group_vars/slurm_compute.yml": {
                "nvidia_driver_version": "580.95.05",
                "enroot_version": "3.5.0",
                "enroot_sha256": DIGEST,
                "enroot_caps_sha256": CAPS,
            }
        },
    )
    assert manifest.pins(spec, "gpu001") == {
        "nvidia_driver": {
            "source": "debian",
            "version": "580.95.05",
            "kernel_modules": "open",
            "fabric_manager": "auto",
        },
        "nccl_tests": {"version": "", "sha256": "", "cuda_version": "", "nccl_version": ""},
        "hpcx": {"version": "", "sha256": "", "cuda": "12"},
        "enroot": {"version": "3.5.0", "sha256": DIGEST, "caps_sha256": CAPS},
        "pyxis": {"version": "", "sha256": ""},
    }


def test_the_build_runs_record_names_the_operators_inventory(write_inventory, tmp_path, state_dir):
    """The run's own inventory is the build's temporary one: its record names the
    operator's, which outlives it."""
    from kiln.run.execute import RunRequest, new_record, resolve_playbook

    spec = _spec(write_inventory)
    built = target.write(spec, "gpu001", "kiln-image-x", tmp_path)
    request = RunRequest(playbook="image", inventory=built, recorded_inventory=spec.source)
    kept, _ = new_record(request, resolve_playbook("image"))
    assert (kept.playbook, kept.inventory) == ("image.yml", str(spec.source))


def test_vault_and_unsafe_values_reach_the_build_as_ansible_reads_them(
    write_inventory, tmp_path, monkeypatch
):
    """Inline `!vault` and `!unsafe` values are written back with their tags, and the
    whole files encrypted with ansible-vault that apply to the node are copied as the
    build host's own: Ansible, given the vault password, reads every value."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([("default", VaultSecret(b"e2e-password"))])
    password = tmp_path / "vault-password"
    password.write_text("e2e-password\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password))
    inline = vault.encrypt("s3cret").decode().replace("\n", "\n  ")
    hosts = cluster_inventory(compute=("gpu001", "gpu002"))
    source = write_inventory(
        hosts,
        files={
            "group_vars/all/site.yml": (
                f"site_secret: !vault |\n  {inline}\nliteral: !unsafe '{{{{ not rendered }}}}'\n"
            ),
            "group_vars/slurm_compute/vault.yml": vault.encrypt("vault_token: t0k\n").decode(),
            "group_vars/slurm_controller.yml": vault.encrypt("ctl_secret: c\n").decode(),
            "host_vars/gpu001.yml": vault.encrypt("host_secret: h\n").decode(),
        },
    )
    spec = inventory.load(source)
    build = tmp_path / "build"
    build.mkdir()
    target.write(spec, "gpu001", "kiln-image-x", build)
    assert sorted(p.name for p in (build / "host_vars" / "kiln-image-x").iterdir()) == [
        "00-group_vars-slurm_compute-vault.yml",
        "01-host_vars-gpu001.yml",
    ]
    shown = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "-i",
            str(build / "hosts.yml"),
            "kiln-image-x",
            "-m",
            "ansible.builtin.debug",
            "-a",
            "msg={{ [site_secret, literal, vault_token, host_secret] | to_json }}",
        ],
        # The build host's connection is the collection's (kiln.cluster.kiln_podman).
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path())},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert '"msg": "[\\"s3cret\\", \\"{{ not rendered }}\\", \\"t0k\\", \\"h\\"]"' in shown.stdout
