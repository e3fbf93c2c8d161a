"""kiln-health's GPU checks: nvidia-smi's report, NVLinks, the fabric manager, an NVL72
node's fabric and IMEX domain, and the kernel's XIDs (passive), and DCGM's diagnostic
(--active, idle nodes only)."""

import json
import re
from pathlib import Path

from kiln_node import counted, nvidia_smi
from kiln_node.health_checks import CommandFailed, Deadline, Result, run

# nvidia-smi's documented exit codes that say what is wrong with the node.
SMI_EXIT = {
    9: "NVIDIA driver is not loaded",
    12: "NVML shared library not found",
    14: "GPU InfoROM is corrupted",
    15: "a GPU has fallen off the bus",
}

# Clock event reasons that mean the hardware is slowing the GPU down. SW power cap is
# normal under load and GPU idle is normal at rest: neither is judged.
HW_SLOWDOWNS = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}


# --- nvidia-smi, NVLinks, fabric, XIDs ---------------------------------------------


def parse_smi_xml(text: str) -> list[nvidia_smi.SmiGpu]:
    return nvidia_smi.parse_xml(text).gpus


def slowdowns(gpu: nvidia_smi.SmiGpu) -> list[str]:
    return [label for event, label in HW_SLOWDOWNS.items() if event in gpu.clock_events]


def parse_nvlink_status(text: str) -> dict[str, list[str]]:
    """`nvidia-smi nvlink -s`: per GPU (`GPU 0`), each link's speed or `<inactive>`."""
    return {
        f"GPU {gpu}": [state for _, state in links]
        for gpu, links in nvidia_smi.nvlink_links(text).items()
    }


def judge_xids(xids: list[tuple[str, int]], since: str = "since boot") -> Result:
    """By the catalogue's next step (nvidia_smi.XIDS): RESET or REBOOT fail (the node
    drains), RESET_WHEN_IDLE and WATCH warn, the application's own pass. `since` says
    which part of the kernel log was read (kiln-prolog reads since the last job)."""

    def named(found: dict[int, list[str]]) -> str:
        return ", ".join(f"{nvidia_smi.xid_name(x)} on {' '.join(found[x])}" for x in sorted(found))

    seen: dict[str, dict[int, list[str]]] = {step: {} for step in nvidia_smi.XID_STEPS}
    for address, xid in xids:
        places = seen[nvidia_smi.xid_step(xid)].setdefault(xid, [])
        if address not in places:
            places.append(address)
    failing = seen[nvidia_smi.REBOOT] | seen[nvidia_smi.RESET]
    if failing:
        return Result("gpu_xid", "FAIL", named(failing))
    if seen[nvidia_smi.RESET_WHEN_IDLE]:
        return Result(
            "gpu_xid", "WARN", named(seen[nvidia_smi.RESET_WHEN_IDLE]) + " (GPU reset needed)"
        )
    watched = {x: at for x, at in seen[nvidia_smi.WATCH].items() if x in nvidia_smi.XIDS}
    unknown = sorted(x for x in seen[nvidia_smi.WATCH] if x not in nvidia_smi.XIDS)
    parts = [named(watched) + " (watch: a part may be failing)"] if watched else []
    if unknown:
        listed = ", ".join(f"XID {x}" for x in unknown)
        parts.append(f"{listed} {since}, not in Kiln's table")
    if parts:
        return Result("gpu_xid", "WARN", "; ".join(parts))
    if seen[nvidia_smi.NONE]:
        mine = ", ".join(f"XID {x}" for x in sorted(seen[nvidia_smi.NONE]))
        return Result("gpu_xid", "OK", f"only application faults {since} ({mine})")
    return Result("gpu_xid", "OK", f"no XID {since}")


def judge_gpus(
    gpus: list[nvidia_smi.SmiGpu], expected: int, loaded: str, installed: str
) -> list[Result]:
    def worst(check: str, bad: list[str], status: str, good: str) -> Result:
        return Result(check, status, "; ".join(bad)) if bad else Result(check, "OK", good)

    count = len(gpus)
    results = [
        Result("gpu_count", "OK", counted(count, "GPU"))
        if count == expected
        else Result("gpu_count", "FAIL", f"{counted(count, 'GPU')} visible, {expected} expected")
    ]
    versions = {g.driver for g in gpus} | {v for v in (loaded, installed) if v}
    driver = gpus[0].driver if gpus else loaded
    if installed and loaded and installed != loaded:
        results.append(
            Result("gpu_driver", "FAIL", f"driver {loaded} loaded, {installed} installed: reboot")
        )
    elif len(versions) > 1:
        results.append(
            Result("gpu_driver", "FAIL", f"driver versions differ: {', '.join(sorted(versions))}")
        )
    else:
        results.append(Result("gpu_driver", "OK", f"driver {driver}"))
    results.append(
        worst(
            "gpu_persistence",
            [
                f"{g.bus_id} persistence {g.persistence or 'unknown'}"
                for g in gpus
                if g.persistence != "Enabled"
            ],
            "FAIL",
            "persistence mode on",
        )
    )
    results.append(
        worst(
            "gpu_ecc",
            [
                f"{g.bus_id} {counted(g.uncorrectable_volatile, 'uncorrectable ECC error')}"
                for g in gpus
                if g.uncorrectable_volatile
            ],
            "FAIL",
            "no uncorrectable ECC error",
        )
    )
    failed = [f"{g.bus_id} row remapping failed" for g in gpus if g.remap_failure]
    failed += [f"{g.bus_id} unrepairable memory" for g in gpus if g.unrepairable_memory]
    pending = [f"{g.bus_id} row remap pending (GPU reset needed)" for g in gpus if g.remap_pending]
    results.append(
        Result("gpu_remap", "FAIL", "; ".join(failed))
        if failed
        else worst("gpu_remap", pending, "WARN", "no remap pending or failed")
    )
    results.append(
        worst(
            "gpu_clocks",
            [f"{g.bus_id} {', '.join(slowdowns(g))} active" for g in gpus if slowdowns(g)],
            "FAIL",
            "no hardware slowdown",
        )
    )
    # The link generation drops at idle to save power; its width must not.
    results.append(
        worst(
            "gpu_pcie",
            [
                f"{g.bus_id} PCIe x{g.width_current} of x{g.width_max}"
                for g in gpus
                if g.width_current is not None and g.width_max and g.width_current < g.width_max
            ],
            "FAIL",
            "PCIe links at full width",
        )
    )
    return results


def judge_nvlinks(links: dict[str, list[str]], per_gpu: int) -> Result:
    bad = []
    for gpu, speeds in links.items():
        inactive = sum(1 for s in speeds if "inactive" in s.lower())
        if inactive or len(speeds) < per_gpu:
            bad.append(f"{gpu} {len(speeds) - inactive} of {counted(per_gpu, 'NVLink')} active")
    if not links:
        bad.append("no NVLink reported")
    return _judged("gpu_nvlink", bad, f"{counted(per_gpu, 'NVLink')} per GPU active")


def _judged(check: str, bad: list[str], ok: str) -> Result:
    return Result(check, "FAIL", "; ".join(bad)) if bad else Result(check, "OK", ok)


def fabric_not_registered(gpus: list[nvidia_smi.SmiGpu], in_domain: bool) -> list[str]:
    """GPUs whose NVLink fabric is not Completed/Success. Outside an NVLink domain (HGX
    boards) nvidia-smi says N/A, which is fine there; in one (NVL72) N/A means the GPU
    dropped out of its domain."""
    state, status = {"Completed"}, {"Success"}
    if not in_domain:
        state, status = state | {"N/A"}, status | {"N/A"}
    return [
        f"{g.bus_id} fabric {g.fabric_state}/{g.fabric_status}"
        for g in gpus
        if g.fabric_state not in state or g.fabric_status not in status
    ]


def judge_fabric(service: str, gpus: list[nvidia_smi.SmiGpu]) -> Result:
    if service != "active":
        return Result(
            "fabric_manager", "FAIL", f"nvidia-fabricmanager is {service or 'not installed'}"
        )
    bad = fabric_not_registered(gpus, in_domain=False)
    return _judged("fabric_manager", bad, "fabric manager active, fabric registered")


def judge_nvlink_fabric(gpus: list[nvidia_smi.SmiGpu]) -> Result:
    """A node in an NVLink domain (NVL72): every GPU registered with the fabric."""
    bad = fabric_not_registered(gpus, in_domain=True) or ([] if gpus else ["no GPU reported"])
    return _judged(
        "nvlink_fabric", bad, f"{counted(len(gpus), 'GPU')} registered with the NVLink fabric"
    )


# `nvidia-imex-ctl -N`: "Node #0   - 172.31.48.81    - READY   [- Version: 570.172]",
# a connectivity table with one row per node ("       0        C   C") and
# "Domain State: UP" (DEGRADED, DOWN otherwise).
_IMEX_NODE = re.compile(r"Node #(?P<index>\d+)\s+-\s+(?P<address>\S+)\s+-\s+(?P<state>\S+)")
_IMEX_DOMAIN = re.compile(r"Domain State:\s*(?P<state>\S+)")


def judge_imex(text: str) -> Result:
    """IMEX's domain from `nvidia-imex-ctl -N`: UP, every node READY and every pair
    Connected (C), else FAIL naming the nodes that are not."""
    domain = _IMEX_DOMAIN.search(text)
    nodes = {int(m["index"]): (m["address"], m["state"]) for m in _IMEX_NODE.finditer(text)}
    if not domain or not nodes:
        return Result("imex_domain", "FAIL", "nvidia-imex-ctl -N printed no domain status")
    table = text.split("From\\To", 1)[1] if "From\\To" in text else ""
    down = {i: f"{a} {state}" for i, (a, state) in nodes.items() if state != "READY"}
    not_ready = dict(down)
    for line in table.splitlines()[1:]:  # after the header of node numbers
        source, *cells = line.split() or [""]
        if not source.isdigit() or int(source) not in nodes:
            continue
        for target, cell in enumerate(cells):
            pair = (int(source), target)
            # A pair with a node down is that node's fault; else both ends are named.
            if cell == "C" or any(i in down for i in pair):
                continue
            for index in pair:
                if index in nodes:
                    not_ready.setdefault(index, f"{nodes[index][0]} not connected ({cell})")
    if domain["state"] == "UP" and not not_ready:
        return Result(
            "imex_domain", "OK", f"IMEX domain UP, {counted(len(nodes), 'node')} connected"
        )
    listed = "; ".join(not_ready[i] for i in sorted(not_ready))
    return Result(
        "imex_domain", "FAIL", f"IMEX domain {domain['state']}" + (f": {listed}" if listed else "")
    )


def loaded_driver() -> str:
    try:
        return Path("/sys/module/nvidia/version").read_text().strip()
    except OSError:
        return ""


def installed_driver(deadline: Deadline) -> str:
    # Debian renames the module nvidia-current (nvidia-current-open for the open one).
    for name in ("nvidia", "nvidia-current", "nvidia-current-open"):
        try:
            return run(["modinfo", "-F", "version", name], deadline).strip()
        except CommandFailed:
            continue
    return ""


def check_gpus(config: dict, deadline: Deadline) -> list[Result]:
    smi = config.get("nvidia_smi", "nvidia-smi")
    try:
        gpus = parse_smi_xml(run([smi, "-q", "-x"], deadline))
    except CommandFailed as exc:
        known = SMI_EXIT.get(exc.returncode or 0)
        return [Result("gpu_smi", "FAIL", f"nvidia-smi: {known}" if known else str(exc))]
    except ValueError as exc:
        return [Result("gpu_smi", "FAIL", f"nvidia-smi -q -x unreadable: {exc}")]
    results = [Result("gpu_smi", "OK", "nvidia-smi answers")]
    results += judge_gpus(gpus, config["gpus"], loaded_driver(), installed_driver(deadline))
    if config.get("nvlinks_per_gpu"):
        try:
            links = parse_nvlink_status(run([smi, "nvlink", "-s"], deadline))
            results.append(judge_nvlinks(links, config["nvlinks_per_gpu"]))
        except CommandFailed as exc:
            results.append(Result("gpu_nvlink", "FAIL", str(exc)))
    if config.get("nvswitches"):
        try:
            state = run(["systemctl", "is-active", "nvidia-fabricmanager"], deadline).strip()
        except CommandFailed as exc:
            state = "inactive" if exc.returncode else str(exc)
        results.append(judge_fabric(state, gpus))
    if config.get("nvlink_domain"):
        results.append(judge_nvlink_fabric(gpus))
    if config.get("imex"):
        try:
            results.append(
                judge_imex(run([config.get("imex_ctl", "nvidia-imex-ctl"), "-N"], deadline))
            )
        except CommandFailed as exc:
            results.append(Result("imex_domain", "FAIL", f"nvidia-imex-ctl -N: {exc}"))
    try:
        results.append(judge_xids(nvidia_smi.parse_xids(run(["dmesg"], deadline))))
    except CommandFailed as exc:
        results.append(Result("gpu_xid", "WARN", f"kernel log unreadable: {exc}"))
    return results


# --- DCGM's diagnostic (--active) --------------------------------------------------

# What each run level takes at most (DCGM documents about 1-2 min, 2-3 min, 30 min and
# 1-2 h on an 8-GPU node); past it the diagnostic counts as hung.
DCGM_LEVEL_SECONDS = {1: 300, 2: 900, 3: 3600, 4: 3 * 3600}
DCGM_BAD = {"Fail": "FAIL", "Warn": "WARN"}


def _dcgm_warning(result: dict) -> str:
    """The first warning of a result: a list of {warning, error_id, ...} (DCGM 3.3+), a
    list of strings or one string (older)."""
    warnings = result.get("warnings") or result.get("warning") or []
    if isinstance(warnings, str):
        return warnings.strip()
    for warning in warnings:
        text = warning.get("warning", "") if isinstance(warning, dict) else str(warning)
        if text.strip():
            return text.strip()
    return ""


def _dcgm_entity(result: dict) -> str:
    """GPU 3 (or the entity group DCGM 4 names: CPU, NvSwitch...)."""
    if "entity_id" in result:
        return f"{result.get('entity_group', 'GPU')} {result['entity_id']}"
    gpu = result.get("gpu_id", result.get("gpu_ids"))
    return f"GPU {gpu}" if gpu not in (None, "") else ""


def judge_dcgm_diag(text: str, level: int) -> Result:
    """`dcgmi diag -r LEVEL -j`: every test's result per GPU (DCGM 4: "DCGM Diagnostic",
    entity_id; DCGM 3: "DCGM GPU Diagnostic", gpu_id). Fail drains, Warn is recorded;
    Skip and Not Run are neither (a test the GPU does not support)."""
    try:
        data = json.loads(text[text.index("{") :])
        body = data.get("DCGM Diagnostic") or data.get("DCGM GPU Diagnostic")
        if not isinstance(body, dict):
            raise ValueError("no 'DCGM Diagnostic' object")
    except ValueError as exc:
        return Result("dcgm_diag", "FAIL", f"dcgmi diag -r {level} printed no result ({exc})")
    if body.get("runtime_error"):
        return Result("dcgm_diag", "FAIL", f"dcgmi diag -r {level}: {body['runtime_error']}")
    found = {"FAIL": [], "WARN": []}
    tests = 0
    for category in body.get("test_categories") or []:
        for test in category.get("tests") or []:
            tests += 1
            results = test.get("results") or [test.get("test_summary") or {}]
            for result in results:
                status = DCGM_BAD.get(str(result.get("status", "")).strip().title())
                if status:
                    where = " ".join(p for p in (test.get("name", "?"), _dcgm_entity(result)) if p)
                    warning = _dcgm_warning(result)
                    found[status].append(f"{where}: {warning}" if warning else where)
    for status in ("FAIL", "WARN"):
        if found[status]:
            more = f" (+{len(found[status]) - 1} more)" if len(found[status]) > 1 else ""
            return Result("dcgm_diag", status, f"level {level} {found[status][0]}{more}")
    if not tests:
        return Result("dcgm_diag", "FAIL", f"dcgmi diag -r {level} ran no test")
    return Result("dcgm_diag", "OK", f"level {level}: {counted(tests, 'test')} passed")


def check_dcgm(config: dict, _deadline: Deadline) -> list[Result]:
    level = int(config["dcgm_diag_level"])
    dcgmi = config.get("dcgmi", "dcgmi")
    # Its own limit: the level's length, not the passive checks' seconds.
    deadline = Deadline(DCGM_LEVEL_SECONDS[level], DCGM_LEVEL_SECONDS[level])
    try:
        out = run([dcgmi, "diag", "-r", str(level), "-j"], deadline)
    except CommandFailed as exc:
        # A failing test exits non-zero and still prints its JSON.
        if "{" not in exc.stdout:
            return [Result("dcgm_diag", "FAIL", f"dcgmi diag -r {level}: {exc}")]
        out = exc.stdout
    return [judge_dcgm_diag(out, level)]
