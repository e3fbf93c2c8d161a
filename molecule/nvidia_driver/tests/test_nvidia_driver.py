"""The nvidia_driver role's real effects: Debian's packages installed at one pinned,
held version, persistenced set up, nouveau kept off, module options for Debian's
renamed module, the local fact. (A node without a GPU, left alone: the e2e lab's.)"""

import re

import pytest

testinfra_hosts = ["podman://drv-bookworm", "podman://drv-trixie"]

DRIVER = {
    "drv-bookworm": ["nvidia-open-kernel-dkms", "firmware-nvidia-gsp", "nvidia-smi", "libcuda1",
                     "libnvidia-ml1"],
    "drv-trixie": ["nvidia-kernel-dkms", "firmware-nvidia-gsp", "nvidia-smi", "libcuda1",
                   "libnvidia-ml1"],
}  # fmt: skip
CODENAME = {"drv-bookworm": "bookworm", "drv-trixie": "trixie"}


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


@pytest.fixture
def driver(host, name):
    return DRIVER[name]


def pinned(host) -> str:
    text = host.file("/etc/apt/preferences.d/kiln-nvidia-driver").content_string
    return re.search(r"^Pin: version (\S+)-\*$", text, re.M).group(1)


def upstream(version: str) -> str:
    return version.split(":", 1)[-1].split("-", 1)[0]


def test_the_pin_covers_the_driver_sources_at_one_version(host, driver):
    version = pinned(host)
    assert host.file("/etc/apt/preferences.d/kiln-nvidia-driver").content_string == (
        "# Managed by Kiln (nvidia_driver_version): every package of the driver stays at "
        "one version.\n"
        "Package: src:nvidia-graphics-drivers src:nvidia-open-gpu-kernel-modules\n"
        f"Pin: version {version}-*\n"
        "Pin-Priority: 1001\n"
    )


def test_every_driver_package_is_installed_at_the_pinned_version_and_held(host, driver):
    version = pinned(host)
    for package in driver:
        installed = host.package(package)
        assert installed.is_installed, package
        assert upstream(installed.version) == version, (package, installed.version)
    held = host.check_output("apt-mark showhold").split()
    assert sorted(held) == sorted(driver)


def test_apt_would_not_move_the_driver(host, driver):
    """The pin makes the installed version apt's candidate, whatever newer version the
    sources offer (on Debian 12 the security archive has a newer nvidia-smi than the open
    modules it can pair with)."""
    version = pinned(host)
    for package in driver:
        policy = host.check_output(f"apt-cache policy {package}")
        candidate = re.search(r"Candidate: (\S+)", policy).group(1)
        assert upstream(candidate) == version, policy
        assert f" *** {host.package(package).version} 1001" in policy, policy
    upgrade = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert not re.search(r"^Inst (nvidia|libcuda|libnvidia|firmware-nvidia)", upgrade, re.M)


def test_the_components_come_from_the_configured_mirrors(host, name, driver):
    codename = CODENAME[name]
    sources = host.file("/etc/apt/sources.list.d/kiln-nvidia.sources").content_string
    assert f"Suites: {codename} {codename}-updates\n" in sources
    assert f"Suites: {codename}-security\n" in sources
    assert sources.count("Components: contrib non-free non-free-firmware\n") == 2


def dkms_module(host) -> tuple[str, str]:
    """The DKMS package the driver registered, and the name its kernel module gets."""
    conf = host.check_output("cat /usr/src/nvidia-current*/dkms.conf")
    package = re.search(r'^PACKAGE_NAME="([^"]+)"$', conf, re.M).group(1)
    # The installed name is DEST_MODULE_NAME where the file renames, else the built one.
    named = re.search(r'^DEST_MODULE_NAME\[0\]="([^"]+)"$', conf, re.M) or re.search(
        r'^BUILT_MODULE_NAME\[0\]="([^"]+)"$', conf, re.M
    )
    return package, named.group(1).replace("$PACKAGE_NAME", package)


def test_dkms_has_the_module_without_building_it_here(host, name, driver):
    """No headers for the container's kernel exist in Debian (nvidia_driver_kernel_headers
    is off here): DKMS registers the module and builds nothing."""
    package, _ = dkms_module(host)
    expected = {"drv-bookworm": "nvidia-current-open", "drv-trixie": "nvidia-current"}
    assert package == expected[name]
    status = host.check_output("dkms status")
    assert re.search(rf"^{package}/{re.escape(pinned(host))}\S*: added$", status, re.M), status


def test_module_options_name_the_module_debian_installs(host, driver):
    """Debian renames the module; options for `nvidia` would never apply."""
    _, module = dkms_module(host)
    assert host.file("/etc/modprobe.d/kiln-nvidia.conf").content_string == (
        "# Managed by Kiln (nvidia_driver_module_options)\n"
        f"options {module} NVreg_EnableStreamMemOPs=1\n"
    )
    assert host.file("/etc/modprobe.d/kiln-nouveau.conf").content_string == (
        "# Managed by Kiln (nvidia_driver): nouveau must not claim the GPUs first.\n"
        "blacklist nouveau\n"
        "options nouveau modeset=0\n"
    )


def test_persistenced_is_enabled_with_persistence_mode_and_not_started_without_a_gpu(host, driver):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert not service.is_running
    start = host.check_output("systemctl show -p ExecStart nvidia-persistenced")
    assert "argv[]=/usr/bin/nvidia-persistenced --user nvpd --persistence-mode --verbose" in start
    assert host.user("nvpd").exists


def test_the_local_fact_records_the_stack(host, driver, local_fact, image_build_fact):
    assert local_fact(host) == image_build_fact(
        "debian", pinned(host), {"wanted": False, "installed": "", "active": False}
    )


def test_no_nvidia_peermem_without_ofed(host, driver):
    assert not host.file("/etc/systemd/system/kiln-nvidia-peermem.service").exists
