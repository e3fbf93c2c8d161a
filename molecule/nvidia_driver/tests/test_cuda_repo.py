"""The cuda-repo source on drv-cuda, against the scenario's stand-in for NVIDIA's
repository (empty packages under NVIDIA's names; files/build-standin-repo.sh) with
Debian's non-free component enabled beside it: the key pinned by sha256, Debian's
packages of the same names refused by origin, the driver and the fabric manager at one
exact version and held, the fabric manager enabled but not started without NVSwitches.
converge.yml also ran the role's IMEX step as on an NVL72 node (GPUs planted, the
stand-in nvidia-smi reporting an NVLink domain): nvidia-imex at the driver's version,
pinned and held, the domain's one node in nodes_config.cfg, the service running.
side_effect.yml asked for 580.105.08, which the fabric manager is not offered at; the
node is checked here as converge left it."""

import re

testinfra_hosts = ["podman://drv-cuda"]

VERSION = "580.95.05"
DRIVER = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1",
          "libnvidia-ml1"]  # fmt: skip
FABRIC_MANAGER = ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
PINNED = " ".join([*DRIVER, *FABRIC_MANAGER, "nvidia-persistenced"])
IMEX = "nvidia-imex"  # from branch 580 on, without the branch


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
    assert sorted(held) == sorted([*DRIVER, *FABRIC_MANAGER, IMEX])


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
