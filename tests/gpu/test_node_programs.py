"""The programs that only read the node: GPU detection and the driver plan, kiln-health's
GPU checks, kiln-fingerprint and kiln-nccl-probe, against nvidia-smi's own answers."""

import json
import os
import subprocess

from kiln.roles import health
from kiln.roles.nvidia_driver import hardware, node_plan, versions
from kiln_node import counted, nvidia_smi
from tests.gpu import machine as gm
from tests.gpu.conftest import run_program

# Reasons nvidia-smi's query names, as the XML names them (clocks_event_reason_<name>).
CLOCK_EVENTS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
)


# The ones kiln-health fails a GPU for (kiln_node.gpu_checks.HW_SLOWDOWNS).
HARDWARE_EVENTS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def smi_list_count() -> int:
    return sum(1 for line in gm.smi("-L").splitlines() if line.startswith("GPU "))


def test_detection_matches_nvidia_smi(gpu_machine, detected, record):
    """sysfs's GPUs are nvidia-smi's (address and PCI id); the module loaded is the
    driver nvidia-smi reports."""
    record.write("kiln-gpu-detect.json", json.dumps(detected, indent=2) + "\n", "kiln-gpu-detect")
    found = hardware.detect(detected["pci"])
    from_smi = gm.query(("pci.bus_id", "pci.device_id"))
    assert sorted((d.address, f"{d.device}{d.vendor[2:]}".lower()) for d in found.gpus) == sorted(
        (gm.pci_address(g["pci.bus_id"]), g["pci.device_id"].lower()) for g in from_smi
    )
    module = versions.loaded_module(detected["proc_version"])
    assert module is not None and module.version == gpu_machine.driver
    plan = node_plan.node_plan(detected, {"source": "preinstalled"})
    assert (plan.gpus, plan.work, plan.fail, plan.loaded) == (
        len(gpu_machine.gpus),
        True,
        "",
        gpu_machine.driver,
    )
    # Installed (modinfo) is the loaded module, or none on disk where the driver comes
    # from outside the machine's own files (a container given the host's driver).
    assert plan.installed in (gpu_machine.driver, "")
    assert plan.reboot_needed is False


def test_driver_plan_preinstalled(gpu_machine, detected, summary):
    """nvidia_driver_source preinstalled accepts this machine's driver, at its version."""
    plan = node_plan.node_plan(detected, {"source": "preinstalled"}).to_json()
    assert node_plan.preinstalled_driver(plan) == gpu_machine.driver
    assert node_plan.preinstalled_problems(plan, gpu_machine.driver, smi_list_count()) == []
    if not plan["installed"]:
        summary.append(
            "- modinfo finds no NVIDIA module on disk here: the preinstalled source keeps "
            "the loaded driver."
        )


def test_xml_fields_match_the_query(gpu_machine, record):
    """Each field kiln-health reads from the live XML is what nvidia-smi's own query
    says."""
    xml = record.write("nvidia-smi-q.xml", gm.smi("-q", "-x"), "nvidia-smi -q -x")
    record.write("nvidia-smi-q.txt", gm.smi("-q"), "nvidia-smi -q")
    log = nvidia_smi.parse_xml(xml)
    raw = nvidia_smi.parse_xml(gm.smi("-q", "-x"))  # unsanitised: UUIDs compared
    fields = (
        "pci.bus_id",
        "name",
        "uuid",
        "vbios_version",
        "driver_version",
        "persistence_mode",
        "ecc.errors.uncorrected.volatile.total",
        "pcie.link.width.current",
        "pcie.link.width.max",
        "fabric.state",
        "fabric.status",
        "fabric.cliqueId",
        "fabric.clusterUuid",
        *(f"clocks_event_reasons.{e}" for e in CLOCK_EVENTS),
    )
    rows = gm.query(fields)
    assert len(log.gpus) == len(rows) == len(gpu_machine.gpus)
    assert log.driver_version == gpu_machine.driver

    def number(text: str) -> int | None:
        return int(text) if text.isdigit() else None

    hardware_events = set(HARDWARE_EVENTS)
    for parsed, row in zip(raw.gpus, rows, strict=True):
        assert {
            "bus_id": parsed.bus_id.lower(),
            "name": parsed.name,
            "uuid": parsed.uuid,
            "vbios": parsed.vbios,
            "persistence": parsed.persistence,
            "uncorrectable": parsed.uncorrectable_volatile,
            "width": (parsed.width_current, parsed.width_max),
            "fabric": (
                parsed.fabric_state,
                parsed.fabric_status,
                parsed.clique_id,
                parsed.cluster_uuid,
            ),
            # Idle and the power cap come and go between two calls; hardware ones not.
            "hardware_events": sorted(hardware_events & set(parsed.clock_events)),
        } == {
            "bus_id": row["pci.bus_id"].lower(),
            "name": row["name"],
            "uuid": row["uuid"],
            "vbios": row["vbios_version"],
            "persistence": row["persistence_mode"],
            "uncorrectable": number(row["ecc.errors.uncorrected.volatile.total"]) or 0,
            "width": (
                number(row["pcie.link.width.current"]),
                number(row["pcie.link.width.max"]),
            ),
            "fabric": (
                row["fabric.state"],
                row["fabric.status"],
                row["fabric.cliqueId"],
                row["fabric.clusterUuid"],
            ),
            "hardware_events": sorted(
                e for e in hardware_events if row[f"clocks_event_reasons.{e}"] == "Active"
            ),
        }


def expected_health(gpu_machine: gm.Machine) -> dict[str, str]:
    """Each passive GPU check's status as nvidia-smi's own query states the facts: all
    OK on a healthy GPU. Persistence is the machine owner's setting (Kiln's driver role
    turns it on; a loaned test machine may have it off, and this suite changes nothing)."""
    remapped = gm.smi(
        "--query-remapped-rows=remapped_rows.pending,remapped_rows.failure",
        "--format=csv,noheader",
    )
    slow = gm.query(tuple(f"clocks_event_reasons.{e}" for e in HARDWARE_EVENTS))
    gpus = gpu_machine.gpus

    def ok_if(good: bool) -> str:
        return "OK" if good else "FAIL"

    return {
        "gpu_smi": "OK",
        "gpu_count": "OK",
        "gpu_driver": "OK",
        "gpu_persistence": ok_if(all(g["persistence_mode"] == "Enabled" for g in gpus)),
        "gpu_ecc": ok_if(
            all(
                not g["ecc.errors.uncorrected.volatile.total"].isdigit()
                or g["ecc.errors.uncorrected.volatile.total"] == "0"
                for g in gpus
            )
        ),
        "gpu_remap": ok_if("Yes" not in remapped),
        "gpu_clocks": ok_if(all("Active" not in row.values() for row in slow)),
        "gpu_pcie": ok_if(
            all(g["pcie.link.width.current"] == g["pcie.link.width.max"] for g in gpus)
        ),
        "gpu_xid": "OK",
    }


def test_health_gpu_checks(gpu_machine, detected, record, summary, tmp_path):
    """kiln-health with the configuration the health role writes for this machine (the
    nvidia_driver role's fact -> kiln.roles.health.node_config): each GPU check's verdict is
    what nvidia-smi's own answers make it, OK on a healthy GPU."""
    plan = node_plan.node_plan(detected, {"source": "preinstalled"}).to_json()
    fact = node_plan.local_fact(plan, gm.smi("-q", "-x"), gpu_machine.driver, "preinstalled")
    config = health.node_config(fact, {"timeout": 45, "check_timeout": 20})
    # This machine has no munge, Slurm or Kiln mounts: only the GPUs are under test.
    config.update(munge=False, slurm=False)
    path = tmp_path / "health.json"
    path.write_text(json.dumps(config))
    done = run_program("health", "--config", str(path), "--no-slurm", "--json", timeout=90)
    record.write("kiln-health.json", done.stdout, "kiln-health --no-slurm --json")
    results = json.loads(done.stdout)["results"]
    expected = expected_health(gpu_machine)
    assert config["nvlinks_per_gpu"] == 0 and config["nvswitches"] == 0  # none on this machine
    assert [(r["check"], r["status"]) for r in results] == list(expected.items()), results
    assert done.returncode == (1 if "FAIL" in expected.values() else 0)
    by_check = {r["check"]: r["reason"] for r in results}
    assert by_check["gpu_count"] == counted(len(gpu_machine.gpus), "GPU")
    assert by_check["gpu_driver"] == f"driver {gpu_machine.driver}"
    if expected["gpu_persistence"] == "FAIL":
        summary.append(
            "- kiln-health: persistence mode is off on this machine, so gpu_persistence "
            f"FAILs as it should ({by_check['gpu_persistence']}); every other GPU check OK."
        )


def test_fingerprint(gpu_machine, record):
    """kiln-fingerprint's driver, VBIOS, CUDA and NCCL, each as the machine states it."""
    done = run_program("fingerprint", timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(record.write("kiln-fingerprint.json", done.stdout, "kiln-fingerprint"))
    vbios = ",".join(sorted({g["vbios_version"] for g in gpu_machine.gpus}))
    assert (found.get("driver_loaded"), found.get("vbios")) == (gpu_machine.driver, vbios)
    try:
        with open("/usr/local/cuda/version.json", encoding="utf-8") as handle:
            cuda = json.load(handle)["cuda"]["version"]
    except OSError:
        cuda = None
    assert found.get("cuda") == cuda
    # NCCL as Debian installs it (libnccl2); pip's NCCL is the job's, not the node's.
    dpkg = (
        subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "libnccl2"], capture_output=True, text=True
        )
        if os.path.exists("/var/lib/dpkg/status")
        else None
    )
    nccl = dpkg.stdout if dpkg is not None and dpkg.returncode == 0 else None
    assert found.get("nccl") == nccl


def test_nccl_probe(gpu_machine, record):
    """kiln-nccl-probe: the InfiniBand devices sysfs has, and the interface of the
    default route."""
    done = run_program("nccl_probe", timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(record.write("kiln-nccl-probe.json", done.stdout, "kiln-nccl-probe"))
    ib = (
        sorted(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband")
        else []
    )
    assert sorted(found["infiniband"]) == ib
    assert found["socket_ifname"] == default_route_interface()
    dmi = {n: read_text(f"/sys/class/dmi/id/{n}") for n in found["dmi"]}
    assert found["dmi"] == dmi


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def default_route_interface() -> str:
    with open("/proc/net/route", encoding="utf-8") as handle:
        for line in handle.readlines()[1:]:
            fields = line.split()
            if fields[1] == "00000000":
                return fields[0]
    return ""


def test_discover_names_the_gpus_as_nvidia_smi_does(
    gpu_machine, kiln_dependencies, detected, summary
):
    """`kiln inventory discover` knows the GPUs from their PCI ids alone (before any
    driver): the model and count it reads from sysfs are nvidia-smi's; the RDMA ports it
    reads are sysfs's; the profile it proposes fits what it found, or it says none does."""
    from kiln.inventory import discover
    from kiln.inventory.spec import ClusterSpec, Host

    done = run_program("nccl_probe", timeout=60)
    assert done.returncode == 0, done.stderr
    node = discover.read_node(
        "this", {"facts": {}, "gpu_detect": detected, "nccl_probe": json.loads(done.stdout)}
    )
    names = [g["name"] for g in gm.query(("name",))]
    assert (node.gpu_model, len(node.gpu_ids)) == (names[0], len(names))
    ib = "/sys/class/infiniband"
    devices = sorted(os.listdir(ib)) if os.path.isdir(ib) else []
    assert sorted({p.device for p in node.ports}) == devices
    spec = ClusterSpec(
        path=gm.REPO,
        source=gm.REPO,
        hosts={"this": Host("this", ["slurm_compute"], {})},
        groups={"slurm_compute": ["this"]},
    )
    found = discover.propose(spec, {"this": node}, {})
    profile = [s.value for s in found.settings if s.name == "validate_profile"]
    summary.append(f"- discover: {node.line()}; profile {profile or 'none'}; {found.notes}")
    assert ("health_gpus", len(names)) in [(s.name, s.value) for s in found.settings]
    if not profile:
        assert any("no shipped validation profile fits" in note for note in found.notes)
