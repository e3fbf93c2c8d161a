"""A thin wrapper over the podman command line; failures become one-line KilnErrors."""

import subprocess
from typing import Any

from kiln import files
from kiln.errors import ExitCode, KilnError


def podman(*args: str, check: bool = True, stdin: bytes | None = None) -> str:
    try:
        result = subprocess.run(["podman", *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise KilnError("podman is not installed (run `kiln lab doctor`)") from None
    if check and result.returncode != 0:
        detail = (
            " ".join(result.stderr.decode(errors="replace").split()) or f"rc={result.returncode}"
        )
        raise KilnError(f"podman {args[0]} failed: {detail}", ExitCode.FAILED)
    return result.stdout.decode(errors="replace")


def exists(kind: str, name: str) -> bool:
    """kind: container, network or image."""
    verb = {"container": "container", "network": "network", "image": "image"}[kind]
    return (
        subprocess.run(
            ["podman", verb, "exists", name], capture_output=True, check=False
        ).returncode
        == 0
    )


def answers(container: str) -> bool:
    """The container runs a command: podman's record of a running container outlives the
    container when the host restarts without podman's cleanup (or is restored from a
    snapshot), and only an exec tells the two apart."""
    done = subprocess.run(["podman", "exec", container, "true"], capture_output=True, check=False)
    return done.returncode == 0


def inspect(kind: str, name: str) -> dict[str, Any] | None:
    out = podman(kind, "inspect", name, check=False)
    try:
        data = files.loads(out)
    except ValueError:
        return None
    return data[0] if data else None


def containers_with_label(label: str) -> list[dict[str, Any]]:
    out = podman("ps", "-a", "--filter", f"label={label}", "--format", "json")
    return files.loads(out or "[]")
