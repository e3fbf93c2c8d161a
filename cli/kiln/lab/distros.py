"""The releases the lab and Molecule build nodes of: Debian 12 and 13, Ubuntu 22.04 and
24.04. Each is named by its codename (trixie, noble) or as `<family>-<version>`
(debian-13, ubuntu-24.04); images and lab records use the codename."""

import os
from dataclasses import dataclass

from kiln.errors import InputError

# Chooses the lab's release when `kiln lab up` is not given --distro (`make lab OS=...`).
ENV = "KILN_LAB_DISTRO"
DEFAULT = "trixie"


@dataclass(frozen=True)
class Distro:
    codename: str
    family: str  # debian or ubuntu
    version: str  # 13, 24.04
    # The archive as a URL without its scheme (an apt-cacher-ng proxies it by that path),
    # its security updates' archive, and the components a node's apt sources name.
    archive: str
    security: str
    components: tuple[str, ...]
    # Debian 12's debootstrap has no script for later Ubuntu releases: every Ubuntu
    # release uses gutsy's. None: the codename's own.
    debootstrap_script: str | None = None

    @property
    def name(self) -> str:
        return f"{self.family}-{self.version}"

    @property
    def title(self) -> str:
        return f"{self.family.capitalize()} {self.version}"

    @property
    def mirror_env(self) -> str:
        """The variable that points debootstrap at another mirror of the archive."""
        return f"KILN_{self.family.upper()}_MIRROR"

    def sources_list(self) -> str:
        """The apt sources a node image starts with: the real archive (nodes get an apt
        proxy from the base role where the inventory sets one)."""
        parts = " ".join(self.components)
        return (
            f"deb http://{self.archive} {self.codename} {parts}\n"
            f"deb http://{self.archive} {self.codename}-updates {parts}\n"
            f"deb http://{self.security} {self.codename}-security {parts}\n"
        )


# Ubuntu's packages that Kiln installs (Slurm, munge, Prometheus, Lmod, GlusterFS) are in
# universe and the NVIDIA driver's in restricted: the components Ubuntu's own server and
# cloud images enable.
_UBUNTU = {
    "family": "ubuntu",
    "archive": "archive.ubuntu.com/ubuntu",
    "security": "security.ubuntu.com/ubuntu",
    "components": ("main", "restricted", "universe", "multiverse"),
    "debootstrap_script": "gutsy",
}
_DEBIAN = {
    "family": "debian",
    "archive": "deb.debian.org/debian",
    "security": "deb.debian.org/debian-security",
    "components": ("main",),
}

DISTROS: dict[str, Distro] = {
    d.codename: d
    for d in (
        Distro("trixie", version="13", **_DEBIAN),
        Distro("bookworm", version="12", **_DEBIAN),
        Distro("noble", version="24.04", **_UBUNTU),
        Distro("jammy", version="22.04", **_UBUNTU),
    )
}
# Every name --distro takes: codenames and family-version names.
NAMES = [*DISTROS, *(d.name for d in DISTROS.values())]


def find(name: str) -> Distro:
    """The release a codename or a family-version name means; InputError otherwise."""
    for distro in DISTROS.values():
        if name in (distro.codename, distro.name):
            return distro
    raise InputError(f"unknown distro {name!r} (expected one of {', '.join(NAMES)})")


def chosen(name: str | None) -> Distro:
    """The release asked for: NAME, else $KILN_LAB_DISTRO, else Debian 13."""
    return find(name or os.environ.get(ENV) or DEFAULT)
