"""What every node of the scenario has in common: no GPU, so the local fact of an image
build (the stack installed, nothing loaded, no module built)."""

import json

import pytest


@pytest.fixture
def image_build_fact():
    def expected(source: str, pinned: str, fabric_manager: dict) -> dict:
        return {
            "gpu_count": 0,
            "gpu_model": "",
            "gpus": [],
            "nvswitch_count": 0,
            "hca_count": 0,
            "driver": {
                "source": source,
                "pinned": pinned,
                "installed": "",  # no module built (DKMS without headers, or a stand-in)
                "loaded": "",
                "open": False,
                "reboot_pending": False,
            },
            "fabric_manager": fabric_manager,
            "persistence": False,
            "rdma": {"stack": "none", "path": "none"},
            "nvlink_domain": {},  # no GPU: no NVLink domain, no IMEX
            "imex": False,
        }

    return expected


@pytest.fixture
def local_fact():
    def read(host) -> dict:
        return json.loads(host.file("/etc/ansible/facts.d/kiln_gpu.fact").content_string)

    return read
