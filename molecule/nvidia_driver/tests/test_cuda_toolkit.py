"""The nccl_tests role's install step on drv-cuda (converge.yml): for the driver the
nvidia_driver role pinned there (580.95.05), the CUDA compiler and NCCL from the
scenario's stand-in CUDA repository, whose packages carry NVIDIA's names, versions,
Depends and Provides (tests/standins.py cuda-toolkit; NCCL at two builds). CUDA 13.0's
packages and what they pull in are installed, NCCL at 2.28.9-1+cuda13.0 (not the newer
+cuda13.1 build beside it) and pinned there, and kiln_node.cuda_toolchain finds both
where the role builds from them."""

import json

testinfra_hosts = ["podman://drv-cuda"]

NCCL = "2.28.9-1+cuda13.0"
# Asked for by the role, then what apt pulled in through their Depends.
INSTALLED = {
    "cuda-nvcc-13-0": "13.0.88-1",
    "cuda-cudart-dev-13-0": "13.0.96-1",
    "libnccl2": NCCL,
    "libnccl-dev": NCCL,
    "cuda-crt-13-0": "13.0.88-1",
    "libnvvm-13-0": "13.0.88-1",
    "libnvptxcompiler-13-0": "13.0.88-1",
    "cuda-cudart-13-0": "13.0.96-1",
    "cuda-cccl-13-0": "13.0.85-1",
    "cuda-culibos-dev-13-0": "13.0.85-1",
    "cuda-driver-dev-13-0": "13.0.96-1",
    "cuda-toolkit-13-0-config-common": "13.0.96-1",
    "cuda-toolkit-13-config-common": "13.0.96-1",
    "cuda-toolkit-config-common": "13.0.96-1",
}


def test_cuda_13_0_and_its_nccl_are_installed_for_driver_580(host):
    for package, version in INSTALLED.items():
        installed = host.package(package)
        assert (installed.is_installed, installed.version) == (True, version), package


def test_nccl_stays_at_its_build_for_cuda_13_0(host):
    assert host.file("/etc/apt/preferences.d/kiln-nccl").content_string == (
        "# Managed by Kiln (nccl_tests_nccl_version): NCCL stays at the version nccl-tests"
        " is built with.\n"
        "Package: libnccl2 libnccl-dev\n"
        f"Pin: version {NCCL}\n"
        "Pin-Priority: 1001\n"
    )
    policy = host.check_output("apt-cache policy libnccl2")
    assert f"Candidate: {NCCL}" in policy
    assert "2.29.2-1+cuda13.1 500" in policy  # offered, and not taken


def test_the_toolchain_is_found_where_the_role_builds_from(host):
    found = json.loads(
        host.check_output(
            "cd /usr/local/lib/kiln && python3 -m kiln_node.cuda_toolchain"
            " --cuda-home=/usr/local/cuda-13.0 --nccl-home=/usr"
        )
    )
    assert (found["cuda"], found["nccl"]) == (
        {"home": "/usr/local/cuda-13.0", "version": "13.0.88", "lib": ""},
        {
            "home": "/usr",
            "version": "2.28.9",
            "lib": "/usr/lib/x86_64-linux-gnu",
            "library": "libnccl.so",
        },
    )
    # And without the homes: the release under /usr/local/cuda-13.0 (no /usr/local/cuda).
    searched = json.loads(
        host.check_output("cd /usr/local/lib/kiln && python3 -m kiln_node.cuda_toolchain")
    )
    assert searched["cuda"]["home"] == "/usr/local/cuda-13.0"
