"""Every filter plugin of the roles, imported as Ansible imports it: each filter it offers is
a thin call into kiln.*, and errors become AnsibleFilterError with one line."""

import subprocess
import sys
from types import ModuleType

import pytest
from ansible.errors import AnsibleFilterError

from kiln import paths
from kiln.roles import hpcx
from tests.collection import IMPORT_PLUGIN, collection_plugin
from tests.conftest import REPO
from tests.results_files import Written

PLUGINS = sorted(REPO.glob("plugins/filter/*.py"))


def plugin(path) -> ModuleType:
    return collection_plugin("filter", path.stem)


def filters(name: str) -> dict:
    (path,) = [p for p in PLUGINS if p.stem == name]
    return plugin(path).FilterModule().filters()


@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_imports_and_offers_kiln_filters(path):
    offered = plugin(path).FilterModule().filters()
    assert offered and all(name.startswith("kiln_") and callable(f) for name, f in offered.items())


SHIM = REPO / "plugins/plugin_utils/kiln_package.py"


def test_every_plugin_that_imports_kiln_finds_it_through_the_one_shim():
    """The shim is the only place that touches sys.path, and it comes before kiln."""
    shim_import = "from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package"
    found = {}
    for path in sorted(REPO.glob("plugins/*/*.py")):
        text = path.read_text()
        lines = text.splitlines()
        first_kiln = next(
            (i for i, line in enumerate(lines) if line.startswith(("import kiln", "from kiln"))),
            None,
        )
        if "sys.path" in text or first_kiln is not None:
            shim = next((i for i, line in enumerate(lines) if line.startswith(shim_import)), None)
            found[str(path.relative_to(REPO))] = (
                "sys.path" in text,
                shim is not None and (first_kiln is None or shim < first_kiln),
            )
    assert found.pop("plugins/plugin_utils/kiln_package.py") == (True, False)
    assert len(found) == 19
    assert set(found.values()) == {(False, True)}, found


def test_the_shim_finds_kiln_in_a_checkout_without_it_installed():
    """-S: no site-packages, so no installed kiln; the shim puts the checkout's cli/ first."""
    code = "import runpy, sys\nrunpy.run_path(sys.argv[1])\nimport kiln\nprint(kiln.__file__)\n"
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(SHIM)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"{REPO / 'cli/kiln/__init__.py'}\n",
        "",
    )


# Ansible imports a filter plugin in every process that renders a template naming one of
# its filters. The checks registry (it imports every module that owns a variable) is
# kiln_checks' alone; no filter needs the run machinery, the reports or a command.
LOADED_BY_NO_FILTER = (
    "kiln.inventory.checks",
    "kiln.inventory.reader",
    "kiln.run",
    "kiln.report",
    "kiln.commands",
    "kiln.cli",
)
MOST_MODULES = 22  # kiln modules one filter plugin loads (kiln_slurm: 22, with topology and
# kiln.roles, the package its role module lives in, with kiln.paths)


def kiln_modules_loaded_by(path) -> list[str]:
    """The kiln modules in a fresh interpreter after importing `path` as Ansible does."""
    code = IMPORT_PLUGIN + "print(*sorted(m for m in sys.modules if m.split('.')[0] == 'kiln'))\n"
    done = subprocess.run(
        [sys.executable, "-c", code, str(paths.collections_dir()), "filter", path.stem],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.mark.parametrize(
    "path", [p for p in PLUGINS if p.stem != "kiln_checks"], ids=lambda p: p.name
)
def test_a_filter_plugin_loads_only_what_its_filters_use(path):
    loaded = kiln_modules_loaded_by(path)
    assert [m for m in loaded if m.startswith(LOADED_BY_NO_FILTER)] == []
    assert len(loaded) <= MOST_MODULES, loaded


def test_storage_plan_for_a_host():
    plan = filters("kiln_autofs")["kiln_storage_plan"]
    declared = [{"name": "shared", "path": "/shared", "type": "nfs", "source": "nas:/ml"}]
    found = plan(declared, ["slurm_compute"], "6.1.0-18-amd64", {"nfs": ["hard", "vers=4.2"]})
    assert found == {
        "files": found["files"],  # the map text itself: tests/unit/test_storage.py
        "packages": ["autofs", "nfs-common"],
        "vendor": [],
        "checks": found["checks"],
        "autofs": True,
        "units": [],
    }
    assert sorted(found["files"]) == [
        "/etc/auto.kiln-shared",
        "/etc/auto.master.d/kiln-shared.autofs",
    ]
    assert [c["path"] for c in found["checks"]] == ["/shared"]
    with pytest.raises(AnsibleFilterError, match=r"^autofs_mounts: "):
        plan([{"name": "x", "path": "/x", "type": "cifs9", "source": "a:/b"}], [], "6.1", {})


def test_storage_plan_refuses_a_kernel_without_autofs():
    plan = filters("kiln_autofs")["kiln_storage_plan"]
    declared = [{"name": "shared", "path": "/shared", "type": "nfs", "source": "nas:/ml"}]
    # /proc/filesystems as the node's read gives it: a kernel built without autofs (a
    # virtual machine's, seen on one of Kiln's test hosts), then Debian 12's with it.
    without = "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\tfuse\nnodev\toverlay\n"
    with_autofs = without + "nodev\tautofs\n"
    with pytest.raises(AnsibleFilterError) as raised:
        plan(declared, ["slurm_compute"], "6.18.44-fc", {}, without)
    assert raised.value.message == (
        "autofs: this node's kernel (6.18.44-fc) has no autofs (none in /proc/filesystems), "
        "so its automounts (shared) cannot work: boot a kernel with autofs (CONFIG_AUTOFS_FS), "
        "mount them at boot instead (autofs_automount: false), "
        "or leave the node out of the mounts' groups"
    )
    assert plan(declared, ["slurm_compute"], "6.1.0-18-amd64", {}, with_autofs) == plan(
        declared, ["slurm_compute"], "6.1.0-18-amd64", {}
    )
    # A node none of the mounts is for needs no autofs.
    compute_only = [{**declared[0], "groups": ["slurm_compute"]}]
    assert plan(compute_only, ["storage"], "6.18.44-fc", {}, without)["packages"] == []
    # Mounts made at boot need none either: systemd mounts them.
    at_boot = plan(declared, ["slurm_compute"], "6.18.44-fc", {}, without, False)
    assert (at_boot["autofs"], at_boot["units"], at_boot["packages"]) == (
        False,
        ["shared.mount"],
        ["nfs-common"],
    )


def test_an_image_takes_the_clients_of_every_declared_mount_type():
    packages = filters("kiln_autofs")["kiln_storage_packages"]

    def mounts(*types: str) -> list[dict]:
        return [
            {"name": f"m{i}", "path": f"/m{i}", "type": t, "source": f"/srv/m{i}"}
            if t == "bind"
            else {"name": f"m{i}", "path": f"/m{i}", "type": t, "source": f"nas:/m{i}"}
            for i, t in enumerate(types)
        ]

    assert packages(mounts("glusterfs", "nfs4", "nfs", "lustre", "bind")) == [
        "autofs",
        "glusterfs-client",
        "nfs-common",
    ]
    assert packages(mounts("bind")) == ["autofs"]
    assert packages([]) == []
    # A mount the image cannot serve is refused as a node's plan refuses it, not skipped.
    with pytest.raises(AnsibleFilterError) as raised:
        packages(mounts("nfs", "nsf"))
    plan = filters("kiln_autofs")["kiln_storage_plan"]
    with pytest.raises(AnsibleFilterError) as planned:
        plan(mounts("nfs", "nsf"), ["slurm_compute"], "6.1", {})
    assert raised.value.message == planned.value.message
    assert raised.value.message.startswith("autofs_mounts: mount m1: ")


def test_slurm_nodes_from_declared_or_cached_shapes():
    nodes = filters("kiln_slurm")["kiln_slurm_nodes"]
    shape = {"CPUs": 16, "RealMemory": 64000, "CoresPerSocket": 8, "ThreadsPerCore": 2}
    hostvars = {
        "gpu1": {"slurm_node_shape": shape},
        # detected in an earlier run: only in the fact cache
        "gpu2": {"ansible_facts": {"slurm_detected_shape": shape}},
    }
    (line,) = nodes(hostvars, ["gpu1", "gpu2"]).splitlines()  # one shape: one line
    assert line.split()[:2] == ["NodeName=gpu[1-2]", "CPUs=16"]
    with pytest.raises(ValueError, match="no node shape for gpu3"):
        nodes({"gpu3": {}}, ["gpu3"])


def test_validate_plan_from_scontrol():
    plan = filters("kiln_validate")["kiln_validate_plan"]
    scontrol = (
        "NodeName=gpu1 State=IDLE Reason=\n"
        "NodeName=gpu2 State=IDLE+DRAIN Reason=kiln: storage.mount /shared [root@2026]\n"
    )
    found = plan(scontrol, ["gpu1", "gpu2"])
    assert found["test"] == ["gpu1", "gpu2"]
    assert found["resume_to_test"] == ["gpu2"]


def test_plugstack_conf_from_the_files_found():
    offered = filters("kiln_slurm")
    found = ["/etc/slurm/plugstack.conf.d/pyxis.conf"]
    assert offered["kiln_slurm_plugstack"](found).splitlines()[2:] == [
        "include /etc/slurm/plugstack.conf.d/pyxis.conf"
    ]


def test_slurm_settings_and_files_from_the_found_plugins():
    offered = filters("kiln_slurm")
    # What the role's find returns on Debian 12 with libpmix-dev (libpmix2 alone has only
    # the versioned library, which Slurm's plugin does not load).
    runtime = "/usr/lib/x86_64-linux-gnu/libpmix.so.2"
    paths = [
        "/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so",
        runtime,
        "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so",
    ]
    conf = offered["kiln_slurm_settings"]({}, {}, paths, ["ctl"], cgroup=False)
    assert conf["MpiDefault"] == "pmix" and conf["SlurmctldHost"] == ["ctl"]
    assert offered["kiln_slurm_pmix_problem"](paths) == ""
    assert offered["kiln_slurm_pmix_problem"](paths[:2]) == (
        "the PMIx library Slurm's plugin loads (libpmix.so, Debian's libpmix-dev) is not installed"
    )
    without = offered["kiln_slurm_settings"]({}, {}, paths[:2], ["ctl"], cgroup=False)
    assert without["MpiDefault"] == "none"
    hostvars = {"gpu1": {"slurm_node_shape": {"CPUs": 4, "RealMemory": 8000}}}
    files = offered["kiln_slurm_files"](
        conf, {}, "slurm-wlm 24.11.5", hostvars, ["gpu1"], {"slurm_compute": ["gpu1"]}, [], paths
    )
    assert sorted(files) == ["cgroup.conf", "gres.conf", "slurm.conf"]
    assert "MpiDefault=pmix" in files["slurm.conf"].splitlines()
    with pytest.raises(AnsibleFilterError, match="no node shape for gpu2"):
        offered["kiln_slurm_files"](conf, {}, "24.11", {"gpu2": {}}, ["gpu2"], {}, [], [])


@pytest.mark.parametrize(
    ("plugin", "line"),
    [
        ("gpu_nvidia.so", "NodeName=gpu1 AutoDetect=nvidia"),  # Debian 13's Slurm 24.11
        ("gpu_nvml.so", "NodeName=gpu1 AutoDetect=nvml"),
        ("gpu_generic.so", "NodeName=gpu1 Name=gpu File=/dev/nvidia[0-7]"),
    ],
)
def test_gres_conf_follows_the_gpu_plugin_the_controller_has(plugin, line):
    files = filters("kiln_slurm")["kiln_slurm_files"](
        {},
        {},
        "slurm-wlm 24.11.5",
        {"gpu1": {"slurm_node_shape": {"CPUs": 64, "RealMemory": 8000, "Gres": "gpu:8"}}},
        ["gpu1"],
        {"slurm_compute": ["gpu1"]},
        [],
        [f"/usr/lib/x86_64-linux-gnu/slurm-wlm/{plugin}"],
    )
    assert files["gres.conf"] == f"# Managed by Kiln (slurm role).\n{line}\n"


def test_validate_paths_come_from_the_results_layout(tmp_path):
    """The role writes where kiln.validation.collect reads: both from one layout."""
    from kiln.validation import results

    paths = filters("kiln_validate")["kiln_validate_paths"]("/state/raw", "20261123-1200-ab")
    on = "/var/lib/kiln/validate/20261123-1200-ab-controller"
    assert paths == {
        "results": "/state/raw",
        "node_dir": "/var/lib/kiln/validate/20261123-1200-ab",
        "node_kinds": [
            "storage",
            "cold_import",
            "collectives_node",
            "collectives_all",
            "burn_stress",
            "munge",
            "health",
        ],
        "controller_dir": on,
        "controller_records": [
            "slurm_state.json",
            "prerequisites.json",
            "srun.json",
            "mpi.json",
            "storage_steps.json",
            "collectives_steps.json",
            "nccl_tests.json",
            "pairs.json",
            "burn_in_steps.json",
        ],
        "on_controller": {
            "slurm_state": f"{on}/slurm_state.json",
            "prerequisites": f"{on}/prerequisites.json",
            "srun": f"{on}/srun.json",
            "mpi": f"{on}/mpi.json",
            "storage_steps": f"{on}/storage_steps.json",
            "collectives_steps": f"{on}/collectives_steps.json",
            "nccl_tests": f"{on}/nccl_tests.json",
            "pairs": f"{on}/pairs.json",
            "burn_in_steps": f"{on}/burn_in_steps.json",
        },
        "mpi_check": "/usr/local/libexec/kiln/kiln-mpi-check",
    }
    layout = results.make(tmp_path / "raw")
    Written(layout.root).write_node("storage", "gpu001", {"node": "gpu001"})
    fetched = filters("kiln_validate")["kiln_validate_paths"](str(layout.root), "r")
    assert (tmp_path / "raw" / "storage" / "gpu001.json").is_file()
    assert f"{fetched['results']}/storage/gpu001.json" == str(layout.node_path("storage", "gpu001"))
    assert layout.load_node("storage", "gpu001") == {"node": "gpu001"}
    assert layout.load(results.SRUN) is None  # not written: the collect step says so


def test_gpu_filters_plan_pin_and_name_packages_off_the_pin():
    """The role's whole path through kiln.roles.nvidia_driver: detect output to plan,
    apt's policy to a pin, dpkg's versions to what is off it, and the fact."""
    offered = filters("kiln_nvidia_driver")
    detected = {"pci": [], "proc_version": "", "modinfo_version": "", "packages": {}}
    settings = {"source": "debian", "required": False, "install_without_gpu": True,
                "kernel_modules": "open"}  # fmt: skip
    plan = offered["kiln_gpu_plan"](detected, settings)
    assert (plan["work"], plan["gpus"], plan["skip"], plan["fail"]) == (True, 0, "", "")
    policy = "nvidia-smi:\n  Installed: (none)\n  Candidate: 535.261.03-1\n  Version table:\n"
    policy += "     535.261.03-1 500\n        500 http://deb.debian.org/debian bookworm/non-free\n"
    assert offered["kiln_gpu_pin"](policy, "") == "535.261.03"
    with pytest.raises(AnsibleFilterError, match=r"^nvidia_driver_version: driver 580\.1\.1 is"):
        offered["kiln_gpu_pin"](policy, "580.1.1")
    assert offered["kiln_gpu_apt_pin"]("535.261.03") == "535.261.03-*"
    off = offered["kiln_gpu_off_pin"](
        "nvidia-smi 535.261.03-1\n", ["nvidia-smi", "libcuda1"], "535.261.03"
    )
    assert off == ["libcuda1 missing"]
    fact = offered["kiln_gpu_fact"](plan, "", "535.261.03", "debian")
    assert fact["driver"]["pinned"] == "535.261.03" and fact["gpu_count"] == 0


def test_mpi_module_system_and_files():
    offered = filters("kiln_mpi")
    assert offered["kiln_mpi_layout"]("lmod", "/opt/kiln/modulefiles") == {
        "modulespath": "/etc/lmod/modulespath",
        "others": ["environment-modules"],
        "check_program": "/usr/local/libexec/kiln/kiln-mpi-check",
    }
    with pytest.raises(AnsibleFilterError, match=r"^mpi_module_path 'rel': expected an absolute"):
        offered["kiln_mpi_layout"]("lmod", "rel")
    # Debian 12's openmpi-bin; none where Open MPI is not installed
    entries = offered["kiln_mpi_module_files"]("4.1.4-3", "/opt/modules")
    assert [(e["path"], e["diff"]) for e in entries] == [
        ("/opt/modules/mpi/openmpi", True),
        ("/opt/modules/mpi/.modulerc", True),
    ]
    assert entries[0]["content"].startswith("#%Module")
    assert offered["kiln_mpi_module_files"]("", "/opt/modules") == []


def test_hpcx_plan_refusals_and_module_files():
    offered = filters("kiln_hpcx")
    settings = {
        "version": "2.22.1",
        "sha256": "1c3d5f7a9b2e4c6d8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e",
        "url": "",
        "base_url": "http://mirror",
        "cuda": "12",
        "fetch": "node",
        "root": "/opt/hpcx",
    }
    bookworm = {
        "distribution": "Debian",
        "distribution_major_version": "12",
        "architecture": "x86_64",
    }
    plan = offered["kiln_hpcx_plan"](settings, bookworm, "ii \trdma-core\n")
    assert (
        plan["url"] == "http://mirror/v2.22.1/hpcx-v2.22.1-gcc-inbox-ubuntu22.04-cuda12-x86_64.tbz"
    )
    assert plan["refusal"] == ""
    # A release HPC-X has no build for: refused, with why.
    bullseye = {**bookworm, "distribution_major_version": "11"}
    refused = offered["kiln_hpcx_plan"](settings, bullseye, "")
    assert refused["refusal"].startswith("HPC-X has no build for Debian 11")
    with pytest.raises(AnsibleFilterError, match=r"^hpcx_version 2.22.1 needs hpcx_sha256"):
        offered["kiln_hpcx_plan"]({**settings, "sha256": ""}, bookworm, "")
    # Every node refused, grouped by reason, in one line.
    hostvars = {
        "gpu001": {"_hpcx_plan": refused},
        "gpu002": {"_hpcx_plan": refused},
        "gpu003": {"_hpcx_plan": plan},
        "login1": {},
    }
    line = offered["kiln_hpcx_refusals"](hostvars, ["gpu001", "gpu002", "gpu003", "login1"])
    assert line == f"gpu[001-002]: {refused['refusal']}"
    assert offered["kiln_hpcx_refusals"](hostvars, ["gpu003", "login1"]) == ""
    entries = offered["kiln_hpcx_module_files"]("/opt/hpcx/2.22.1", "2.22.1", True, "/opt/modules")
    assert [(e["path"], e["diff"]) for e in entries] == [
        ("/opt/modules/mpi/hpcx", True),
        ("/opt/modules/mpi/hpcx-pmix", True),
    ]
    shipped = hpcx.module_files("/opt/hpcx/2.22.1", "2.22.1", True)
    assert [e["content"] for e in entries] == [shipped["mpi/hpcx"], shipped["mpi/hpcx-pmix"]]
    assert hpcx.MARK in entries[0]["content"]


def test_nccl_plan_and_plugin_for_a_node():
    offered = filters("kiln_nccl_env")
    probe = {"infiniband": {}, "dmi": {}, "socket_ifname": "eth0", "machine": ""}
    planned = offered["kiln_nccl_plan"](probe, {}, [])
    assert planned["preset"] == "socket"
    assert planned["conf"].splitlines()[2:] == ["NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME==eth0"]
    assert offered["kiln_nccl_plugin"](probe, {"gib": {"env_script": "/x.sh"}}) == {}
    a3_mega = {**probe, "dmi": {"sys_vendor": "Google"}, "machine": "a3-megagpu-8g"}
    plugins = {"tcpxo": {"env_script": "/t/env.sh", "library_dir": "/t"}}
    assert offered["kiln_nccl_plugin"](a3_mega, plugins) == {
        "env_script": "/t/env.sh",
        "library_dir": "/t",
    }
    with pytest.raises(AnsibleFilterError, match=r"^nccl_env_overrides: 'bad key' is not"):
        offered["kiln_nccl_plan"](probe, {"bad key": 1}, [])
    assert offered["kiln_nccl_metadata"]({"sys_vendor": "Google"}) == {
        "url": "http://metadata.google.internal/computeMetadata/v1/instance/machine-type",
        "header": "Metadata-Flavor: Google",
    }
    assert offered["kiln_nccl_metadata"]({"sys_vendor": "Supermicro"}) == {}


def test_health_plan_for_a_node():
    plan = filters("kiln_health")["kiln_health_plan"]
    fact = {"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB", "nvswitch_count": 6}
    settings = {"timeout": "45", "check_timeout": "10", "gpus": "", "nvlinks_per_gpu": ""}
    settings["prolog_timeout"] = "10"
    assert plan(fact, settings) == {
        "timeout": 45,
        "check_timeout": 10,
        "prolog_timeout": 10,
        "gpus": 8,
        "nvswitches": 6,
        "nvlinks_per_gpu": 12,
        "ib_ports": [],
        "free_space": [],
        "munge": True,
        "slurm": True,
        "mount_check": "",
        "metrics_dir": "",
        "dcgm_diag_level": 0,
        "nvlink_domain": False,
        "imex": False,
    }


def test_enroot_plan_for_a_node():
    plan = filters("kiln_enroot")["kiln_enroot_plan"]
    settings = {
        "version": "4.1.2",
        "sha256": "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae",
        "caps": False,
        "caps_sha256": "",
        "base_url": "http://mirror",
        "fetch": "node",
        "extra_hooks": [],
        "extra_config": {},
        "runtime_path": "/e/run/user-$(id -u)",
        "cache_path": "/e/cache",
        "data_path": "/e/data/$(id -u)",
        "temp_path": "/e/tmp",
        "squash_options": "-comp zstd",
        "mount_home": True,
        "remap_root": False,
        "rootfs_writable": True,
    }
    mounts = [{"name": "shared", "path": "/shared", "type": "nfs", "source": "nas:/s"}]
    found = plan(settings, "amd64", mounts, ["slurm_compute"], ["/etc/nccl.conf"])
    assert [p["url"] for p in found["packages"]] == [
        "http://mirror/v4.1.2/enroot_4.1.2-1_amd64.deb"
    ]
    assert sorted(found) == ["files", "packages", "problems"]
    offered = filters("kiln_enroot")
    assert (
        offered["kiln_enroot_missing"](found["packages"], "enroot\t4.1.2-1\tunpacked\n")
        == (found["packages"])
    )
    assert offered["kiln_enroot_missing"](found["packages"], "enroot\t4.1.2-1\tinstalled\n") == []
    unmet = (
        "The following packages have unmet dependencies:\n"
        " enroot : Depends: x but it is not installable\n"
    )
    assert offered["kiln_enroot_install_failure"](found["packages"], "n1", unmet, "E: held") == (
        "enroot 4.1.2-1 cannot be installed on n1: enroot depends on x, but it is not installable"
    )
    written = {e["path"]: e for e in found["files"]}
    assert [(e["path"], e.get("state", "file"), e.get("mode")) for e in found["files"]] == [
        ("/e/run", "directory", "1777"),
        ("/e/cache", "directory", "1777"),
        ("/e/data", "directory", "1777"),
        ("/e/tmp", "directory", "1777"),
        ("/etc/enroot/enroot.conf.d/50-kiln.conf", "file", None),
        ("/etc/enroot/mounts.d/50-kiln-storage.fstab", "file", None),
        ("/etc/enroot/mounts.d/50-kiln-nccl.fstab", "file", None),
    ]
    assert found["problems"] == []
    assert "ENROOT_MOUNT_HOME yes" in written["/etc/enroot/enroot.conf.d/50-kiln.conf"]["content"]
    # No mount of a kind declared: its file goes.
    bare = {e["path"]: e for e in plan(settings, "amd64", [], [], [])["files"]}
    assert bare["/etc/enroot/mounts.d/50-kiln-nccl.fstab"] == {
        "path": "/etc/enroot/mounts.d/50-kiln-nccl.fstab",
        "state": "absent",
    }
    assert plan({**settings, "sha256": ""}, "amd64", [], [], [])["problems"] == [
        "enroot_version 4.1.2 needs enroot_sha256: the enroot package's sha256 (64 hex digits)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    # The role's "Refuse settings" task fails on these before anything is written.
    assert plan({**settings, "extra_config": {"X": 1}}, "amd64", [], [], []) == {
        "problems": ["enroot_extra_config: 'X' is not an ENROOT_ setting"]
    }
    assert plan({**settings, "cache_path": "/e/$(reboot)"}, "amd64", [], [], []) == {
        "problems": [
            "enroot_cache_path '/e/$(reboot)': expected an absolute path (or one from "
            "${VARIABLE}) of letters, digits and ._/+@%:,=- with no '..', which may use "
            "$(id -u), $(id -g) and ${VARIABLE} (enroot "
            "expands it in a shell)"
        ]
    }
    on_gcp = plan(settings, "amd64", [], [], ["/etc/nccl.conf"], ["/usr/local/gib/lib64"])
    nccl = next(e for e in on_gcp["files"] if e["path"].endswith("50-kiln-nccl.fstab"))
    assert nccl["content"].splitlines()[1] == (
        "/usr/local/gib/lib64 /usr/local/gib/lib64 none "
        "x-create=dir,bind,ro,nosuid,nodev,nofail,silent"
    )


def test_pyxis_plan_for_a_node():
    offered = filters("kiln_pyxis")
    settings = {
        "version": "0.24.0",
        "sha256": "000152b48de54df78fd12b22a1f0c50b5505cdf0b4e7ad75e01f8bf820fe7181",
        "base_url": "http://mirror/pyxis",
        "fetch": "node",
        "runtime_path": "/run/pyxis",
        "execute_entrypoint": False,
        "container_scope": "global",
        "sbatch_support": True,
    }
    header = "#define SLURM_VERSION_NUMBER 0x180b05\n"
    old = "/usr/local/lib/pyxis/0.24.0-slurm-22.05.8"
    assert offered["kiln_pyxis_plan"](settings, header, [old]) == {
        "slurm": "24.11.5",
        "source": {
            "url": "http://mirror/pyxis/v0.24.0.tar.gz",
            "file": "pyxis-0.24.0.tar.gz",
            "top": "pyxis-0.24.0",
            "sha256": "000152b48de54df78fd12b22a1f0c50b5505cdf0b4e7ad75e01f8bf820fe7181",
        },
        "build_dir": "/usr/local/lib/pyxis/0.24.0-slurm-24.11.5",
        "plugin": "/usr/local/lib/pyxis/0.24.0-slurm-24.11.5/slurm/spank_pyxis.so",
        "conf": (
            "# Written by Kiln (role pyxis): pyxis 0.24.0 built for Slurm 24.11.5.\n"
            "required /usr/local/lib/pyxis/0.24.0-slurm-24.11.5/slurm/spank_pyxis.so "
            "runtime_path=/run/pyxis execute_entrypoint=0 container_scope=global sbatch_support=1\n"
        ),
        "stale": [old],
    }
    assert offered["kiln_pyxis_problems"]({**settings, "sha256": ""}) == [
        "pyxis_version 0.24.0 needs pyxis_sha256: the source tarball's sha256 (64 hex digits)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    with pytest.raises(AnsibleFilterError, match=r"has no SLURM_VERSION_NUMBER"):
        offered["kiln_pyxis_plan"](settings, "", [])


def test_nccl_tests_plan_as_the_role_hands_it_over():
    offered = filters("kiln_nccl_tests")
    settings = {
        "version": "2.19.6",
        "sha256": "4df15e9cdf7714b65dd4ff9979a1663b8efaac2d1c91296593e6387b044bd393",
        "base_url": "http://mirror/nccl-tests",
        "fetch": "control",
        "cuda_archs": [],
    }
    toolchain = {
        "cuda": {"home": "/usr/local/cuda", "version": "13.0.88", "lib": "/usr/local/cuda/lib64"},
        "nccl": {"home": "/usr", "version": "2.27.7", "lib": "/usr/lib", "library": "libnccl.so"},
        "mpi": None,
    }
    # nvidia-smi's stdout_lines and getconf's stdout, as registered.
    plan = offered["kiln_nccl_tests_plan"](settings, toolchain, ("9.0", "9.0"), "4")
    assert plan["make"]["argv"] == [
        "make",
        "-C",
        "/usr/local/src/kiln-nccl-tests/nccl-tests-2.19.6",
        "-j4",
        "BUILDDIR=/opt/nccl-tests/2.19.6/bin",
        "CUDA_HOME=/usr/local/cuda",
        "NCCL_HOME=/usr",
        "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90",
    ]
    assert offered["kiln_nccl_tests_plan"](settings, {**toolchain, "cuda": None}, [], "4") == {
        "skip": "no CUDA toolkit (bin/nvcc) on this node: nccl-tests not built"
    }
    assert offered["kiln_nccl_tests_problems"]({**settings, "sha256": ""}) == [
        "nccl_tests_version 2.19.6 needs nccl_tests_sha256: the source tarball's sha256 "
        "(64 hex digits); `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
    ]
    # validate_nccl_tests_dir's default, with nccl_tests_version set or not.
    assert offered["kiln_nccl_tests_bin_dir"]("2.19.6") == "/opt/nccl-tests/2.19.6/bin"
    assert offered["kiln_nccl_tests_bin_dir"]("") == "/opt/nccl-tests/build"
    assert offered["kiln_nccl_tests_bin_dir"](None) == "/opt/nccl-tests/build"


# --- values that land in config files: the role refuses what `kiln inventory check` does ---

URL_RULE = (
    "expected a URL (http://host:3142/...) of the characters URLs allow: no spaces, quotes "
    "or line breaks"
)
WORD_RULE = "must be one word of printable ASCII: no spaces, line breaks, '\"', '#' or '\\'"


def test_value_problems_name_each_base_value_its_file_cannot_hold():
    problems = filters("kiln_checks")["kiln_value_problems"]
    good = {
        "base_apt_proxy": "http://mirror.site:3142",
        "base_ntp_servers": ["0.pool.ntp.org", "10.0.0.1"],
        "base_ntp_allow": ["0.0.0.0/0", "::/0"],
        "base_limits": [{"domain": "*", "type": "-", "item": "memlock", "value": "unlimited"}],
        "base_sysctl": {"net.ipv4.tcp_rmem": "4096 87380 16777216"},
        "base_systemd_limits": {"DefaultLimitNOFILE": "1048576"},
        "ansible_host": "fe80::1%eth0",
        "kiln_address": "",
    }
    assert problems(good) == []
    bad = {
        "base_apt_proxy": 'http://p:3142";\nAPT::Update::Pre-Invoke {"id"};',
        "base_ntp_servers": ["ntp1\ninclude /tmp/x"],
        "base_ntp_allow": ["10.0.0.0/8 all"],
        "base_limits": [{"domain": "*", "type": "-", "item": "nofile", "value": "1 #"}],
        "base_sysctl": {"kernel.core_pattern\n": "x", "vm.x": "1\nkernel.y = 2"},
        "base_systemd_limits": {"DefaultLimitNOFILE": "1\\"},
        "ansible_host": "10.0.0.1\nserver evil",
    }
    assert problems(bad) == [
        'base_apt_proxy \'http://p:3142";\\nAPT::Update::Pre-Invoke {"id"};\': ' + URL_RULE,
        f"base_ntp_servers 'ntp1\\ninclude /tmp/x': {WORD_RULE}",
        f"base_ntp_allow '10.0.0.0/8 all': {WORD_RULE}",
        f"base_limits value '1 #': {WORD_RULE}",
        "base_sysctl 'kernel.core_pattern\\n': is not a kernel setting name (net.core.rmem_max)",
        "base_systemd_limits DefaultLimitNOFILE '1\\\\': must be one line: no line breaks or "
        "other control characters, no '\\' at the end",
        f"ansible_host '10.0.0.1\\nserver evil': {WORD_RULE}",
    ]
    # One problem a variable: the first value it cannot hold.
    assert problems({"base_sysctl": {"vm.x": "1\nkernel.y = 2"}}) == [
        "base_sysctl vm.x '1\\nkernel.y = 2': must be one line: no line breaks or other control "
        "characters, no '\\' at the end"
    ]


SLURM_HOSTVARS = {"gpu1": {"slurm_node_shape": {"CPUs": 4, "RealMemory": 8000}}}


@pytest.mark.parametrize(
    ("conf", "cgroup", "partitions", "message"),
    [
        (
            {"Prolog": "/x PrologSlurmctld=/tmp/x"},
            {},
            [],
            f"slurm.conf: Prolog '/x PrologSlurmctld=/tmp/x' {WORD_RULE}",
        ),
        ({"Prolog\n": "/x"}, {}, [], "slurm.conf: 'Prolog\\n' is not a Slurm setting name"),
        (
            {},
            {"ConstrainCores": "yes\nCgroupPlugin=x"},
            [],
            f"cgroup.conf: ConstrainCores 'yes\\nCgroupPlugin=x' {WORD_RULE}",
        ),
        (
            {},
            {},
            [{"name": "batch", "max_time": "1:00:00\nPrologSlurmctld=/tmp/x"}],
            "partition batch: max_time '1:00:00\\nPrologSlurmctld=/tmp/x': expected INFINITE, "
            "minutes (60), or [days-]hours:minutes:seconds (1-00:00:00)",
        ),
        (
            {},
            {},
            [{"name": "batch", "extra": {"OverSubscribe": "NO\nPrologSlurmctld=/tmp/x"}}],
            f"partition batch: extra: OverSubscribe 'NO\\nPrologSlurmctld=/tmp/x' {WORD_RULE}",
        ),
        (
            {},
            {},
            [{"name": "batch queue"}],
            "partition name 'batch queue' may hold only letters, digits, '.', '_' and '-'",
        ),
    ],
    ids=["conf-space", "conf-key", "cgroup-line", "max-time-line", "extra-line", "name-space"],
)
def test_slurm_files_refuse_values_slurm_conf_cannot_hold(conf, cgroup, partitions, message):
    files = filters("kiln_slurm")["kiln_slurm_files"]
    groups = {"slurm_compute": ["gpu1"]}
    args = ("24.11", SLURM_HOSTVARS, ["gpu1"], groups, partitions, [])
    with pytest.raises(AnsibleFilterError) as raised:
        files(conf, cgroup, *args)
    assert raised.value.message == message


def test_value_problems_check_the_slurm_roles_values_as_the_inventory_check_does():
    """The slurm role's pre-flight: what it would write into slurm.conf, cgroup.conf and
    slurmdbd.conf, refused before it installs or writes anything; the password's message
    never holds it; partitions name the inventory's groups."""
    problems = filters("kiln_checks")["kiln_value_problems"]
    groups = {"all": ["ctl", "gpu1"], "slurm_compute": ["gpu1"], "ungrouped": []}
    omit = "__omit_place_holder__0123456789abcdef"  # what Ansible's `omit` resolves to
    good = {
        "slurm_partitions": [{"name": "batch", "nodes": "slurm_compute", "max_time": "1-00:00:00"}],
        "slurm_node_shape": {},
        "slurm_conf_defaults": {"HealthCheckNodeState": "ANY,CYCLE", "HealthCheckInterval": omit},
        "slurm_conf_overrides": {"SchedulerParameters": "bf_continue,bf_max_job_test=1000"},
        "slurm_cgroup_conf": {"CgroupPlugin": "autodetect", "ConstrainCores": True},
        "slurm_dbd_password": "Zq3-xY_9.long/and+odd@chars",
    }
    assert problems(good, groups) == []
    bad = {
        "slurm_partitions": [{"name": "batch", "nodes": "gpus", "max_time": "60"}],
        "slurm_node_shape": {"CPUs": 4, "RealMemory": 8000, "Features": ["ib,evil[1-9]"]},
        "slurm_conf_defaults": {"HealthCheckNodeState": "ANY\nPrologSlurmctld=/tmp/x"},
        "slurm_conf_overrides": {"Prolog": "/x PrologSlurmctld=/tmp/x"},
        "slurm_cgroup_conf": {"ConstrainCores": "yes\nCgroupPlugin=x"},
        "slurm_dbd_password": "s3cret\nPluginDir=/tmp",
    }
    assert problems(bad, groups) == [
        "slurm_partitions: partition batch: nodes 'gpus' is neither an inventory group nor a "
        "hostlist of compute nodes",
        "slurm_node_shape: shape feature 'ib,evil[1-9]' may hold only letters, digits, '.', '_' "
        "and '-'",
        "slurm_conf_defaults: slurm.conf: HealthCheckNodeState 'ANY\\nPrologSlurmctld=/tmp/x' "
        + WORD_RULE,
        f"slurm_conf_overrides: slurm.conf: Prolog '/x PrologSlurmctld=/tmp/x' {WORD_RULE}",
        f"slurm_cgroup_conf: cgroup.conf: ConstrainCores 'yes\\nCgroupPlugin=x' {WORD_RULE}",
        f"slurm_dbd_password {WORD_RULE} (slurmdbd.conf's StoragePass)",
    ]


def test_gpu_settings_problems_refuse_a_url_apt_would_read_as_more_fields():
    problems = filters("kiln_nvidia_driver")["kiln_gpu_settings_problems"]
    settings = {
        "source": "cuda-repo",
        "cuda_repo_key_sha256": "d8f9a6d443303de93238800628107e0e10181bd4def8b53d52b9999ca92bc0fc",
    }
    assert (
        problems({**settings, "cuda_repo_url": "https://mirror.site/cuda/debian12/x86_64/"}) == []
    )
    assert problems({**settings, "cuda_repo_url": "https://m/\nTrusted: yes"}) == [
        f"nvidia_driver_cuda_repo_url 'https://m/\\nTrusted: yes': {URL_RULE} (apt's sources "
        "hold it)"
    ]
    assert problems({**settings, "debian_mirror": "http://m/ http://evil/"}) == [
        f"nvidia_driver_debian_mirror 'http://m/ http://evil/': {URL_RULE} (apt's sources hold it)"
    ]
    assert problems({**settings, "cuda_repos_url": "http://m/cuda\nTrusted: yes"}) == [
        f"nvidia_driver_cuda_repos_url 'http://m/cuda\\nTrusted: yes': {URL_RULE} (apt's sources "
        "hold it)"
    ]


def test_gpu_settings_problems_refuse_module_options_modprobe_would_read_as_more():
    """modprobe.d's `options nvidia-current NAME=VALUE` line: a line break would add an
    `install` line, which modprobe runs as root."""
    problems = filters("kiln_nvidia_driver")["kiln_gpu_settings_problems"]
    good = {"NVreg_EnableStreamMemOPs": 1, "NVreg_RegistryDwords": "PeerMappingOverride=1;"}
    assert problems({"module_options": good}) == []
    bad = {
        "NVreg_A": "1\ninstall nvidia-current /bin/sh -c id",
        "NVreg_B C": 1,
        "NVreg_C": "1 NVreg_D=2",
    }
    assert problems({"module_options": bad}) == [
        f"nvidia_driver_module_options: NVreg_A '1\\ninstall nvidia-current /bin/sh -c id' "
        f"{WORD_RULE}",
        "nvidia_driver_module_options: 'NVreg_B C' is not a module parameter name (letters, "
        "digits and '_')",
        f"nvidia_driver_module_options: NVreg_C '1 NVreg_D=2' {WORD_RULE}",
    ]


def test_nccl_plan_refuses_variables_outside_ncclls_families():
    plan = filters("kiln_nccl_env")["kiln_nccl_plan"]
    with pytest.raises(AnsibleFilterError) as raised:
        plan({}, {"LD_PRELOAD": "/tmp/x.so"}, [])
    assert raised.value.message == (
        "nccl_env_overrides: LD_PRELOAD is not a setting of NCCL or of a library it loads "
        "(allowed: NCCL_*, FI_*, OFI_NCCL_*, UCX_*, SHARP_*, RDMAV_*, MLX5_*, IBV_*, CUDA_*; "
        "not CUDA_INJECTION32_PATH, CUDA_INJECTION64_PATH)"
    )
    allowed = {"NCCL_DEBUG": "INFO", "UCX_TLS": "rc", "SHARP_COLL_ENABLE_SAT": 1}
    assert plan({}, allowed, [])["fact"]["sources"] == {
        "NCCL_IB_DISABLE": "socket",
        **dict.fromkeys(allowed, "override"),
    }


def test_storage_plan_refuses_words_an_autofs_map_cannot_hold():
    plan = filters("kiln_autofs")["kiln_storage_plan"]
    mount = {"name": "s", "path": "/s", "type": "nfs", "source": "nas:/s"}
    with pytest.raises(AnsibleFilterError) as raised:
        plan([{**mount, "source": "nas:/s\n/evil -fstype=nfs evil:/"}], [], "6.1", {})
    assert raised.value.message == (
        "autofs_mounts: mount s: source 'nas:/s\\n/evil -fstype=nfs evil:/' must be one word of "
        "printable ASCII: no spaces, line breaks or '\"', and a '\\' only before another character"
    )
    with pytest.raises(AnsibleFilterError) as raised:
        plan([mount], [], "6.1", {"nfs": ["hard program:/tmp/x"]})
    assert raised.value.message.startswith(
        "autofs_mounts: autofs_default_options nfs: 'hard program:/tmp/x' must be one word"
    )


def test_topology_from_a_collected_fabric_leaves_out_a_name_slurm_would_expand():
    """The slurm role's topology from ibnetdiscover output gathered on the nodes: an HCA
    described as `gpu003,evil[1-9]` never reaches topology.conf."""
    topology = filters("kiln_slurm")["kiln_topology"]
    text = (REPO / "tests/fixtures/topology/two-rails.ibnetdiscover").read_text()
    settings = {
        "source": "ibnetdiscover",
        "format": "auto",
        "files": [],
        "hca": [],
        "node_name_map": "",
        "block_size": 0,
        "missing": "catch-all",
        "disconnected": "root",
        "base_dir": ".",
    }
    found = topology(
        settings,
        "24.11.5",
        {},
        ["gpu001", "gpu002", "gpu003"],
        [["gpu001", text.replace('"gpu003 ', '"gpu003,evil[1-9] ')]],
    )
    assert found["content"].splitlines()[1:] == [
        "SwitchName=ib-leaf-a1 Nodes=gpu[001-002]",
        "SwitchName=kiln-unplaced Nodes=gpu003",
        "SwitchName=ib-spine-1 Switches=ib-leaf-a1,kiln-unplaced",
    ]
    assert found["summary"][-2:] == [
        "warning: skipped 3 HCAs whose host name is not a Slurm node name "
        "('gpu003,evil[1-9]'): names may hold only letters, digits, '.', '_' and '-'",
        "warning: 1 nodes placed under kiln-unplaced: gpu003",
    ]


def test_gpu_reboot_plan_leaves_the_nodes_whose_slurmd_runs_to_kiln_rollout():
    plan = filters("kiln_nvidia_driver")["kiln_gpu_reboot_plan"]
    waiting = {"_nvidia_driver_now": {"reboot_needed": True}}
    hostvars = {
        "gpu001": {"_nvidia_driver_now": {"reboot_needed": False}},
        "gpu002": {**waiting, "_nvidia_driver_slurmd": {"stdout": "active"}},
        "gpu003": {**waiting, "_nvidia_driver_slurmd": {"stdout": "inactive"}},
        "gpu004": {**waiting, "_nvidia_driver_slurmd": {"skipped": True}},
    }
    hosts = sorted(hostvars)
    assert plan(hosts, hostvars, "10%", True) == {
        "rollout": ["gpu002"],
        "batches": [["gpu003"], ["gpu004"]],
        "reported": {"gpu002": "slurmd runs here: kiln rollout reboots it through Slurm"},
    }
    with pytest.raises(AnsibleFilterError) as raised:
        plan(hosts, hostvars, "half", True)
    assert str(raised.value).startswith(
        "nvidia_driver_reboot_batch: expected a count (4) or a share (10%), got 'half'"
    )


def test_gpu_reboot_refusal_judges_the_play_hosts_targets():
    """Each node's pre-flight target (_nvidia_driver_reboot_target), Slurm's states as
    `scontrol --oneliner show node` prints them, the inventory kiln was given."""
    refusal = filters("kiln_nvidia_driver")["kiln_gpu_reboot_refusal"]
    scontrol = "NodeName=gpu001 State=IDLE+DRAIN Reason=operator\nNodeName=gpu002 State=IDLE\n"
    hostvars = {
        "gpu001": {},
        "gpu002": {"_nvidia_driver_reboot_target": "580.95.05"},
        "gpu003": {"_nvidia_driver_reboot_target": "580.95.05"},
        "ctl": {},
    }
    compute = ["gpu001", "gpu002", "gpu003"]
    hosts = sorted(hostvars)
    assert refusal(hosts, hostvars, "2", compute, scontrol, ["/srv/inv/prod"]) == (
        "2 nodes in Slurm would need a reboot for driver 580.95.05; rollout_max_unavailable "
        "(2) allows 1 more, 1 compute nodes being out of service already: apply it with "
        "`kiln rollout -i /srv/inv/prod`"
    )
    assert refusal(hosts, hostvars, "100%", compute, scontrol, ["/srv/inv/prod"]) == ""
    # Refused on every node, as the run_once filter's result.
    assert refusal(hosts, hostvars, "0", compute, "", []) == (
        "rollout_max_unavailable '0': expected a node count (4) or a share of the nodes (10%)"
    )
