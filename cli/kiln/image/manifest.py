"""The manifest `kiln image build` writes beside an image: the pins it was built with
(versions and sha256 of what Kiln downloads or installs by version), the packages the
build found installed, the base image, the outputs and the Kiln version."""

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kiln.inventory.spec import ClusterSpec
from kiln.roles import autofs

MANIFEST_FILE = "manifest.json"
OCI_FILE = "image.oci.tar"
ROOTFS_FILE = "rootfs.tar"
FORMAT = 1  # bump when a field changes meaning

# Each pinned component's settings, by role (the roles' own variable names, without
# their prefix): what a node from the image carries at these versions.
PINNED = {
    "nvidia_driver": ["source", "version", "kernel_modules", "fabric_manager"],
    "nccl_tests": ["version", "sha256", "cuda_version", "nccl_version"],
    "hpcx": ["version", "sha256", "cuda"],
    "enroot": ["version", "sha256", "caps_sha256"],
    "pyxis": ["version", "sha256"],
}
# Packages whose installed version the manifest records, read in the build container.
PACKAGES = [
    "slurmd",
    "slurm-client",
    "munge",
    *autofs.packages(autofs.CLIENT_PACKAGES),
    "openmpi-bin",
    "lmod",
    "environment-modules",
    "enroot",
    "enroot+caps",
    "nvidia-driver",
    "nvidia-kernel-dkms",
    "nvidia-open-kernel-dkms",
    "cuda-drivers",
    "nvidia-fabricmanager",
    "prometheus-node-exporter",
]


@dataclass
class OutputFile:
    name: str
    bytes: int
    sha256: str


@dataclass
class Manifest:
    kiln_version: str
    built: str  # UTC, ISO 8601
    run: str  # the ansible-runner run that applied the roles (`kiln runs show RUN`)
    inventory: str
    like: str  # the compute node whose variables the image was built with
    base_image: dict[str, str]  # name, id
    image: dict[str, str]  # name, id
    pins: dict[str, dict[str, Any]]
    packages: dict[str, str]
    files: list[OutputFile] = field(default_factory=list)
    format: int = FORMAT

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pins(spec: ClusterSpec, host: str) -> dict[str, dict[str, Any]]:
    """Each pinned component as HOST's variables set it; a component without a version
    is in the manifest with an empty one (not in the image, or the distribution's)."""
    from kiln.inventory import pins as inventory_pins  # its downloader is not for --help

    found = {}
    for role, names in PINNED.items():
        settings = inventory_pins.settings_of(spec, role, host) or {}
        found[role] = {name: settings.get(name, "") for name in names}
    return found


def parse_dpkg(text: str) -> dict[str, str]:
    """`dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\\n'` lines: the
    installed packages ("ii") and their versions."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "ii":
            found[parts[0]] = parts[2]
    return dict(sorted(found.items()))


def output_file(path: Path) -> OutputFile:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return OutputFile(path.name, path.stat().st_size, digest.hexdigest())
