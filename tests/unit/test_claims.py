"""The README, docs/index.md and `kiln --help` say only what is built: each capability
they name has its role or command in the tree, and each `kiln COMMAND` they show exists.
What is planned goes on the README's one "Coming:" line."""

import re
from pathlib import Path

from click.testing import CliRunner

from kiln import cli

ROOT = Path(__file__).resolve().parents[2]
# Words an operator reads as a promise -> what must exist for it to be true.
CAPABILITIES = {
    r"NVIDIA driver|fabric manager": "roles/nvidia_driver",
    r"HPC-X": "roles/hpcx",
    r"\bpyxis\b": "roles/pyxis",
    r"\benroot\b": "roles/enroot",
    r"NCCL (tuning|environment|settings)": "roles/nccl_env",
    r"GPU stack": "roles/nvidia_driver",
    r"\bdrift\b": "command drift",
    r"health[- ]check": "command health",
    r"burn-in": "command burn-in",
    r"\bmigration\b": "docs/migration.md",
    r"\baccounting (dump|load)\b": "command accounting",
    r"Ansible collection": "galaxy.yml",
}


def _exists(what: str) -> bool:
    if what.startswith("command "):
        return what.split()[1] in sorted(cli.COMMANDS)
    return (ROOT / what).exists()


def _said(readme: str) -> str:
    """The README less the one line that names what is planned (it may wrap onto the
    next lines)."""
    return re.sub(r"(?ms)^Coming:.*?(?:\n\n|\Z)", "", readme)


def _claims() -> dict[str, str]:
    said = _said((ROOT / "README.md").read_text())
    help_text = CliRunner().invoke(cli.cli, ["--help"]).output
    return {"README.md": said, "docs/index.md": (ROOT / "docs/index.md").read_text(),
            "kiln --help": help_text}  # fmt: skip


def _unbacked(claims: dict[str, str], capabilities: dict[str, str]) -> list[str]:
    return [
        f"{where} names {pattern!r} but {what} is not in the tree"
        for where, text in claims.items()
        for pattern, what in capabilities.items()
        if re.search(pattern, text, re.IGNORECASE) and not _exists(what)
    ]


def test_every_named_capability_exists():
    assert _unbacked(_claims(), CAPABILITIES) == []


def test_every_kiln_command_shown_exists():
    commands = set(cli.COMMANDS)
    shown = {
        word for text in _claims().values() for word in re.findall(r"\bkiln ([a-z][a-z-]+)", text)
    }
    assert shown - commands == set()


def test_the_check_catches_a_claim():
    """The check itself: a README that promised what the tree lacks would fail it."""
    readme = "Kiln ships a Terraform provider.\n\nComing: pyxis, a\nSlurm REST gateway.\n"
    capabilities = {
        r"Terraform provider": "terraform/provider",
        r"\bpyxis\b": "no/such/pyxis",
        r"REST gateway": "no/such/gateway",
    }
    assert _unbacked({"README.md": _said(readme)}, capabilities) == [
        "README.md names 'Terraform provider' but terraform/provider is not in the tree"
    ]
