"""kiln.roles.nvidia_driver on recorded outputs: an H100 SXM VM with driver 580.159.04 (open kernel
module), in tests/fixtures/gpu/h100-80gb-hbm3-vm (see its README). The PCI inputs are
in the shape the role's detect script prints from sysfs; an HGX board's are derived from
the recorded GPU by adding the devices such a board has (NVSwitch 10de:22a3, ConnectX-7
15b3:1021), since no HGX sysfs was recorded."""

from pathlib import Path

import pytest

from kiln.roles.nvidia_driver import apt, hardware, node_plan, reboots, settings, versions
from kiln_node import slurm_state

H100_VM = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100-80gb-hbm3-vm"


def recorded(name: str) -> str:
    return (H100_VM / name).read_text()


# The recorded VM's GPU (nvidia-smi's bus id 00000000:00:06.0) as sysfs lists it.
H100 = {
    "address": "0000:00:06.0",
    "vendor": "0x10de",
    "device": "0x2330",
    "class": "0x030200",
    "driver": "nvidia",
}
VM_DEVICES = [
    {"address": "0000:00:00.0", "vendor": "0x8086", "device": "0x1237", "class": "0x060000"},
    {"address": "0000:00:01.0", "vendor": "0x8086", "device": "0x7000", "class": "0x060100"},
    {"address": "0000:00:02.0", "vendor": "0x1af4", "device": "0x1000", "class": "0x020000"},
    H100,
]


def hgx_devices():
    gpus = [
        {**H100, "address": f"0000:{bus:02x}:00.0"}
        for bus in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
    ]
    switches = [
        {"address": f"0000:{bus:02x}:00.0", "vendor": "0x10de", "device": "0x22a3",
         "class": "0x068000", "driver": ""}
        for bus in (0x05, 0x06, 0x07, 0x08)
    ]  # fmt: skip
    hcas = [
        {"address": f"0000:{bus:02x}:00.0", "vendor": "0x15b3", "device": "0x1021",
         "class": "0x020700", "driver": "mlx5_core"}
        for bus in (0x1A, 0x3C)
    ]  # fmt: skip
    # A Mellanox device that is not an HCA (a BlueField's management function).
    other = {"address": "0000:c1:00.0", "vendor": "0x15b3", "device": "0xc2d5",
             "class": "0x080100", "driver": ""}  # fmt: skip
    return list(reversed(gpus)) + switches + hcas + [other]


def test_the_recorded_vm_has_one_gpu_no_nvswitch_and_no_hca():
    found = hardware.detect(VM_DEVICES)
    assert found == hardware.Hardware(
        gpus=[hardware.PciDevice("0000:00:06.0", "0x10de", "0x2330", "0x030200", "nvidia")],
        nvswitches=[],
        hcas=[],
    )
    assert found.has_gpu


def test_an_hgx_board_has_eight_gpus_four_nvswitches_and_its_hcas_in_bus_order():
    found = hardware.detect(hgx_devices())
    assert [d.address for d in found.gpus] == [
        "0000:18:00.0",
        "0000:2a:00.0",
        "0000:3a:00.0",
        "0000:5d:00.0",
        "0000:9a:00.0",
        "0000:ab:00.0",
        "0000:ba:00.0",
        "0000:db:00.0",
    ]
    assert [(d.address, d.device, d.driver) for d in found.nvswitches] == [
        ("0000:05:00.0", "0x22a3", ""),
        ("0000:06:00.0", "0x22a3", ""),
        ("0000:07:00.0", "0x22a3", ""),
        ("0000:08:00.0", "0x22a3", ""),
    ]
    assert [(d.address, d.pci_class) for d in found.hcas] == [
        ("0000:1a:00.0", "0x020700"),
        ("0000:3c:00.0", "0x020700"),
    ]


def test_a_node_without_nvidia_devices_has_no_gpu():
    assert hardware.detect(VM_DEVICES[:3]) == hardware.Hardware()
    assert not hardware.detect([]).has_gpu


def test_the_loaded_module_is_read_from_proc():
    assert versions.loaded_module(
        recorded("proc-driver-nvidia-version.txt")
    ) == versions.LoadedModule(version="580.159.04", open=True)
    proprietary = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
    )
    assert versions.loaded_module(proprietary) == versions.LoadedModule(
        version="535.183.01", open=False
    )
    assert versions.loaded_module("") is None


def test_versions_exact_branches_and_apt_pins():
    assert [versions.is_exact(v) for v in ("580.159.04", "550.54", "580", "580.*", "r580")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert versions.branch("580.159.04") == "580"
    assert [
        versions.upstream(v)
        for v in ("580.159.04-1", "1:580.159.04-0ubuntu0.24.04.1", "535.216.03-1~deb12u1")
    ] == ["580.159.04", "580.159.04", "535.216.03"]
    assert apt.apt_pin("580.159.04") == "580.159.04-*"
    assert apt.apt_pin("580") == "580.*"


def test_a_reboot_is_needed_when_the_installed_module_is_not_the_loaded_one():
    loaded = versions.loaded_module(recorded("proc-driver-nvidia-version.txt"))
    assert loaded is not None
    assert not versions.needs_reboot(loaded.version, "580.159.04")
    assert versions.needs_reboot(loaded.version, "580.172.08")
    assert versions.needs_reboot("", "580.159.04")  # installed, never loaded
    assert not versions.needs_reboot("", "")  # nothing installed (preinstalled check mode)


ROLLOUT = "slurmd runs here: kiln rollout reboots it through Slurm"


def test_nodes_in_slurm_are_left_to_kiln_rollout_and_new_nodes_reboot_in_batches():
    pending = [f"gpu{i:03d}" for i in range(1, 24)]
    in_slurm = ["gpu001", "gpu002", "gpu003"]
    plan = reboots.reboot_plan(pending, in_slurm, "10%")
    assert plan.to_json() == {
        "rollout": ["gpu001", "gpu002", "gpu003"],
        # 20 new nodes at 10%: batches of 2
        "batches": [[f"gpu{i:03d}", f"gpu{i + 1:03d}"] for i in range(4, 24, 2)],
        "reported": {"gpu001": ROLLOUT, "gpu002": ROLLOUT, "gpu003": ROLLOUT},
    }
    assert reboots.reboot_plan(["b", "a", "c"], [], 2).batches == [["a", "b"], ["c"]]
    assert reboots.reboot_plan(["a"], [], "10%").batches == [["a"]]  # at least one
    assert reboots.reboot_plan([], [], "10%").to_json() == {
        "rollout": [],
        "batches": [],
        "reported": {},
    }
    assert reboots.reboot_reason("580.159.04") == "kiln: driver 580.159.04"


def test_no_reboot_only_reports_and_leaves_nothing_to_the_rollout():
    assert reboots.reboot_plan(["b", "a"], ["a"], "10%", reboot=False).to_json() == {
        "rollout": [],
        "batches": [],
        "reported": {"a": "not rebooted (--no-reboot)", "b": "not rebooted (--no-reboot)"},
    }


@pytest.mark.parametrize("batch", ["0", "-1", "0%", "101%", "ten", "10 %", "", "1.5"])
def test_a_reboot_batch_that_is_no_count_or_share_is_refused(batch):
    with pytest.raises(ValueError):
        reboots.reboot_plan(["a"], [], batch)
    assert settings.settings_problems({"reboot_batch": batch}) == [
        f"nvidia_driver_reboot_batch {batch!r}: expected a node count (4) or a share of the "
        "nodes (10%)"
    ]


@pytest.mark.parametrize("batch", ["1", "25", "10%", "100%", "2.5%", 3])
def test_reboot_batches_as_counts_and_shares(batch):
    assert settings.settings_problems({"reboot_batch": batch}) == []


def test_rdma_stack_and_the_gpudirect_path():
    assert hardware.rdma_stack({"doca-ofed": "2.9.1", "rdma-core": "2410mlnx54"}) == "doca-ofed"
    assert hardware.rdma_stack({"mlnx-ofed-kernel-dkms": "24.10", "rdma-core": "x"}) == "mlnx-ofed"
    assert hardware.rdma_stack({"rdma-core": "44.0-2"}) == "inbox"
    assert hardware.rdma_stack({}) == "none"
    assert hardware.rdma_path("mlnx-ofed", "proprietary") == "peermem"
    assert hardware.rdma_path("inbox", "open") == "dmabuf"
    assert hardware.rdma_path("inbox", "proprietary") == "none"
    assert hardware.rdma_path("none", "open") == "none"


# `apt-cache policy` as apt 2.6 prints it on Debian 12 with the non-free components:
# the security archive has a newer nvidia-graphics-drivers (nvidia-smi, firmware) but no
# newer open kernel modules, as on 2026-11-23.
POLICY_BOOKWORM = """nvidia-open-kernel-dkms:
  Installed: (none)
  Candidate: 535.261.03-1
  Version table:
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/contrib amd64 Packages
nvidia-smi:
  Installed: (none)
  Candidate: 535.309.01-0+deb12u1
  Version table:
     535.309.01-0+deb12u1 500
        500 http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
firmware-nvidia-gsp:
  Installed: (none)
  Candidate: 535.309.01-0+deb12u1
  Version table:
     535.309.01-0+deb12u1 500
        500 http://deb.debian.org/debian-security bookworm-security/non-free-firmware amd64 Packages
     535.261.03-1 500
        500 http://deb.debian.org/debian bookworm/non-free-firmware amd64 Packages
"""
POLICY_INSTALLED = """nvidia-smi:
  Installed: 535.261.03-1
  Candidate: 535.261.03-1
  Version table:
     535.309.01-0+deb12u1 500
        500 http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages
 *** 535.261.03-1 1001
        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages
        100 /var/lib/dpkg/status
"""


def test_apt_policy_gives_each_package_installed_candidate_and_offered_versions():
    policies = apt.parse_apt_policy(POLICY_BOOKWORM)
    assert policies == {
        "nvidia-open-kernel-dkms": apt.AptPolicy("", "535.261.03-1", ("535.261.03-1",)),
        "nvidia-smi": apt.AptPolicy(
            "", "535.309.01-0+deb12u1", ("535.309.01-0+deb12u1", "535.261.03-1")
        ),
        "firmware-nvidia-gsp": apt.AptPolicy(
            "", "535.309.01-0+deb12u1", ("535.309.01-0+deb12u1", "535.261.03-1")
        ),
    }
    assert apt.parse_apt_policy(POLICY_INSTALLED) == {
        "nvidia-smi": apt.AptPolicy(
            "535.261.03-1", "535.261.03-1", ("535.309.01-0+deb12u1", "535.261.03-1")
        )
    }
    assert apt.parse_apt_policy("") == {}


def test_the_pin_is_a_version_every_package_has():
    bookworm = apt.parse_apt_policy(POLICY_BOOKWORM)
    # apt's candidate for nvidia-smi is 535.309.01, which the open modules do not have.
    assert apt.pin_version("", bookworm) == "535.261.03"
    assert apt.pin_version("535.261.03", bookworm) == "535.261.03"
    with pytest.raises(ValueError) as missing:
        apt.pin_version("535.309.01", bookworm)
    assert str(missing.value) == (
        "driver 535.309.01 is not offered for every package (firmware-nvidia-gsp: "
        "535.261.03, 535.309.01; nvidia-open-kernel-dkms: 535.261.03; nvidia-smi: "
        "535.261.03, 535.309.01)"
    )
    # Without the open modules, the newest; once installed, a re-run keeps it.
    proprietary = {k: v for k, v in bookworm.items() if k != "nvidia-open-kernel-dkms"}
    assert apt.pin_version("", proprietary) == "535.309.01"
    assert apt.pin_version("", apt.parse_apt_policy(POLICY_INSTALLED)) == "535.261.03"
    with pytest.raises(ValueError) as none:
        apt.pin_version("", apt.parse_apt_policy("nvidia-smi:\n  Installed: (none)\n"))
    assert str(none.value) == "no driver version is offered for every package (nvidia-smi: none)"
    assert versions.version_key("535.309.01") > versions.version_key("535.261.03")


def test_a_branch_pins_the_installed_or_newest_version_of_that_branch():
    policies = apt.parse_apt_policy(POLICY_CUDA_REPO)
    # Debian's 550 at priority -1 is never a choice.
    assert policies["nvidia-driver-cuda"] == apt.AptPolicy(
        "", "580.105.08-1", ("580.105.08-1", "580.95.05-1")
    )
    driver = {"nvidia-driver-cuda": policies["nvidia-driver-cuda"]}
    assert apt.pin_version("580", driver) == "580.105.08"
    assert apt.pin_version("", driver) == "580.105.08"
    # Every package: the fabric manager has no 580.105.08.
    assert apt.pin_version("580", policies) == "580.95.05"
    with pytest.raises(ValueError) as none:
        apt.pin_version("575", policies)
    assert str(none.value) == (
        "no driver of branch 575 is offered for every package (nvidia-driver-cuda: "
        "580.95.05, 580.105.08; nvidia-fabricmanager-580: 580.95.05, 580.105.07)"
    )
    installed = POLICY_CUDA_REPO.replace("Installed: (none)", "Installed: 580.95.05-1", 1)
    driver = {"nvidia-driver-cuda": apt.parse_apt_policy(installed)["nvidia-driver-cuda"]}
    assert apt.pin_version("580", driver) == "580.95.05"


# `apt-cache policy` with NVIDIA's CUDA repository (a flat repository: no suite in the
# Packages line), whose fabric manager is one patch behind its newest driver, and Debian's
# package of the same name refused by Kiln's preferences (priority -1: never offered).
POLICY_CUDA_REPO = """nvidia-driver-cuda:
  Installed: (none)
  Candidate: 580.105.08-1
  Version table:
     580.105.08-1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64  Packages
     580.95.05-1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64  Packages
     550.163.01-2 -1
        500 http://deb.debian.org/debian trixie/non-free amd64 Packages
nvidia-fabricmanager-580:
  Installed: (none)
  Candidate: 580.105.07-1
  Version table:
     580.105.07-1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64  Packages
     580.95.05-1 500
        500 https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64  Packages
"""


def test_the_fabric_manager_must_be_offered_at_the_drivers_exact_version():
    policies = apt.parse_apt_policy(POLICY_CUDA_REPO)
    assert apt.fabric_manager_packages("580.95.05") == [
        "nvidia-fabricmanager-580",
        "libnvidia-nscq-580",
    ]
    with_nscq = apt.parse_apt_policy(
        POLICY_CUDA_REPO
        + POLICY_CUDA_REPO.split("nvidia-fabricmanager-580:\n")[1].join(
            ["libnvidia-nscq-580:\n", ""]
        )
    )
    assert apt.fabric_manager_mismatch("580.95.05", with_nscq) == ""
    assert apt.fabric_manager_mismatch("580.105.08", with_nscq) == (
        "the fabric manager must equal the driver exactly: driver 580.105.08, "
        "nvidia-fabricmanager-580 offered at 580.95.05, 580.105.07"
    )
    # NSCQ missing from the sources altogether.
    assert apt.fabric_manager_mismatch("580.95.05", policies) == (
        "the fabric manager must equal the driver exactly: driver 580.95.05, "
        "libnvidia-nscq-580 offered at no version"
    )
    assert [apt.wants_fabric_manager(s, n) for s in ("auto", "install", "off") for n in (0, 4)] == [
        False, True, True, True, False, False,
    ]  # fmt: skip


def test_settings_that_cannot_go_together_are_named_before_any_node_is_touched():
    key = {
        "source": "cuda-repo",
        "cuda_repo_key_sha256": "1c3d5f7a9b2e4c6d8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e",
    }
    assert settings.settings_problems({}) == []
    assert (
        settings.settings_problems({**key, "fabric_manager": "install", "version": "580.95.05"})
        == []
    )
    assert settings.settings_problems({"source": "ubuntu", "version": "580"}) == []
    assert settings.settings_problems(
        {"source": "debian", "fabric_manager": "install", "version": "5.8"}
    ) == [
        "nvidia_driver_version '5.8' is neither an exact version (580.95.05) nor a branch (580)",
        "nvidia_driver_fabric_manager install needs an exact nvidia_driver_version (the "
        "fabric manager must equal the driver to the patch), got '5.8'",
        "nvidia_driver_fabric_manager install: Debian does not package the fabric manager "
        "(use nvidia_driver_source cuda-repo)",
    ]
    assert settings.settings_problems({"source": "cuda-repo", "cuda_repo_key_sha256": "AB"}) == [
        "nvidia_driver_cuda_repo_key_sha256 'AB' is not a sha256 (64 hex digits, lower "
        "case); `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    assert settings.settings_problems({"source": "ubuntu"}) == [
        "nvidia_driver_source ubuntu needs nvidia_driver_version: Canonical's packages are "
        "named for a branch (580) or an exact version (580.95.05)"
    ]


# `scontrol show node` on Slurm 22.05 (Molecule's slurm scenario, Debian 12): a node
# running a job after Kiln asked for a reboot.
SCONTROL_NODE_REBOOT_REQUESTED = """\
NodeName=slurm-c2 Arch=x86_64 CoresPerSocket=2
   CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=4.70
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:1
   NodeAddr=slurm-c2 NodeHostName=slurm-c2 Version=22.05.8
   OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0
   RealMemory=24105 AllocMem=24105 FreeMem=20187 Sockets=1 Boards=1
   State=MIXED+DRAIN+REBOOT_REQUESTED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   NextState=RESUME
   Partitions=batch
   BootTime=2026-11-23T09:28:26 SlurmdStartTime=2026-11-24T02:11:38
   LastBusyTime=2026-11-24T02:11:36
   CfgTRES=cpu=2,mem=24105M,billing=2,gres/gpu=1
   AllocTRES=cpu=1,mem=24105M
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=kiln: driver 580.95.05 [root@2026-11-24T02:13:36]

"""


def detected(pci, proc_version="", modinfo="", packages=None, fabric_manager=None):
    return {
        "pci": pci,
        "proc_version": proc_version,
        "modinfo_version": modinfo,
        "packages": packages or {},
        "fabric_manager": fabric_manager or {},
    }


SETTINGS = {"source": "debian", "required": False, "install_without_gpu": False,
            "kernel_modules": "open", "fabric_manager": "auto"}  # fmt: skip


def test_the_recorded_vm_is_planned_whole():
    plan = node_plan.node_plan(
        detected(VM_DEVICES, recorded("proc-driver-nvidia-version.txt"), "580.159.04"),
        {**SETTINGS, "source": "preinstalled"},
    )
    assert plan.to_json() == {
        "gpus": 1,
        "nvswitches": 0,
        "hcas": 0,
        "work": True,
        "skip": "",
        "fail": "",
        "loaded": "580.159.04",
        "loaded_open": True,
        "installed": "580.159.04",
        "reboot_needed": False,
        "rdma_stack": "none",
        "rdma_path": "none",
        "fabric_manager": False,
        "fabric_manager_installed": "",
        "fabric_manager_active": False,
    }


def test_a_node_without_a_gpu_is_skipped_with_a_note_unless_one_is_required():
    plan = node_plan.node_plan(detected(VM_DEVICES[:3]), SETTINGS)
    assert (plan.work, plan.fail) == (False, "")
    assert plan.skip == "no NVIDIA GPU found on the PCI bus: the driver stack is not installed here"
    required = node_plan.node_plan(detected(VM_DEVICES[:3]), {**SETTINGS, "required": True})
    assert required.fail == (
        "no NVIDIA GPU found on the PCI bus, and nvidia_driver_required is true"
    )
    # An image built on a machine without a GPU installs the stack anyway.
    image = node_plan.node_plan(detected([]), {**SETTINGS, "install_without_gpu": True})
    assert (image.work, image.skip, image.fail, image.reboot_needed) == (True, "", "", False)


def test_an_upgrade_waiting_for_a_reboot_and_the_rdma_path_on_an_hgx_node():
    plan = node_plan.node_plan(
        detected(
            hgx_devices(),
            recorded("proc-driver-nvidia-version.txt"),
            "580.172.08",
            {"doca-ofed": "2.9.1", "rdma-core": "2410mlnx54"},
            {"package": "nvidia-fabricmanager-580", "version": "580.172.08-1", "state": "failed"},
        ),
        {**SETTINGS, "source": "preinstalled"},
    )
    assert (plan.gpus, plan.nvswitches, plan.hcas) == (8, 4, 2)
    assert (plan.loaded, plan.installed, plan.reboot_needed) == ("580.159.04", "580.172.08", True)
    assert (plan.rdma_stack, plan.rdma_path, plan.fail) == ("doca-ofed", "peermem", "")
    assert (plan.fabric_manager, plan.fabric_manager_installed, plan.fabric_manager_active) == (
        True,
        "580.172.08",
        False,
    )
    assert not node_plan.node_plan(
        detected(hgx_devices()), {**SETTINGS, "fabric_manager": "off"}
    ).fail
    debian = node_plan.node_plan(detected(hgx_devices()), SETTINGS)
    assert debian.fail == (
        "4 NVSwitches need the fabric manager, which Debian does not package: use "
        "nvidia_driver_source cuda-repo (NVIDIA's repository or a mirror)"
    )


def test_the_local_fact_from_the_recorded_vm():
    plan = node_plan.node_plan(
        detected(VM_DEVICES, recorded("proc-driver-nvidia-version.txt"), "580.159.04"),
        {**SETTINGS, "source": "preinstalled"},
    ).to_json()
    assert node_plan.local_fact(
        plan, recorded("nvidia-smi-q.xml"), "580.159.04", "preinstalled"
    ) == {
        "gpu_count": 1,
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpus": [
            {
                "bus_id": "00000000:00:06.0",
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70",
                "vbios": "96.00.DA.00.0C",
            }
        ],
        "nvswitch_count": 0,
        "hca_count": 0,
        "driver": {
            "source": "preinstalled",
            "pinned": "580.159.04",
            "installed": "580.159.04",
            "loaded": "580.159.04",
            "open": True,
            "reboot_pending": False,
        },
        "fabric_manager": {"wanted": False, "installed": "", "active": False},
        "persistence": True,
        "rdma": {"stack": "none", "path": "none"},
        "nvlink_domain": {},  # the VM's fabric is N/A
        "imex": False,
    }
    # nvidia-smi failing (exit 9 without a GPU) leaves the GPU list empty, not an error.
    empty = node_plan.local_fact(plan, "NVIDIA-SMI has failed", "", "debian")
    assert (empty["gpus"], empty["gpu_model"], empty["persistence"]) == ([], "", False)


def test_packages_off_the_pin_are_named_with_their_version():
    dpkg = "nvidia-smi 535.261.03-1\nlibcuda1 535.309.01-0+deb12u1\nlibnvidia-ml1 \n"
    packages = ["nvidia-smi", "libcuda1", "libnvidia-ml1", "firmware-nvidia-gsp"]
    assert apt.off_pin(dpkg, packages, "535.261.03") == [
        "libcuda1 535.309.01-0+deb12u1",
        "libnvidia-ml1 missing",
        "firmware-nvidia-gsp missing",
    ]
    assert apt.off_pin(dpkg, ["nvidia-smi"], "535.261.03") == []


def test_the_detect_script_reads_a_sysfs_tree_into_what_detect_sorts(tmp_path, monkeypatch):
    """kiln-gpu-detect on a sysfs tree laid out as the kernel does: a directory per
    device with vendor, device and class files, and a driver symlink when bound."""
    from tests.node_scripts import gpu_detect

    drivers = tmp_path / "bus" / "pci" / "drivers"
    devices = tmp_path / "bus" / "pci" / "devices"
    for entry in VM_DEVICES:
        directory = devices / entry["address"]
        directory.mkdir(parents=True)
        for name in ("vendor", "device", "class"):
            (directory / name).write_text(entry[name] + "\n")
        if entry.get("driver"):
            (drivers / entry["driver"]).mkdir(parents=True, exist_ok=True)
            (directory / "driver").symlink_to(drivers / entry["driver"])
    monkeypatch.setattr(gpu_detect, "PCI", devices)
    found = gpu_detect.pci_devices()
    assert found == [{**entry, "driver": entry.get("driver", "")} for entry in VM_DEVICES]
    assert hardware.detect(found).gpus == [
        hardware.PciDevice("0000:00:06.0", "0x10de", "0x2330", "0x030200", "nvidia")
    ]
    monkeypatch.setattr(gpu_detect, "PCI", tmp_path / "missing")
    assert gpu_detect.pci_devices() == []


def test_the_detect_script_counts_held_packages_as_installed(monkeypatch):
    """The role holds the fabric manager: dpkg then says "hi", not "ii"."""
    from kiln_node import commands
    from tests.node_scripts import gpu_detect

    dpkg = (
        "nvidia-fabricmanager-580 580.95.05-1 hi \n"
        "rdma-core 52.0-2 ii \n"
        "doca-ofed 2.9.1 rc \n"  # removed, its configuration left
    )
    monkeypatch.setattr(gpu_detect, "output", lambda *argv: dpkg)
    ran = commands.Outcome(3, "inactive\n", "", 0.01)
    monkeypatch.setattr(gpu_detect.commands, "run", lambda *a, **k: ran)
    assert gpu_detect.packages() == {"rdma-core": "52.0-2"}
    assert gpu_detect.fabric_manager() == {
        "package": "nvidia-fabricmanager-580",
        "version": "580.95.05-1",
        "state": "inactive",
    }


# --- the preinstalled source: what the role asserts ------------------------------------

PREINSTALLED = {
    "gpus": 8,
    "nvswitches": 4,
    "installed": "580.159.04",
    "loaded": "580.159.04",
    "fabric_manager": True,
    "fabric_manager_installed": "580.159.04",
}


@pytest.mark.parametrize(
    ("plan", "version", "listed", "expected"),
    [
        ({}, "", 8, []),
        ({}, "580.159.04", None, []),
        (
            {"installed": "", "loaded": "", "fabric_manager_installed": ""},
            "",
            None,
            [
                "nvidia_driver_source is preinstalled but no NVIDIA kernel module is installed "
                "(modinfo finds neither nvidia nor nvidia-current) or loaded"
            ],
        ),
        # The host gives the driver (no module, or no modinfo, on the machine's disk).
        ({"installed": "", "fabric_manager": False}, "580.159.04", 8, []),
        (
            {"fabric_manager_installed": "580.126.09"},
            "570.195.03",
            7,
            [
                "driver 580.159.04 is installed, not nvidia_driver_version 570.195.03",
                "4 NVSwitches: the fabric manager must equal driver 580.159.04 exactly, and "
                "it is 580.126.09",
                "nvidia-smi lists 7 of the 8 GPUs on the PCI bus",
            ],
        ),
        ({"fabric_manager": False, "fabric_manager_installed": ""}, "", 8, []),
    ],
)
def test_preinstalled_problems(plan, version, listed, expected):
    assert node_plan.preinstalled_problems({**PREINSTALLED, **plan}, version, listed) == expected


# --- reboots of nodes in Slurm: never more of the cluster out at once than allowed -----

SCONTROL = "".join(
    f"NodeName={name} Arch=x86_64 CoresPerSocket=2 State={state} ThreadsPerCore=1{reason}\n"
    for name, state, reason in (
        ("gpu001", "IDLE", ""),
        ("gpu002", "IDLE+DRAIN", " Reason=kiln: slow [root@2026-11-26T10:00:00]"),
        ("gpu003", "MIXED+DRAIN+REBOOT_REQUESTED", " Reason=kiln: driver 580.159.04"),
        ("gpu004", "ALLOCATED", ""),
        ("gpu005", "DOWN+NOT_RESPONDING", ""),
    )
)
COMPUTE = [f"gpu{i:03d}" for i in range(1, 21)]  # 20 nodes: 10% is 2


def test_reboot_room_counts_nodes_already_out():
    states = slurm_state.parse(SCONTROL)
    assert reboots.out_of_service(states, COMPUTE) == ["gpu002", "gpu003", "gpu005"]
    assert reboots.reboot_room("10%", COMPUTE, states) == 0  # 2 allowed, 3 out already
    assert reboots.reboot_room(5, COMPUTE, states) == 2
    assert reboots.reboot_room("10%", COMPUTE, {}) == 2
    assert reboots.reboot_room("10%", COMPUTE[:4], {}) == 1  # at least one node


def test_a_count_of_thousands_of_digits_is_every_node():
    """Read by its length, not int(): Python refuses integers of over 4,300 digits."""
    assert reboots.batch_size("9" * 5000, 20) == 20
    assert reboots.reboot_room("9" * 5000, COMPUTE, {}) == 20
    assert reboots.batch_size("21", 20) == 20
    assert reboots.batch_size("20", 20) == 20
    assert reboots.batch_size("3", 20) == 3


# /proc/driver/nvidia/version of a node running driver 580.65.06 (open modules).
PROC_580_65 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Jul 29 20:29:12 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)


def fact(installed: str, gpus: int = 8) -> dict:
    """The node's kiln_gpu local fact (node_plan.local_fact), the parts judged here."""
    return {"gpu_count": gpus, "driver": {"installed": installed, "pinned": installed}}


@pytest.mark.parametrize(
    ("node", "loaded", "version", "source", "target"),
    [
        # Nothing changes: the module loaded is the one installed and asked for.
        (fact("580.65.06"), PROC_580_65, "580.65.06", "cuda-repo", ""),
        (fact("580.65.06"), PROC_580_65, "", "debian", ""),  # kept: no version asked
        (fact("580.65.06"), PROC_580_65, "580", "cuda-repo", ""),  # kept within its branch
        # Another exact version: its module would wait for a reboot.
        (fact("580.65.06"), PROC_580_65, "580.95.05", "cuda-repo", "580.95.05"),
        # Another branch: whichever version of it the sources offer.
        (fact("580.65.06"), PROC_580_65, "590", "cuda-repo", "of branch 590"),
        # A reboot already pending counts, whatever is asked.
        (fact("580.95.05"), PROC_580_65, "", "debian", "580.95.05"),
        (fact("580.95.05"), PROC_580_65, "", "preinstalled", "580.95.05"),
        (fact("580.95.05"), "", "580.95.05", "cuda-repo", "580.95.05"),  # none loaded
        # A preinstalled driver is never changed; a node without a GPU, or the fact, is
        # not judged.
        (fact("580.65.06"), PROC_580_65, "580.95.05", "preinstalled", ""),
        (fact("580.65.06", gpus=0), "", "580.95.05", "cuda-repo", ""),
        ({}, PROC_580_65, "580.95.05", "cuda-repo", ""),
        # The first install on a GPU node Slurm already runs.
        (fact(""), "", "", "debian", "(a first install)"),
        (fact(""), "", "580.95.05", "cuda-repo", "580.95.05"),
    ],
)
def test_the_driver_a_node_in_slurm_would_wait_to_load(node, loaded, version, source, target):
    assert reboots.reboot_target(node, loaded, version, source) == target


def test_a_driver_change_on_more_nodes_in_slurm_than_allowed_is_refused():
    states = slurm_state.parse(SCONTROL)
    # 20 compute nodes, 10%: 2 may be out; 3 are out already (gpu002, gpu003, gpu005).
    # gpu003 waits too but is out already: it takes no more room.
    targets = {"gpu001": "580.95.05", "gpu003": "580.95.05", "gpu006": "", "gpu004": "580.95.05"}
    assert reboots.reboot_refusal(targets, "10%", COMPUTE, states, "inv/prod") == (
        "2 nodes in Slurm would need a reboot for driver 580.95.05; rollout_max_unavailable "
        "(10%) allows 0 more, 3 compute nodes being out of service already: apply it with "
        "`kiln rollout -i inv/prod`"
    )
    assert reboots.reboot_refusal(targets, 5, COMPUTE, states, "inv/prod") == ""  # room for 2
    three = {"gpu001": "580.95.05", "gpu004": "580.95.05", "gpu006": "of branch 590"}
    assert reboots.reboot_refusal(three, "10%", COMPUTE, {}, "inv/prod") == (
        "3 nodes in Slurm would need a reboot for driver 580.95.05, of branch 590; "
        "rollout_max_unavailable (10%) allows 2: apply it with `kiln rollout -i inv/prod`"
    )
    assert reboots.reboot_refusal({"gpu001": "", "gpu004": ""}, "10%", COMPUTE, {}, "i") == ""
    with pytest.raises(ValueError):
        reboots.reboot_refusal(three, "half", COMPUTE, {}, "inv/prod")


@pytest.mark.parametrize(("value", "problem"), [("10%", ""), (4, ""), ("4", ""), ("0", "'0'")])
def test_rollout_max_unavailable_is_a_count_or_a_share(value, problem):
    expected = (
        [
            f"rollout_max_unavailable {problem}: expected a node count (4) or a share of the nodes "
            "(10%)"
        ]
        if problem
        else []
    )
    assert settings.settings_problems({"rollout_max_unavailable": value}) == expected
    assert settings.settings_problems({}) == []  # the inventory check reads it by itself
