"""What a node has that the NVIDIA driver stack cares about, from sysfs: GPUs, NVSwitches
and HCAs on the PCI bus (the role's kiln-gpu-detect reads them), and which RDMA stack
and GPUDirect RDMA path it has. What each GPU model is: kiln.gpu_models."""

from dataclasses import dataclass, field
from typing import Any

NVIDIA = "0x10de"
MELLANOX = "0x15b3"
# PCI classes (the first four hex digits of sysfs' class: class and subclass).
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible, 3D controller
NVSWITCH_CLASS = "0x0680"  # bridge, "other"
HCA_CLASSES = ("0x0200", "0x0207")  # Ethernet (RoCE), InfiniBand


@dataclass(frozen=True)
class PciDevice:
    """One entry of /sys/bus/pci/devices, as the role's detect script reads it."""

    address: str  # 0000:00:06.0
    vendor: str  # 0x10de
    device: str  # 0x2330
    pci_class: str  # 0x030200
    driver: str = ""  # the bound kernel driver's name, or ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PciDevice":
        return cls(
            address=str(data.get("address", "")),
            vendor=str(data.get("vendor", "")).lower(),
            device=str(data.get("device", "")).lower(),
            pci_class=str(data.get("class", "")).lower(),
            driver=str(data.get("driver") or ""),
        )

    def is_class(self, *classes: str) -> bool:
        return self.pci_class[:6] in classes


@dataclass
class Hardware:
    """What the node has that the driver stack cares about."""

    gpus: list[PciDevice] = field(default_factory=list)
    nvswitches: list[PciDevice] = field(default_factory=list)
    hcas: list[PciDevice] = field(default_factory=list)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)


def detect(devices: list[dict[str, Any]]) -> Hardware:
    """Sort sysfs' PCI devices into GPUs, NVSwitches and Mellanox/NVIDIA HCAs."""
    found = Hardware()
    for device in map(PciDevice.from_json, devices):
        if device.vendor == NVIDIA and device.is_class(*GPU_CLASSES):
            found.gpus.append(device)
        elif device.vendor == NVIDIA and device.is_class(NVSWITCH_CLASS):
            found.nvswitches.append(device)
        elif device.vendor == MELLANOX and device.is_class(*HCA_CLASSES):
            found.hcas.append(device)
    for kind in (found.gpus, found.nvswitches, found.hcas):
        kind.sort(key=lambda d: d.address)
    return found


def rdma_stack(packages: dict[str, str]) -> str:
    """Which RDMA stack is installed, from installed package names and versions:
    `doca-ofed`, `mlnx-ofed` (both carry the peer-memory symbols nvidia-peermem needs),
    `inbox` (the distribution's rdma-core) or `none`."""
    if any(name.startswith("doca-ofed") or name == "doca-roce" for name in packages):
        return "doca-ofed"
    if "mlnx-ofed-kernel-dkms" in packages or "mlnx-ofed-kernel-utils" in packages:
        return "mlnx-ofed"
    if "rdma-core" in packages:
        return "inbox"
    return "none"


def rdma_path(stack: str, kernel_modules: str) -> str:
    """How GPUDirect RDMA can work on the node: `peermem` (nvidia-peermem over OFED's
    peer-memory API), `dmabuf` (open kernel modules with inbox rdma-core), or `none`."""
    if stack in ("doca-ofed", "mlnx-ofed"):
        return "peermem"
    if stack == "inbox" and kernel_modules == "open":
        return "dmabuf"
    return "none"
