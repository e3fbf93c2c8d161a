"""kiln-mount-check (installed on nodes by the autofs role) on this machine: what it
says about a path that is not a mount (an automount's, a mount unit's), an optional
mount, and a missing config."""

import json
import subprocess
import sys

from kiln import paths

SCRIPT = paths.roles_dir() / "autofs" / "files" / "kiln-mount-check"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def write(tmp_path, mounts) -> str:
    config = tmp_path / "mounts.json"
    config.write_text(json.dumps(mounts))
    return str(config)


def mount(tmp_path, name, **extra) -> dict:
    directory = tmp_path / name
    directory.mkdir()
    return {
        "name": name,
        "path": str(directory),
        "indirect": False,
        "fstype": "nfs",
        "source": f"nas:/{name}",
        "server": "nas",
        **extra,
    }


def test_a_directory_that_is_not_mounted_fails_a_required_mount(tmp_path):
    config = write(tmp_path, [mount(tmp_path, "data", required=True)])
    result = run("--config", config, "--timeout", "5")
    assert result.returncode == 1
    assert result.stdout == (
        f"FAIL data {tmp_path}/data: not mounted after access: autofs could not mount"
        " nas:/data (server nas)\n"
    )


def test_a_mount_made_at_boot_names_its_unit(tmp_path):
    data = mount(tmp_path, "data", unit="data.mount")
    missing = {**mount(tmp_path, "gone", unit="gone.mount"), "path": str(tmp_path / "none")}
    result = run("--config", write(tmp_path, [data, missing]), "--timeout", "5")
    assert result.returncode == 1
    assert result.stdout == (
        f"FAIL data {tmp_path}/data: not mounted: data.mount has not mounted nas:/data"
        " (server nas)\n"
        f"FAIL gone {tmp_path}/none: gone.mount has not mounted nas:/gone (server nas)\n"
    )


def test_an_optional_mount_only_warns(tmp_path):
    config = write(tmp_path, [mount(tmp_path, "scratch", required=False)])
    result = run("--config", config, "--json")
    assert result.returncode == 0
    (checked,) = json.loads(result.stdout)["mounts"]
    assert checked["status"] == "WARN"


def test_only_the_named_mounts(tmp_path):
    config = write(tmp_path, [mount(tmp_path, "a"), mount(tmp_path, "b")])
    assert run("--config", config, "b").stdout.startswith("FAIL b ")


def test_a_missing_config_is_exit_2(tmp_path):
    result = run("--config", str(tmp_path / "nope.json"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"kiln-mount-check: cannot read {tmp_path}/nope.json")
