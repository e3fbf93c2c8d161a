"""GPU model facts (kiln.gpu_models) and the NVLinks the health check expects from them."""

import pytest

from kiln import gpu_models
from kiln.gpu_models import GpuModel


def test_each_model_as_nvidias_datasheets_state_it():
    models = gpu_models.MODELS
    assert models == {
        "NVIDIA A100-SXM4-40GB": GpuModel("NVIDIA A100-SXM4-40GB", 40, 12, 600, 312),
        "NVIDIA A100-SXM4-80GB": GpuModel("NVIDIA A100-SXM4-80GB", 80, 12, 600, 312),
        "NVIDIA H100 80GB HBM3": GpuModel("NVIDIA H100 80GB HBM3", 80, 18, 900, 989),
        "NVIDIA H200": GpuModel("NVIDIA H200", 141, 18, 900, 989),
        "NVIDIA B200": GpuModel("NVIDIA B200", 180, 18, 1800, 2250),
        "NVIDIA GB200": GpuModel("NVIDIA GB200", 186, 18, 1800, 2500),
    }


def test_a_model_is_found_by_the_name_nvidia_smi_prints():
    # The H100 name as a real node printed it (fixtures/gpu/h100-80gb-hbm3-vm).
    h100 = gpu_models.MODELS["NVIDIA H100 80GB HBM3"]
    assert gpu_models.model(" NVIDIA H100 80GB HBM3\n") == h100
    assert gpu_models.model("NVIDIA H100 PCIe") is None
    assert gpu_models.model("") is None


@pytest.mark.parametrize(
    ("name", "nvswitches", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", 6, 12),  # HGX A100: 12 links (was 18: every node drained)
        ("NVIDIA A100-SXM4-40GB", 6, 12),
        ("NVIDIA H100 80GB HBM3", 4, 18),
        ("NVIDIA H200", 4, 18),
        ("NVIDIA B200", 2, 18),
        ("NVIDIA H100 PCIe", 0, 0),  # no NVSwitch: NVLinks are not judged
        ("NVIDIA A100-SXM4-80GB", 0, 0),  # SXM without NVSwitches (e.g. a 4-GPU board)
        ("NVIDIA H800", 4, 0),  # not in the table (8 links): not guessed
        ("", 4, 0),  # the fact holds no model name
    ],
)
def test_nvlinks_expected_from_the_model_and_its_nvswitches(name, nvswitches, expected):
    assert gpu_models.nvlinks_expected(name, nvswitches) == expected


def test_docs_gpu_md_states_the_table():
    from tests.conftest import REPO

    text = (REPO / "docs" / "gpu.md").read_text()
    section = text.split("## GPU models", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| NVIDIA ")
    ]
    assert {
        row[0]: GpuModel(row[0], int(row[1]), int(row[2]), int(row[3]), float(row[4]))
        for row in rows
    } == gpu_models.MODELS


@pytest.mark.parametrize(
    ("profile", "name"),
    [
        ("a100-sxm-8x", "NVIDIA A100-SXM4-80GB"),
        ("h100-sxm-8x-ib400", "NVIDIA H100 80GB HBM3"),
        ("h200-sxm-8x-ib400", "NVIDIA H200"),
    ],
)
def test_a_profiles_burn_in_floor_is_below_its_models_peak(profile, name):
    from kiln.validation import profiles

    floor = profiles.load(profile).burn_in["tflops_min"]
    assert 0 <= floor < gpu_models.MODELS[name].bf16_tflops


def test_each_pci_id_names_a_model_as_pci_ids_does():
    """PCI device ids from the PCI ID Repository (pci.ids 2025.06.09); each one's model is
    in MODELS, and the recorded GPUs' sysfs ids give nvidia-smi's names."""
    assert {i: m.name for i in gpu_models.PCI_DEVICE_IDS if (m := gpu_models.by_pci_id(i))} == {
        "0x20b0": "NVIDIA A100-SXM4-40GB",
        "0x20b2": "NVIDIA A100-SXM4-80GB",
        "0x2330": "NVIDIA H100 80GB HBM3",
        "0x2335": "NVIDIA H200",
        "0x2901": "NVIDIA B200",
        "0x2941": "NVIDIA GB200",
    }
    assert gpu_models.by_pci_id("0x2331") is None  # H100 PCIe: not in the table
    assert gpu_models.by_pci_id(" 0X2335\n").name == "NVIDIA H200"
