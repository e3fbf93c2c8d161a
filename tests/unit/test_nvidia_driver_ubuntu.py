"""The nvidia_driver role's Ubuntu data (roles/nvidia_driver/vars/Ubuntu.yml): the pin of
each source names every package of the driver's branch and no other, as apt reads its
/regex/ (POSIX extended; Python's re agrees on these)."""

import re

import yaml

from tests.conftest import REPO

APT = yaml.safe_load((REPO / "roles/nvidia_driver/vars/Ubuntu.yml").read_text())[
    "_nvidia_driver_apt"
]


def pinned(source: str, names: list[str]) -> list[str]:
    (pattern,) = APT[source]["pin"]
    regex = pattern.replace("{branch}", "580").strip("/")
    return [name for name in names if re.search(regex, name)]


def test_nvidias_repository_pins_the_branchs_packages_and_their_dependencies():
    # NVIDIA's ubuntu2404 tree (the stand-in's names) and Ubuntu's same-named packages.
    branch = [
        "nvidia-headless-580", "nvidia-headless-580-open", "nvidia-utils-580",
        "nvidia-compute-utils-580", "libnvidia-compute-580", "nvidia-dkms-580",
        "nvidia-dkms-580-open", "nvidia-kernel-common-580", "nvidia-kernel-source-580-open",
        "nvidia-fabricmanager-580", "libnvidia-nscq-580",
    ]  # fmt: skip
    others = [
        "nvidia-headless-570", "nvidia-utils-580-server", "nvidia-imex",
        "nvidia-firmware-580-580.95.05", "nvidia-headless-5800",
    ]  # fmt: skip
    assert pinned("cuda-repo", branch + others) == branch


def test_canonicals_server_packages_pin_their_own_branch():
    names = [
        "nvidia-headless-580-server-open", "nvidia-utils-580-server",
        "libnvidia-compute-580-server", "nvidia-dkms-580-server-open",
        "nvidia-utils-580", "nvidia-headless-570-server",
    ]  # fmt: skip
    assert pinned("ubuntu", names) == names[:4]
