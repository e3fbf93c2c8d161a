"""The cuda-repo source on drv-cuda, against the scenario's stand-in for NVIDIA's
repository (empty packages under the names of NVIDIA's tree for the node's release;
tests/standins.py cuda-repo), laid out as NVIDIA's trees, with the distribution's own
packages of the same names beside it (Debian's non-free component; Ubuntu's restricted):
the key pinned by sha256, the distribution's packages of the same names refused by
origin, the driver and the fabric manager at one exact version and held, the fabric
manager enabled but not started without NVSwitches.
converge.yml also ran the role's IMEX step as on an NVL72 node (GPUs planted, the
stand-in nvidia-smi reporting an NVLink domain): nvidia-imex at the driver's version,
pinned and held, the domain's one node in nodes_config.cfg, the service running.
side_effect.yml asked for 580.105.08, which the fabric manager is not offered at; the
node is checked here as converge left it."""

import re

import pytest

testinfra_hosts = ["podman://drv-cuda"]

VERSION = "580.95.05"
FABRIC_MANAGER = ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
IMEX = "nvidia-imex"  # from branch 580 on, without the branch


class Release:
    """What differs by the node's release: NVIDIA's tree and package names there, and the
    distribution's own build of the same names."""

    def __init__(self, tree, origin, driver, persistenced, suffix, own, pinned=""):
        self.tree = tree
        self.origin = origin  # the distribution's archive, refused for the driver's names
        self.driver = driver
        self.persistenced = persistenced  # installed by name, where it has one
        self.suffix = suffix  # NVIDIA's Debian revision of the driver's packages there
        self.own = own  # (a package of the same name, its version in the distribution)
        # What the pin names: every package of the branch on Ubuntu, whose archive has
        # the dependencies too; else the packages installed by name.
        self.pinned = pinned or " ".join([*driver, *FABRIC_MANAGER, *persistenced])


DEBIAN = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1",
          "libnvidia-ml1"]  # fmt: skip
UBUNTU = ["nvidia-headless-580-open", "nvidia-utils-580"]
UBUNTU_PIN = "/^(lib)?nvidia-.*-580(-open)?$/"
RELEASES = {
    # Debian 13's own 550 build is in non-free; Ubuntu's 580 builds in restricted.
    "trixie": Release("debian13", "Debian", DEBIAN, ["nvidia-persistenced"], "-1",
                      ("nvidia-smi", r"550\.\S+")),
    "bookworm": Release("debian12", "Debian", DEBIAN, ["nvidia-persistenced"], "-1",
                        ("nvidia-smi", r"535\.\S+")),
    "noble": Release("ubuntu2404", "Ubuntu", UBUNTU, [], "-0ubuntu1",
                     ("nvidia-utils-580", r"580\.\S+ubuntu0\.24\.04\S*"), UBUNTU_PIN),
    "jammy": Release("ubuntu2204", "Ubuntu", UBUNTU, [], "-0ubuntu1",
                     ("nvidia-utils-580", r"580\.\S+ubuntu0\.22\.04\S*"), UBUNTU_PIN),
}  # fmt: skip


@pytest.fixture
def release(host) -> Release:
    return RELEASES[host.check_output(". /etc/os-release && echo $VERSION_CODENAME")]


def test_the_repository_is_added_from_the_releases_tree_with_its_key_checked(host, release):
    assert host.file("/etc/apt/sources.list.d/kiln-nvidia.sources").content_string == (
        "# Managed by Kiln (nvidia_driver_source: cuda-repo)\n"
        "Types: deb\n"
        f"URIs: file:/srv/standin-cuda-trees/{release.tree}/x86_64/\n"
        "Suites: /\n"
        "Signed-By: /etc/apt/keyrings/kiln-nvidia-cuda.asc\n"
    )
    key = host.file("/etc/apt/keyrings/kiln-nvidia-cuda.asc")
    assert key.sha256sum == host.file("/srv/standin-cuda/standin.pub").sha256sum
    assert (key.user, key.mode) == ("root", 0o644)


def test_the_distribution_is_refused_for_the_driver_names_and_the_version_is_pinned(host, release):
    pinned = release.pinned
    assert host.file("/etc/apt/preferences.d/kiln-nvidia-driver").content_string == (
        "# Managed by Kiln (nvidia_driver_version): every package of the driver stays at "
        "one version.\n"
        f"# NVIDIA's repository reuses {release.origin}'s package names: {release.origin}'s"
        " are never installed.\n"
        f"Package: {pinned}\n"
        f"Pin: release o={release.origin}\n"
        "Pin-Priority: -1\n"
        "\n"
        f"Package: {pinned}\n"
        f"Pin: version {VERSION}-*\n"
        "Pin-Priority: 1001\n"
    )


def test_apt_sees_the_distributions_packages_of_the_same_names_and_never_picks_them(host, release):
    package, own = release.own
    policy = host.check_output(f"apt-cache policy {package}")
    assert re.search(rf"^\s+{own} -1$", policy, re.M), policy
    assert f"Candidate: {VERSION}{release.suffix}\n" in policy, policy
    assert f" *** {VERSION}{release.suffix} 1001" in policy, policy
    upgrade = host.check_output("apt-get -s -o Debug::NoLocking=1 dist-upgrade")
    assert not re.search(r"^Inst (nvidia|libcuda|libnvidia)", upgrade, re.M), upgrade


def test_driver_and_fabric_manager_are_installed_at_one_version_and_held(host, release):
    versions = {
        **dict.fromkeys([*release.driver, *release.persistenced], f"{VERSION}{release.suffix}"),
        **dict.fromkeys(FABRIC_MANAGER, f"{VERSION}-1"),
    }
    for package, version in versions.items():
        installed = host.package(package)
        assert installed.is_installed, package
        assert installed.version == version, (package, installed.version)
    held = host.check_output("apt-mark showhold").split()
    assert sorted(held) == sorted([*release.driver, *FABRIC_MANAGER, IMEX])


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


def test_imex_is_installed_at_the_drivers_version_pinned_and_held(host):
    query = f"dpkg-query -W -f '${{Version}} ${{db:Status-Abbrev}}' {IMEX}"
    assert host.check_output(query).split() == [f"{VERSION}-1", "hi"]  # hi: held, installed
    assert host.file("/etc/apt/preferences.d/kiln-nvidia-imex").content_string == (
        "# Managed by Kiln (nvidia_driver_version): every package of the driver stays at "
        "one version.\n"
        f"Package: {IMEX}\n"
        f"Pin: version {VERSION}-*\n"
        "Pin-Priority: 1001\n"
    )
    # The newer driver's IMEX is offered too; apt keeps to the driver's.
    policy = host.check_output(f"apt-cache policy {IMEX}")
    assert f"Candidate: {VERSION}-1\n" in policy, policy
    assert re.search(r"^\s+580\.105\.08-1 500$", policy, re.M), policy


def test_imex_lists_the_domains_nodes_and_leaves_its_own_config_as_shipped(host):
    nodes = host.file("/etc/nvidia-imex/nodes_config.cfg")
    assert nodes.content_string == "10.214.0.34\n"  # the domain is this node alone
    assert (nodes.user, nodes.group, nodes.mode) == ("root", "root", 0o644)
    conffiles = host.check_output(f"dpkg-query -W -f '${{Conffiles}}' {IMEX}").split()
    assert conffiles[0] == "/etc/nvidia-imex/config.cfg", conffiles
    # config.cfg as the package shipped it: dpkg finds no file of the package changed.
    verify = host.run(f"dpkg --verify {IMEX}")
    assert (verify.rc, verify.stdout) == (0, ""), verify


def test_imex_is_enabled_and_running_with_the_node_list(host):
    service = host.service("nvidia-imex")
    assert service.is_enabled
    assert service.is_running
    # IMEX reads nodes_config.cfg only when it starts; the package's install started it
    # before the file existed, so the role restarted it after writing the file.
    started = host.check_output(
        'date -d "$(systemctl show -p ActiveEnterTimestamp --value nvidia-imex)" +%s'
    )
    assert int(started) >= host.file("/etc/nvidia-imex/nodes_config.cfg").mtime.timestamp()
