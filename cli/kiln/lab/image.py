"""The lab's node image: Debian with systemd and sshd, built once with debootstrap.

The image carries a label with the hash of its recipe; it is rebuilt only when the
recipe (this file's settings for the distro) changes.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from kiln.errors import ExitCode, InputError, KilnError
from kiln.lab import doctor
from kiln.lab.podman import inspect, podman

DISTROS = {"trixie": "13", "bookworm": "12"}
DEFAULT_DISTRO = "trixie"
PACKAGES = ["python3", "systemd", "systemd-sysv", "dbus", "iproute2", "sudo", "openssh-server"]
# Units that cannot work in a container and would leave systemd "degraded".
MASKED_UNITS = ["systemd-modules-load.service", "getty@tty1.service", "console-getty.service"]
RECIPE_VERSION = 3  # bump when the build steps below change
IMAGE_REPO = "localhost/kiln-node"
RECIPE_LABEL = "io.kiln.recipe"

# Host keys are made on each node's first boot, not baked into the shared image.
_KEYGEN_UNIT = """[Unit]
Description=Generate this node's SSH host keys (Kiln lab)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
"""


def image_name(distro: str) -> str:
    return f"{IMAGE_REPO}:{distro}"


def recipe_hash(distro: str) -> str:
    recipe = json.dumps(
        {
            "v": RECIPE_VERSION,
            "distro": distro,
            "packages": PACKAGES,
            "masked": MASKED_UNITS,
            "keygen": _KEYGEN_UNIT,
        },
        sort_keys=True,
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def is_current(distro: str) -> bool:
    info = inspect("image", image_name(distro))
    labels = ((info or {}).get("Config") or {}).get("Labels") or {}
    return labels.get(RECIPE_LABEL) == recipe_hash(distro)


def mirror() -> str:
    """Where debootstrap downloads from: $KILN_DEBIAN_MIRROR, else the local apt cache."""
    if env := os.environ.get("KILN_DEBIAN_MIRROR"):
        return env
    if doctor.apt_cache_available():
        return f"http://127.0.0.1:{doctor.APT_CACHE_PORT}/deb.debian.org/debian"
    return "http://deb.debian.org/debian"


def _configure_rootfs(root: Path, distro: str) -> None:
    systemd = root / "etc/systemd/system"
    for unit in MASKED_UNITS:
        target = systemd / unit
        target.unlink(missing_ok=True)
        target.symlink_to("/dev/null")
    (systemd / "kiln-ssh-keygen.service").write_text(_KEYGEN_UNIT)
    wants = systemd / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "kiln-ssh-keygen.service").unlink(missing_ok=True)
    (wants / "kiln-ssh-keygen.service").symlink_to("/etc/systemd/system/kiln-ssh-keygen.service")
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # debootstrap pointed apt at the build host's cache; nodes get the real archive
    # (and an apt proxy from the base role when the inventory sets one).
    (root / "etc/apt/sources.list").write_text(
        f"deb http://deb.debian.org/debian {distro} main\n"
        f"deb http://deb.debian.org/debian {distro}-updates main\n"
        f"deb http://deb.debian.org/debian-security {distro}-security main\n"
    )
    (root / "etc/machine-id").write_text("")
    (root / "etc/hostname").unlink(missing_ok=True)
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    for cached in (root / "var/cache/apt/archives").glob("*.deb"):
        cached.unlink()


def ensure_image(distro: str, log: Callable[[str], None], rebuild: bool = False) -> str:
    """Build the node image unless an image of the current recipe exists; return its name."""
    if distro not in DISTROS:
        raise InputError(f"unknown distro {distro!r} (expected one of {', '.join(DISTROS)})")
    name = image_name(distro)
    if not rebuild and is_current(distro):
        return name
    log(f"building node image {name} with debootstrap (once; about a minute)")
    with tempfile.TemporaryDirectory(prefix="kiln-rootfs-") as tmp:
        root = Path(tmp) / "root"
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            distro,
            str(root),
            mirror(),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            lines = [
                ln for ln in (result.stdout + result.stderr).splitlines() if ln.startswith("E:")
            ]
            detail = lines[-1] if lines else f"rc={result.returncode}"
            raise KilnError(f"debootstrap {distro} failed: {detail}", ExitCode.FAILED)
        _configure_rootfs(root, distro)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
        shutil.rmtree(root, ignore_errors=True)
        podman(
            "import",
            "--change",
            'CMD=["/sbin/init"]',
            "--change",
            f"LABEL={RECIPE_LABEL}={recipe_hash(distro)}",
            str(tarball),
            name,
        )
    return name
