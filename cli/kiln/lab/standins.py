"""STAND-IN release packages for the lab and Molecule, not NVIDIA's: the real ones come
from GitHub, which the lab and CI cannot reach. Each is built with dpkg-deb under the
upstream name and file layout, so what the roles do with it is real (the sha256 pin,
dpkg, the files written around it); it does nothing else.

    python -m kiln.lab.standins enroot OUT VERSION   -> OUT/v<VERSION>/*.deb (GitHub's layout)
"""

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from kiln.errors import ExitCode, KilnError

ENROOT_VERSION = "3.5.0"
LABEL = "STAND-IN built by Kiln for tests and the lab, not NVIDIA's"
# Hooks enroot enables itself, and those it ships in /usr/share/enroot/hooks.d for a
# site to enable (Kiln's enroot role links the Slurm ones).
ENROOT_HOOKS = ("10-cgroups.sh", "10-devices.sh", "10-home.sh", "98-nvidia.sh", "99-mellanox.sh")
ENROOT_EXTRA_HOOKS = ("50-slurm-pmi.sh", "50-slurm-pytorch.sh", "50-mig-config.sh", "50-sharp.sh")


def _arch() -> str:
    return subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _write(root: Path, files: dict[str, tuple[str, int]]) -> None:
    for relative, (text, mode) in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)


def _build(root: Path, out: Path) -> None:
    done = subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(root), str(out)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise KilnError(
            f"dpkg-deb could not build {out.name}: {done.stderr.strip()}", ExitCode.FAILED
        )


def enroot(out: Path, version: str = ENROOT_VERSION) -> dict[str, str]:
    """enroot_<v>-1_<arch>.deb and enroot+caps_<v>-1_<arch>.deb under out/v<version>/;
    returns {package: sha256}."""
    arch = _arch()
    release = out / f"v{version}"
    release.mkdir(parents=True, exist_ok=True)
    control = "Package: {name}\nVersion: {version}-1\nArchitecture: {arch}\n{extra}"
    control += "Maintainer: Kiln tests <kiln@localhost>\nDescription: {label}\n"
    script = f'#!/bin/sh\n# {LABEL}\n[ "$1" = version ] && echo {version} && exit 0\n'
    script += 'echo "enroot stand-in: $*" >&2\nexit 1\n'
    enroot_files = {
        "DEBIAN/control": (
            control.format(name="enroot", version=version, arch=arch, extra="", label=LABEL),
            0o644,
        ),
        "DEBIAN/conffiles": ("/etc/enroot/enroot.conf\n", 0o644),
        "usr/bin/enroot": (script, 0o755),
        "usr/bin/enroot-mksquashovlfs": (f"#!/bin/sh\n# {LABEL}\nexit 0\n", 0o755),
        "usr/bin/enroot-aufs2ovlfs": (f"#!/bin/sh\n# {LABEL}\nexit 0\n", 0o755),
        "etc/enroot/enroot.conf": ("#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n", 0o644),
        "etc/enroot/mounts.d/10-system.fstab": (
            "/etc/hosts /etc/hosts none x-create=file,bind,ro,nosuid,nodev,noexec,nofail,silent\n",
            0o644,
        ),
        "etc/enroot/environ.d/10-terminal.env": ("TERM\n", 0o644),
        **{f"etc/enroot/hooks.d/{h}": (f"#!/bin/bash\n# {LABEL}\n", 0o755) for h in ENROOT_HOOKS},
        **{
            f"usr/share/enroot/hooks.d/{h}": (f"#!/bin/bash\n# {LABEL}\n", 0o755)
            for h in ENROOT_EXTRA_HOOKS
        },
    }
    caps_files = {
        "DEBIAN/control": (
            control.format(
                name="enroot+caps",
                version=version,
                arch=arch,
                extra=f"Depends: enroot (= {version}-1)\n",
                label=LABEL,
            ),
            0o644,
        ),
        "usr/share/doc/enroot+caps/README": (f"{LABEL}\n", 0o644),
    }
    digests = {}
    with tempfile.TemporaryDirectory() as work:
        for name, files in (("enroot", enroot_files), ("enroot+caps", caps_files)):
            root = Path(work) / name
            _write(root, files)
            package = release / f"{name}_{version}-1_{arch}.deb"
            _build(root, package)
            digests[name] = hashlib.sha256(package.read_bytes()).hexdigest()
    return digests


def lab_enroot(directory: Path, version: str = ENROOT_VERSION) -> dict[str, object]:
    """The lab's enroot settings: its stand-in packages, built once into `directory`,
    pinned by their sha256 and fetched from there by the control node."""
    packages = {p.name.split("_", 1)[0]: p for p in (directory / f"v{version}").glob("*.deb")}
    if set(packages) != {"enroot", "enroot+caps"}:
        digests = enroot(directory, version)
    else:
        digests = {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in packages.items()}
    return {
        "enroot_version": version,
        "enroot_sha256": digests["enroot"],
        "enroot_caps_sha256": digests["enroot+caps"],
        "enroot_base_url": directory.resolve().as_uri(),
        "enroot_fetch": "control",
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "enroot":
        print("usage: python -m kiln.lab.standins enroot OUT VERSION", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    for name, digest in enroot(Path(argv[1]), argv[2]).items():
        print(f"{name} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
