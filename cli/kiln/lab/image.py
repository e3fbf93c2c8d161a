"""Debian and Ubuntu images built once with debootstrap: the lab's node image (systemd
and sshd) and the base of Kiln's execution environment (python3, pip and an SSH client,
for ansible-builder: docs/ansible.md). The releases are kiln.lab.distros'.

Each image carries a label with the hash of its recipe; it is rebuilt only when the
recipe (this file's settings for the distro) changes.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kiln import files
from kiln.errors import ExitCode, KilnError
from kiln.lab import distros, doctor, ubuntu_keyring
from kiln.lab.podman import inspect, podman

PACKAGES = ["python3", "systemd", "systemd-sysv", "dbus", "iproute2", "sudo", "openssh-server"]
# Units that cannot work in a container and would leave systemd "degraded".
MASKED_UNITS = ["systemd-modules-load.service", "getty@tty1.service", "console-getty.service"]
RECIPE_VERSION = 3  # bump when the node image's build steps below change
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

# The execution environment's base: what ansible-builder's scripts run (bash, python3
# with pip and venv, a package manager) and what Ansible needs on a control node (an
# SSH client, CA certificates for pip).
EE_PACKAGES = ["python3", "python3-pip", "python3-venv", "openssh-client", "ca-certificates"]
EE_RECIPE_VERSION = 1  # bump when the EE base's build steps below change
EE_IMAGE_REPO = "localhost/kiln-ee-base"
# ansible-builder runs `$PKGMGR install -y PKG...` and `$PKGMGR clean all` (dnf's
# words): on Debian, refresh the package lists first and drop them after.
EE_APT = "/usr/local/bin/kiln-apt"
_EE_APT_SCRIPT = """#!/bin/sh
# ansible-builder's package manager on Debian (options.package_manager_path).
set -e
export DEBIAN_FRONTEND=noninteractive
case "$1" in
  install) shift; apt-get update -qq; exec apt-get install --no-install-recommends "$@" ;;
  clean) apt-get clean; rm -rf /var/lib/apt/lists/* ;;
  *) exec apt-get "$@" ;;
esac
"""
# The build host's own certificate authorities (a site's TLS-inspecting proxy, a
# private index): pip in the image trusts what the host trusts.
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")


@dataclass(frozen=True)
class Recipe:
    """One debootstrap image: its name, packages, how its tree is finished and the
    podman import changes (CMD, ENV) it starts with."""

    repo: str
    what: str
    packages: list[str]
    configure: Callable[[Path, str], None]
    changes: list[str]
    # Everything else the image is made from: a change here rebuilds it.
    fingerprint: Callable[[], dict] = field(default=dict)


def _finish_apt(root: Path, distro: str) -> None:
    # debootstrap pointed apt at the build host's cache; images get the real archive
    # (and nodes an apt proxy from the base role when the inventory sets one).
    (root / "etc/apt/sources.list").write_text(distros.find(distro).sources_list())
    for cached in (root / "var/cache/apt/archives").glob("*.deb"):
        cached.unlink()


def _configure_node(root: Path, distro: str) -> None:
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
    _finish_apt(root, distro)
    (root / "etc/machine-id").write_text("")
    (root / "etc/hostname").unlink(missing_ok=True)
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)


def _host_cas() -> list[Path]:
    return sorted(HOST_CA_DIR.glob("*.crt")) if HOST_CA_DIR.is_dir() else []


def _configure_ee_base(root: Path, distro: str) -> None:
    _finish_apt(root, distro)
    apt = root / EE_APT.lstrip("/")
    apt.write_text(_EE_APT_SCRIPT)
    apt.chmod(0o755)
    if cas := _host_cas():
        target = root / HOST_CA_DIR.relative_to("/")
        target.mkdir(parents=True, exist_ok=True)
        for ca in cas:
            shutil.copyfile(ca, target / ca.name)
        subprocess.run(
            ["chroot", str(root), "update-ca-certificates"], capture_output=True, check=True
        )
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)


NODE = Recipe(
    repo=IMAGE_REPO,
    what="node image",
    packages=PACKAGES,
    configure=_configure_node,
    changes=['CMD=["/sbin/init"]'],
    fingerprint=lambda: {
        "v": RECIPE_VERSION,
        "packages": PACKAGES,
        "masked": MASKED_UNITS,
        "keygen": _KEYGEN_UNIT,
    },
)

EE_BASE = Recipe(
    repo=EE_IMAGE_REPO,
    what="execution environment base",
    packages=EE_PACKAGES,
    configure=_configure_ee_base,
    # ansible-core wants a UTF-8 locale; C.UTF-8 is built into Debian's libc.
    changes=['CMD=["/bin/bash"]', "ENV=LANG=C.UTF-8"],
    fingerprint=lambda: {
        "v": EE_RECIPE_VERSION,
        "packages": EE_PACKAGES,
        "apt": _EE_APT_SCRIPT,
        "cas": [hashlib.sha256(files.read_bytes(ca)).hexdigest() for ca in _host_cas()],
    },
)


def image_name(distro: str, recipe: Recipe = NODE) -> str:
    return f"{recipe.repo}:{distro}"


def recipe_hash(distro: str, recipe: Recipe = NODE) -> str:
    made_of = json.dumps({"distro": distro, **recipe.fingerprint()}, sort_keys=True)
    return hashlib.sha256(made_of.encode()).hexdigest()[:16]


def is_current(distro: str, recipe: Recipe = NODE) -> bool:
    info = inspect("image", image_name(distro, recipe))
    labels = ((info or {}).get("Config") or {}).get("Labels") or {}
    return labels.get(RECIPE_LABEL) == recipe_hash(distro, recipe)


def mirror(distro: str = distros.DEFAULT) -> str:
    """Where debootstrap downloads from: $KILN_DEBIAN_MIRROR (or $KILN_UBUNTU_MIRROR),
    else the local apt cache, else the archive itself."""
    release = distros.find(distro)
    if env := os.environ.get(release.mirror_env):
        return env
    if doctor.apt_cache_available():
        return f"http://127.0.0.1:{doctor.APT_CACHE_PORT}/{release.archive}"
    return f"http://{release.archive}"


def _debootstrap(recipe: Recipe, release: distros.Distro, root: Path, tmp: Path) -> list[str]:
    """The command that builds the tree; Ubuntu's takes the keyring of Ubuntu's archive
    and the script shared by Ubuntu's releases."""
    source = mirror(release.codename)
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(recipe.packages)}"]
    if release.family == "ubuntu":
        keyring = ubuntu_keyring.fetch(source, release.codename, tmp / "keyring")
        cmd.append(f"--keyring={keyring}")
    cmd += [release.codename, str(root), source]
    if release.debootstrap_script:
        cmd.append(f"/usr/share/debootstrap/scripts/{release.debootstrap_script}")
    return cmd


def ensure_image(
    distro: str, log: Callable[[str], None], rebuild: bool = False, recipe: Recipe = NODE
) -> str:
    """Build the recipe's image unless one of the current recipe exists; return its name.
    DISTRO: a codename or family-version name (kiln.lab.distros); images carry the
    codename."""
    distro = distros.find(distro).codename
    name = image_name(distro, recipe)
    if not rebuild and is_current(distro, recipe):
        return name
    with _building(name):
        # Another build of it (`make test`'s lanes each bring up what they need) may
        # have finished while this one waited.
        if not rebuild and is_current(distro, recipe):
            return name
        _build(distro, name, recipe, log)
    return name


def build_lock(name: str) -> Path:
    """Podman's images are the machine's, whoever's state directory a run has: so is
    the lock that lets one build of an image run at a time."""
    slug = name.replace("/", "_").replace(":", "_")
    return Path(tempfile.gettempdir()) / f"kiln-image-{slug}.lock"


@contextlib.contextmanager
def _building(name: str) -> Iterator[None]:
    try:
        fd = os.open(build_lock(name), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:  # another user's lock, or no temporary directory: build unguarded
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when closed, also by a killed run
        yield
    finally:
        os.close(fd)


def _build(distro: str, name: str, recipe: Recipe, log: Callable[[str], None]) -> None:
    log(f"building {recipe.what} {name} with debootstrap (once; about a minute)")
    with tempfile.TemporaryDirectory(prefix="kiln-rootfs-") as tmp:
        root = Path(tmp) / "root"
        cmd = _debootstrap(recipe, distros.find(distro), root, Path(tmp))
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            lines = [
                ln for ln in (result.stdout + result.stderr).splitlines() if ln.startswith("E:")
            ]
            detail = lines[-1] if lines else f"rc={result.returncode}"
            raise KilnError(f"debootstrap {distro} failed: {detail}", ExitCode.FAILED)
        recipe.configure(root, distro)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
        shutil.rmtree(root, ignore_errors=True)
        changes = [*recipe.changes, f"LABEL={RECIPE_LABEL}={recipe_hash(distro, recipe)}"]
        podman("import", *(arg for c in changes for arg in ("--change", c)), str(tarball), name)
