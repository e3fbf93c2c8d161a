"""The cuda-repo source on drv-cuda, against the scenario's stand-in for NVIDIA's
repository (empty packages under NVIDIA's names; files/build-standin-repo.sh) with
Debian's non-free component enabled beside it: the key pinned by sha256, Debian's
packages of the same names refused by origin, the driver and the fabric manager at one
exact version and held, the fabric manager enabled but not started without NVSwitches.
side_effect.yml asked for 580.105.08, which the fabric manager is not offered at; the
node is checked here as converge left it."""

import re

testinfra_hosts = ["podman://drv-cuda"]

VERSION = "580.95.05"
DRIVER = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1",
          "libnvidia-ml1"]  # fmt: skip
FABRIC_MANAGER = ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
PINNED = " ".join([*DRIVER, *FABRIC_MANAGER, "nvidia-persistenced"])


def test_the_repository_is_added_with_its_key_checked(host):
    assert host.file("/etc/apt/sources.list.d/kiln-nvidia.sources").content_string == (
        "# Managed by Kiln (nvidia_driver_source: cuda-repo)\n"
        "Types: deb\n"
        "URIs: file:/srv/standin-cuda/\n"
        "Suites: /\n"
        "Signed-By: /etc/apt/keyrings/kiln-nvidia-cuda.asc\n"
    )
    key = host.file("/etc/apt/keyrings/kiln-nvidia-cuda.asc")
    assert key.sha256sum == host.file("/srv/standin-cuda/standin.pub").sha256sum
    assert (key.user, key.mode) == ("root", 0o644)


def test_debian_is_refused_for_the_driver_names_and_the_version_is_pinned(host):
    assert host.file("/etc/apt/preferences.d/kiln-nvidia-driver").content_string == (
        "# Managed by Kiln (nvidia_driver_version): every package of the driver stays at "
        "one version.\n"
        "# NVIDIA's repository reuses Debian's package names: Debian's are never installed.\n"
        f"Package: {PINNED}\n"
        "Pin: release o=Debian\n"
        "Pin-Priority: -1\n"
        "\n"
        f"Package: {PINNED}\n"
        f"Pin: version {VERSION}-*\n"
        "Pin-Priority: 1001\n"
    )


def test_apt_sees_debians_packages_of_the_same_names_and_never_picks_them(host):
    for package in ("nvidia-smi", "libcuda1"):
        policy = host.check_output(f"apt-cache policy {package}")
        # Debian 13's own 550 build is there (non-free), at priority -1.
        debian = re.search(r"^\s+(550\.\S+) -1$", policy, re.M)
        assert debian, policy
        assert f"Candidate: {VERSION}-1\n" in policy, policy
        assert f" *** {VERSION}-1 1001" in policy, policy
    upgrade = host.check_output("apt-get -s -o Debug::NoLocking=1 dist-upgrade")
    assert not re.search(r"^Inst (nvidia|libcuda|libnvidia)", upgrade, re.M), upgrade


def test_driver_and_fabric_manager_are_installed_at_one_version_and_held(host):
    for package in [*DRIVER, *FABRIC_MANAGER, "nvidia-persistenced"]:
        installed = host.package(package)
        assert installed.is_installed, package
        assert installed.version == f"{VERSION}-1", (package, installed.version)
    held = host.check_output("apt-mark showhold").split()
    assert sorted(held) == sorted([*DRIVER, *FABRIC_MANAGER])


def test_the_fabric_manager_is_enabled_and_not_started_without_nvswitches(host):
    service = host.service("nvidia-fabricmanager")
    assert service.is_enabled
    assert not service.is_running


def test_module_options_and_persistenced_use_nvidias_names(host):
    assert host.file("/etc/modprobe.d/kiln-nvidia.conf").content_string == (
        "# Managed by Kiln (nvidia_driver_module_options)\n"
        "options nvidia NVreg_EnableStreamMemOPs=1\n"
    )
    start = host.check_output("systemctl show -p ExecStart nvidia-persistenced")
    assert (
        "argv[]=/usr/bin/nvidia-persistenced --user nvidia-persistenced --persistence-mode "
        "--verbose" in start
    )
    assert host.service("nvidia-persistenced").is_enabled


def test_the_local_fact_records_the_fabric_manager_and_the_rdma_path(
    host, local_fact, image_build_fact
):
    expected = image_build_fact(
        "cuda-repo", VERSION, {"wanted": True, "installed": VERSION, "active": False}
    )
    expected["rdma"] = {"stack": "mlnx-ofed", "path": "peermem"}  # prepare's stand-in OFED
    assert local_fact(host) == expected


def test_nvidia_peermem_loads_at_boot_after_ofed(host):
    assert host.file("/etc/systemd/system/kiln-nvidia-peermem.service").content_string == (
        "# Managed by Kiln (nvidia_driver_peermem)\n"
        "[Unit]\n"
        "Description=NVIDIA peer memory for GPUDirect RDMA over OFED\n"
        "After=openibd.service\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart=/sbin/modprobe nvidia-peermem\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
    unit = host.service("kiln-nvidia-peermem")
    assert unit.is_enabled
    assert not unit.is_running  # no GPU: nothing to load it for
