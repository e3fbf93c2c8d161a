"""What runs on the nodes (the node library, the collection's modules, the roles' node
programs) runs on the Python of every OS Kiln supports: the oldest is Ubuntu 22.04's
3.10, while the control side needs 3.11. vermin reads the code for the newest syntax and
standard-library names it uses (datetime.UTC is 3.11's, say)."""

import subprocess
import sys
import tomllib
from pathlib import Path

from kiln.roles import SUPPORTED

REPO = Path(__file__).resolve().parents[2]
# Each supported release's python3 (its archive's python3 package).
NODE_PYTHON = {
    ("Debian", "12"): (3, 11),
    ("Debian", "13"): (3, 13),
    ("Ubuntu", "22.04"): (3, 10),
    ("Ubuntu", "24.04"): (3, 12),
}
OLDEST = min(NODE_PYTHON.values())


def node_code() -> list[Path]:
    found = [*REPO.glob("node_library/kiln_node/*.py"), *REPO.glob("plugins/modules/*.py")]
    for path in REPO.glob("roles/*/files/*"):
        if path.is_file() and (
            path.suffix == ".py" or path.read_bytes().startswith(b"#!/usr/bin/python3")
        ):
            found.append(path)
    return sorted(found)


def test_every_supported_release_has_its_python_named():
    releases = {(name, version) for name, versions in SUPPORTED.items() for version in versions}
    assert set(NODE_PYTHON) == releases


def test_the_node_code_needs_no_newer_python_than_the_oldest_release_has():
    files = node_code()
    assert {p.name for p in files} >= {
        "kiln-health-active",
        "kiln-probe-launcher",
        "health_checks.py",
    }
    target = f"-t={OLDEST[0]}.{OLDEST[1]}-"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("vermin")), target, "--violations", "--no-tips",
         "--eval-annotations", "--no-parse-comments", *map(str, files)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_checks_the_node_code_for_the_same_python():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["tool"]["ruff"]["per-file-target-version"] == {
        "node_library/kiln_node/**": f"py{OLDEST[0]}{OLDEST[1]}",
        "plugins/modules/**": f"py{OLDEST[0]}{OLDEST[1]}",
        "roles/*/files/**": f"py{OLDEST[0]}{OLDEST[1]}",
    }
