"""The ubuntu source: Canonical's -server driver packages from Ubuntu's archive, the
newest build of the branch pinned and held, the sources left as they are, DKMS holding
the open module without building it (no headers for the container's kernel), the module
options naming Canonical's module, persistenced set up, the local fact."""

import re

testinfra_hosts = ["podman://drv-ubuntu"]

DRIVER = ["nvidia-headless-580-server-open", "nvidia-utils-580-server"]
PREFERENCES = "/etc/apt/preferences.d/kiln-nvidia-driver"


def pinned(host) -> str:
    return re.search(r"^Pin: version (\S+)-\*$", host.file(PREFERENCES).content_string, re.M)[1]


def upstream(version: str) -> str:
    return version.split(":", 1)[-1].split("-", 1)[0]


def test_the_pin_covers_every_package_of_the_branch_at_one_version(host):
    version = pinned(host)
    assert re.fullmatch(r"580\.\d+\.\d+", version)
    assert host.file(PREFERENCES).content_string == (
        "# Managed by Kiln (nvidia_driver_version): every package of the driver stays at "
        "one version.\n"
        "Package: /^(lib)?nvidia-.*-580-server(-open)?$/\n"
        f"Pin: version {version}-*\n"
        "Pin-Priority: 1001\n"
    )


def test_the_driver_is_installed_from_ubuntus_archive_at_the_pinned_version_and_held(host):
    version = pinned(host)
    for package in [*DRIVER, "nvidia-dkms-580-server-open", "libnvidia-compute-580-server"]:
        installed = host.package(package)
        assert installed.is_installed, package
        assert upstream(installed.version) == version, (package, installed.version)
        policy = host.check_output(f"apt-cache policy {package}")
        assert f" *** {installed.version} 1001" in policy, policy
        assert "/ubuntu " in policy and "/restricted amd64 Packages" in policy, policy
    assert sorted(host.check_output("apt-mark showhold").split()) == sorted(DRIVER)
    upgrade = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert not re.search(r"^Inst (lib)?nvidia", upgrade, re.M), upgrade


def test_the_sources_stay_as_they_are(host):
    assert not host.file("/etc/apt/sources.list.d/kiln-nvidia.sources").exists
    assert not host.file("/etc/apt/sources.list.d/kiln-cuda.sources").exists


def test_dkms_has_the_open_module_without_building_it_here(host):
    """Canonical's open module is DKMS's `nvidia` (its proprietary one `nvidia-srv`)."""
    version = pinned(host)
    status = host.check_output("dkms status")
    assert re.search(rf"^nvidia/{re.escape(version)}: added$", status, re.M), status
    conf = host.check_output(f"cat /usr/src/nvidia-{version}/dkms.conf")
    assert re.search(r'^PACKAGE_NAME="nvidia"$', conf, re.M)
    assert re.search(r'^BUILT_MODULE_NAME\[0\]="nvidia"$', conf, re.M)


def test_module_options_name_canonicals_module(host):
    assert host.file("/etc/modprobe.d/kiln-nvidia.conf").content_string == (
        "# Managed by Kiln (nvidia_driver_module_options)\n"
        "options nvidia NVreg_EnableStreamMemOPs=1\n"
    )


def test_persistenced_is_enabled_and_not_started_without_a_gpu(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert not service.is_running


def test_the_local_fact_records_the_stack(host, local_fact, image_build_fact):
    assert local_fact(host) == image_build_fact(
        "ubuntu", pinned(host), {"wanted": False, "installed": "", "active": False}
    )
