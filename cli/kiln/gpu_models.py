"""What each NVIDIA data-center GPU model is, from NVIDIA's datasheets: its links, memory
and peak throughput. Keyed by the name `nvidia-smi` prints (product_name), which the
nvidia_driver role records as the node's `gpu_model` fact
(kiln.roles.nvidia_driver.node_plan.local_fact).

The one home of these numbers: the health role's expected NVLinks, and the validation
profiles' notes on peak throughput, refer here. Where each number comes from: docs/gpu.md.
Standard library only (the health role's filter and `kiln inventory check` import it).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    name: str  # nvidia-smi's product_name
    memory_gb: int  # HBM, as the datasheet states it (10^9 bytes)
    nvlinks: int  # NVLinks per GPU on its baseboard, each to an NVSwitch
    nvlink_gb_s: int  # NVLink bandwidth per GPU, both directions together (GB/s)
    bf16_tflops: float  # dense BF16 Tensor Core peak (datasheets quote twice this, sparse)


MODELS: dict[str, GpuModel] = {
    model.name: model
    for model in (
        # A100 SXM4: NVLink 3, 12 links x 50 GB/s (HGX A100 datasheet).
        GpuModel("NVIDIA A100-SXM4-40GB", 40, 12, 600, 312),
        GpuModel("NVIDIA A100-SXM4-80GB", 80, 12, 600, 312),
        # H100 SXM5 and H200 SXM: NVLink 4, 18 links x 50 GB/s.
        GpuModel("NVIDIA H100 80GB HBM3", 80, 18, 900, 989),
        GpuModel("NVIDIA H200", 141, 18, 900, 989),
        # B200 (HGX/DGX B200, 1,000 W): NVLink 5, 18 links x 100 GB/s. The package holds
        # 192 GB; NVIDIA's DGX/HGX B200 datasheets state 180 GB usable per GPU.
        GpuModel("NVIDIA B200", 180, 18, 1800, 2250),
        # GB200 (NVL72 compute trays, 4 GPUs beside 2 Grace CPUs, 1,200 W): NVLink 5 to
        # the rack's NVSwitch trays, which sit off the node's PCI bus. 13.4 TB HBM3e per
        # 72 GPUs; 180 PFLOP/s dense BF16 per 72 (the datasheet's 360 is sparse).
        GpuModel("NVIDIA GB200", 186, 18, 1800, 2500),
    )
}

# PCI device ids (vendor 0x10de) of the models above, as the PCI ID Repository
# (pci.ids 2025.06.09, Debian's pci.ids package) lists them, so a node's GPUs are known
# from sysfs before any driver is installed (`kiln inventory discover`).
PCI_DEVICE_IDS: dict[str, str] = {
    "0x20b0": "NVIDIA A100-SXM4-40GB",  # GA100 [A100 SXM4 40GB]
    "0x20b2": "NVIDIA A100-SXM4-80GB",  # GA100 [A100 SXM4 80GB]
    "0x2330": "NVIDIA H100 80GB HBM3",  # GH100 [H100 SXM5 80GB]
    "0x2335": "NVIDIA H200",  # GH100 [H200 SXM 141GB]
    "0x2901": "NVIDIA B200",  # GB100 [B200]
    "0x2941": "NVIDIA GB200",  # GB100 [HGX GB200]
}


def model(name: str) -> GpuModel | None:
    """The model nvidia-smi names, or None for one this table does not hold."""
    return MODELS.get(name.strip())


def by_pci_id(device: str) -> GpuModel | None:
    """The model of an NVIDIA PCI device id (sysfs' `device`, 0x2330), or None."""
    name = PCI_DEVICE_IDS.get(device.strip().lower())
    return MODELS[name] if name else None


def nvlinks_expected(name: str, nvswitches: int) -> int:
    """NVLinks every GPU must show active: its model's count where NVSwitches connect
    the GPUs (HGX/DGX baseboards). 0, not judged, without NVSwitches (PCIe cards, NVLink
    bridges) or for a model this table does not hold (A800 and H800 have 8 links, not
    18: a guess would drain every such node)."""
    found = model(name)
    return found.nvlinks if found and nvswitches > 0 else 0
