"""The `kiln` process: help, version, and every bad-input path the issue names."""

import importlib.metadata
import json
import subprocess
import sys

import click
import pytest
import yaml

import kiln
from kiln import roles
from kiln.cli import COMMANDS, LazyGroup, cli
from kiln.errors import ExitCode
from tests.conftest import cluster_inventory, run_kiln


def all_command_paths() -> list[list[str]]:
    paths = []

    def walk(command: click.Command, prefix: list[str]) -> None:
        paths.append(prefix)
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*prefix, name])

    walk(cli, [])
    return paths


@pytest.mark.parametrize("path", all_command_paths(), ids=lambda p: " ".join(p) or "kiln")
def test_help_on_every_command(path):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_help_imports_no_heavy_module():
    # `kiln --help` must stay fast: nothing heavy may be imported to print it.
    code = (
        "import sys; from kiln.cli import main; sys.argv=['kiln','--help'];\n"
        "try: main()\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('ansible', 'ansible_runner', 'rich', 'pydantic', 'yaml') "
        "if m in sys.modules]; print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "HEAVY []" in out


def test_command_table_lists_real_commands():
    group = LazyGroup()
    ctx = click.Context(cli)
    assert all(group.get_command(ctx, name) is not None for name in COMMANDS)


def test_version():
    """The version the package was installed as (hatch reads it from kiln/__init__.py)."""
    result = run_kiln("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kiln, version {importlib.metadata.version('kiln')}\n"
    assert importlib.metadata.version("kiln") == kiln.__version__


def assert_bad_input(result, message: str) -> None:
    assert result.returncode == ExitCode.BAD_INPUT, result.stderr
    assert result.stderr.strip() == f"kiln: error: {message}"
    assert "Traceback" not in result.stderr


def test_inventory_path_that_does_not_exist(tmp_path, state_dir):
    result = run_kiln("provision", "-i", str(tmp_path / "missing"))
    assert_bad_input(result, f"inventory not found: {tmp_path / 'missing'}")
    assert not (state_dir / "runs").exists(), "nothing ran"


def test_default_inventory_comes_from_the_environment(tmp_path):
    result = run_kiln("inventory", "check", env={"KILN_INVENTORY": str(tmp_path / "env-inv")})
    assert_bad_input(result, f"inventory not found: {tmp_path / 'env-inv'}")


def test_yaml_that_does_not_parse(write_inventory, state_dir):
    inv = write_inventory("all:\n  children: [\n")
    result = run_kiln("provision", "-i", str(inv))
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.startswith("kiln: error: hosts.yml:3: YAML does not parse:")
    assert not (state_dir / "runs").exists()


def test_no_controller_group(write_inventory):
    hosts = cluster_inventory()
    del hosts["all"]["children"]["slurm_controller"]
    result = run_kiln("inventory", "check", "-i", str(write_inventory(hosts)))
    assert_bad_input(
        result, "inventory: no slurm_controller group (expected 1 host, or 2 for a backup)"
    )


def test_three_controllers(write_inventory, state_dir):
    hosts = cluster_inventory(controllers=("a", "b", "c"))
    result = run_kiln("provision", "-i", str(write_inventory(hosts)))
    assert_bad_input(
        result,
        "inventory: slurm_controller has 3 hosts (a, b, c);"
        " expected 1, or 2 for a backup controller",
    )
    assert not (state_dir / "runs").exists()


def test_empty_compute_group(write_inventory):
    hosts = cluster_inventory()
    hosts["all"]["children"]["slurm_compute"]["hosts"] = None
    result = run_kiln("provision", "-i", str(write_inventory(hosts)))
    assert_bad_input(result, "inventory: slurm_compute is empty (expected at least 1 host)")


def test_kiln_variable_of_the_wrong_type(write_inventory, state_dir):
    inv = write_inventory(files={"group_vars/all.yml": {"base_chrony_enabled": "sometimes"}})
    result = run_kiln("provision", "-i", str(inv))
    assert_bad_input(
        result,
        "group_vars/all.yml: base_chrony_enabled must be true or false,"
        " got a string 'sometimes' (role base)",
    )
    assert not (state_dir / "runs").exists()


def test_inventory_check_prints_what_it_found(write_inventory):
    hosts = cluster_inventory()
    hosts["all"]["children"]["storage"] = {"hosts": {"nfs1": {"ansible_host": "10.0.0.5"}}}
    result = run_kiln("inventory", "check", "-i", str(write_inventory(hosts)), "--json")
    assert result.returncode == 0
    found = yaml.safe_load(result.stdout)
    assert found["groups"]["slurm_compute"] == ["gpu001", "gpu002"]
    assert found["hosts"]["nfs1"] == {"address": "10.0.0.5", "roles": ["storage"]}


def test_inventory_check_refuses_a_host_whose_cached_facts_name_an_unsupported_os(
    write_inventory, state_dir
):
    # The facts an earlier run cached, as ansible-core 2.19's jsonfile cache writes them.
    facts = {
        "ansible_distribution": "Rocky",
        "ansible_distribution_version": "9.4",
        "ansible_distribution_major_version": "9",
    }
    (state_dir / "facts").mkdir()
    (state_dir / "facts" / "s1_gpu002").write_text(json.dumps({"__payload__": json.dumps(facts)}))
    result = run_kiln("inventory", "check", "-i", str(write_inventory()))
    compute_roles = ", ".join(
        r.name for r in roles.ROLES.values() if {"all", "slurm_compute"} & set(r.groups)
    )
    assert_bad_input(
        result,
        f"gpu002: Rocky 9 is not supported by {compute_roles}"
        " (supported: Debian 12, 13; Ubuntu 22.04, 24.04) (facts cached by an earlier run)",
    )


def test_unknown_playbook(write_inventory):
    result = run_kiln("run", "nosuch", "-i", str(write_inventory()))
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.startswith("kiln: error: no playbook 'nosuch' in Kiln (available: ")


def test_bad_extra_vars(write_inventory):
    result = run_kiln("provision", "-i", str(write_inventory()), "-e", "novalue")
    assert_bad_input(result, "-e 'novalue': expected KEY=VALUE or @FILE")


def test_unknown_option_is_bad_input():
    result = run_kiln("provision", "--frobnicate")
    assert result.returncode == ExitCode.BAD_INPUT
    assert "No such option '--frobnicate'" in result.stderr


def test_runs_show_unknown_run():
    result = run_kiln("runs", "show", "nope")
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.startswith("kiln: error: no run 'nope' in ")


def test_runs_list_refuses_a_negative_count():
    result = run_kiln("runs", "list", "--last", "-1")
    assert result.returncode == ExitCode.BAD_INPUT
    assert "-1 is not in the range x>=1" in result.stderr


def test_lab_up_without_podman(tmp_path):
    # A PATH holding nothing but this Python: podman, debootstrap and ssh are all absent.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    result = run_kiln("lab", "up", env={"PATH": str(bin_dir)})
    assert result.returncode == ExitCode.BAD_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "podman is not installed: apt-get install -y podman" in lines[0] or (
        "need root" in lines[0]
    )


def test_lab_doctor_lists_the_fix_for_each_gap(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    result = run_kiln("lab", "doctor", env={"PATH": str(bin_dir)})
    assert result.returncode == ExitCode.BAD_INPUT
    assert "debootstrap is not installed" in result.stdout
    assert "fix:" in result.stdout
    assert "apt-get install -y debootstrap" in result.stdout


def test_lab_image_builds_the_node_image_or_the_ee_base(monkeypatch):
    from click.testing import CliRunner

    from kiln.lab import doctor, image

    built = []
    monkeypatch.setattr(doctor, "require", list)
    monkeypatch.setattr(
        image,
        "ensure_image",
        lambda distro, log, rebuild, recipe: (
            built.append((distro, rebuild, recipe.repo)) or image.image_name(distro, recipe)
        ),
    )
    runs = [["--ee-base"], ["--distro", "bookworm", "--rebuild"], ["--distro", "ubuntu-24.04"]]
    outputs = [CliRunner().invoke(cli, ["lab", "image", *args]).output for args in runs]
    # The setting $KILN_LAB_DISTRO stands where --distro is not given.
    monkeypatch.setenv("KILN_LAB_DISTRO", "ubuntu-22.04")
    outputs.append(CliRunner().invoke(cli, ["lab", "image"]).output)
    assert outputs == [
        "localhost/kiln-ee-base:trixie\n",
        "localhost/kiln-node:bookworm\n",
        "localhost/kiln-node:noble\n",
        "localhost/kiln-node:jammy\n",
    ]
    assert built == [
        ("trixie", False, "localhost/kiln-ee-base"),
        ("bookworm", True, "localhost/kiln-node"),
        ("noble", False, "localhost/kiln-node"),
        ("jammy", False, "localhost/kiln-node"),
    ]


def test_lab_refuses_a_release_it_cannot_build_named_in_the_setting():
    result = run_kiln("lab", "up", "--name", "nolab", env={"KILN_LAB_DISTRO": "rocky-9"})
    assert_bad_input(
        result,
        "unknown distro 'rocky-9' (expected one of trixie, bookworm, noble, jammy,"
        " debian-13, debian-12, ubuntu-24.04, ubuntu-22.04)",
    )


def test_lab_commands_on_a_lab_that_is_not_up():
    result = run_kiln("lab", "status", "--name", "nolab")
    assert_bad_input(result, "no lab named 'nolab' is up (run `kiln lab up`)")
    result = run_kiln("lab", "ssh", "--name", "nolab", "compute01")
    assert_bad_input(result, "no lab named 'nolab' is up (run `kiln lab up`)")


def test_lab_rejects_a_bad_name():
    result = run_kiln("lab", "up", "--name", "bad_name!")
    assert result.returncode == ExitCode.BAD_INPUT
    assert "lab name 'bad_name!'" in result.stderr


@pytest.mark.parametrize(
    ("group_vars", "message"),
    [
        (
            {"slurm_partitions": [{"name": "big", "nodes": "gpu_su9"}]},
            "group_vars/all.yml: slurm_partitions: partition big: nodes 'gpu_su9' is neither an"
            " inventory group nor a hostlist of compute nodes",
        ),
        (
            {"slurm_node_shape": {"CPUs": 128, "RealMemory": "2TB"}},
            "group_vars/all.yml: slurm_node_shape: shape RealMemory must be an integer, got '2TB'",
        ),
        (
            {"slurm_dbd_host": "head09"},
            "group_vars/all.yml: slurm_dbd_host names 'head09',"
            " which is not a host in the inventory",
        ),
        (
            {"munge_key_host": "head09"},
            "group_vars/all.yml: munge_key_host names 'head09',"
            " which is not a host in the inventory",
        ),
        (
            {"munge_key_b64": "this is not base64!"},
            "group_vars/all.yml: munge_key_b64 is not valid base64",
        ),
        (
            {"munge_key_b64": "c2hvcnQ="},
            "group_vars/all.yml: munge_key_b64 decodes to 5 bytes; a munge key has 32 to 1024",
        ),
    ],
    ids=["partition-group", "shape-memory", "dbd-host", "munge-host", "munge-b64", "munge-size"],
)
def test_slurm_bad_input(write_inventory, state_dir, group_vars, message):
    inv = write_inventory(files={"group_vars/all.yml": group_vars})
    result = run_kiln("provision", "-i", str(inv))
    assert_bad_input(result, message)
    assert not (state_dir / "runs").exists()


def test_a_valid_munge_key_passes(write_inventory):
    import base64

    key = base64.b64encode(bytes(range(256)) * 4).decode()
    inv = write_inventory(files={"group_vars/all.yml": {"munge_key_b64": key}})
    result = run_kiln("inventory", "check", "-i", str(inv))
    assert result.returncode == 0, result.stderr
    assert key not in result.stdout + result.stderr


TOPOLOGY_LABELED = cluster_inventory(
    host_vars={"gpu001": {"topology_path": ["spine1", "leaf1"]}, "gpu002": None}
)


@pytest.mark.parametrize(
    ("group_vars", "files", "message"),
    [
        (
            {"slurm_topology_source": "labels"},
            {},
            "slurm_topology_source labels: 1 compute nodes have no topology_path label: gpu002",
        ),
        (
            {"slurm_topology_source": "file", "slurm_topology_files": ["topology/conf.txt"]},
            {"topology/conf.txt": "SwitchName=s1 Nodes=gpu001\nthis is not a topology line\n"},
            "slurm_topology_source file: {inv}/topology/conf.txt:2: expected SwitchName=,"
            " BlockName= or BlockSizes=",
        ),
        (
            {"slurm_topology_source": "ibnetdiscover", "slurm_topology_files": ["fabric.txt"]},
            {"fabric.txt": "random words\n"},
            "slurm_topology_source ibnetdiscover: {inv}/fabric.txt:1: not ibnetdiscover"
            " output: 'random words'",
        ),
        (
            {"slurm_topology_source": "file", "slurm_topology_files": ["missing.conf"]},
            {},
            "slurm_topology_source file: {inv}/missing.conf: cannot read:"
            " No such file or directory",
        ),
    ],
    ids=["unlabeled-node", "malformed-file", "garbage-ibnetdiscover", "file-not-there"],
)
def test_topology_bad_input(write_inventory, state_dir, group_vars, files, message):
    inv = write_inventory(TOPOLOGY_LABELED, files={"group_vars/all.yml": group_vars, **files})
    result = run_kiln("provision", "-i", str(inv))
    assert_bad_input(result, message.format(inv=inv))
    assert not (state_dir / "runs").exists()


def test_topology_catch_all_places_unlabeled_nodes(write_inventory):
    group_vars = {"slurm_topology_source": "labels", "slurm_topology_missing": "catch-all"}
    inv = write_inventory(TOPOLOGY_LABELED, files={"group_vars/all.yml": group_vars})
    result = run_kiln("inventory", "check", "-i", str(inv), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "inventory": str(inv),
        "groups": {"slurm_compute": ["gpu001", "gpu002"], "slurm_controller": ["ctl1"]},
        "hosts": {
            "ctl1": {"address": "ctl1", "roles": ["slurm_controller"]},
            **{h: {"address": h, "roles": ["slurm_compute"]} for h in ("gpu001", "gpu002")},
        },
        "warnings": [],
        "unchecked": [],
    }
    # What the check built, with the same policy as the command's option: the
    # unlabeled node under the catch-all switch.
    built = run_kiln("topology", "generate", "--from", "labels", "-i", str(inv),
                     "--missing", "catch-all")  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert built.stdout == (
        f"# Generated by Kiln from labels in {inv}. Do not edit: regenerate instead.\n"
        "SwitchName=kiln-unplaced Nodes=gpu002\n"
        "SwitchName=leaf1 Nodes=gpu001\n"
        "SwitchName=spine1 Switches=kiln-unplaced,leaf1\n"
    )
    assert built.stderr == (
        "topology: 2 levels, 3 switches, 2 leaves, 2 nodes, 1-1 nodes per leaf\n"
        "warning: 1 nodes placed under kiln-unplaced: gpu002\n"
    )


@pytest.mark.parametrize(
    ("mounts", "message"),
    [
        (
            [{"name": "a", "path": "/a", "type": "zfs", "source": "x:/y"}],
            "group_vars/all.yml: autofs_mounts[0].type must be one of nfs, nfs4, lustre,"
            " glusterfs, wekafs, bind, generic, got 'zfs' (role autofs)",
        ),
        (
            [
                {"name": "a", "path": "/data", "type": "bind", "source": "/x"},
                {"name": "b", "path": "/data", "type": "bind", "source": "/y"},
            ],
            "group_vars/all.yml: autofs_mounts: mounts a and b both mount on /data",
        ),
        (
            [{"name": "a", "path": "data", "type": "bind", "source": "/x"}],
            "group_vars/all.yml: autofs_mounts: mount a: mount point 'data' must be an"
            " absolute path",
        ),
        (
            [{"name": "a", "path": "/a", "type": "bind", "source": "/x", "groups": ["gpu_su9"]}],
            "group_vars/all.yml: autofs_mounts: mount a: group gpu_su9 is not in the inventory",
        ),
    ],
    ids=["unknown-type", "same-mount-point", "relative-mount-point", "unknown-group"],
)
def test_storage_bad_input(write_inventory, state_dir, mounts, message):
    inv = write_inventory(files={"group_vars/all.yml": {"autofs_mounts": mounts}})
    result = run_kiln("provision", "-i", str(inv))
    assert result.returncode == ExitCode.BAD_INPUT, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"kiln: error: {message}")
    assert not (state_dir / "runs").exists()


def test_inventory_check_reads_every_file_ansible_reads(write_inventory):
    """An extra inventory file declaring a compute node with a bad variable: Ansible
    would read it, so the check does too and names the host and the variable."""
    extra = {"all": {"children": {"slurm_compute": {"hosts": {"gpu999": None}}}}}
    extra["all"]["children"]["slurm_compute"]["hosts"]["gpu999"] = {
        "slurm_node_shape": "not a dict"
    }
    inv = write_inventory(files={"extra.yml": extra})
    result = run_kiln("inventory", "check", "-i", str(inv))
    assert result.returncode == ExitCode.BAD_INPUT
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("kiln: error: extra.yml (host gpu999): slurm_node_shape")
