"""The health role's logic (roles/health, its node check kiln-health): its settings
as `kiln inventory check` judges them (the registry, kiln.roles, takes
`settings_problems` from here) and what kiln-health checks on each node (the role's
filter, kiln_health_plan). What the nodes report back is kiln.health's to read."""

from typing import Any

from kiln import gpu_models

# slurmd kills its HealthCheckProgram after 60 s: Kiln's check must end before.
SLURM_KILLS_AFTER = 60


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one node's health_* settings (given
    without the prefix), before any node is touched."""
    problems = []
    timeout = settings.get("timeout", 45)
    check_timeout = settings.get("check_timeout", 10)
    if isinstance(timeout, int) and not 0 < timeout < SLURM_KILLS_AFTER:
        problems.append(
            f"health_timeout {timeout}: must be under {SLURM_KILLS_AFTER} s, "
            "when slurmd kills its HealthCheckProgram"
        )
    if (
        isinstance(check_timeout, int)
        and isinstance(timeout, int)
        and not 0 < check_timeout <= timeout
    ):
        problems.append(
            f"health_check_timeout {check_timeout}: "
            f"must be between 1 and health_timeout ({timeout})"
        )
    prolog_timeout = settings.get("prolog_timeout", 10)
    if isinstance(prolog_timeout, int) and not 0 < prolog_timeout <= SLURM_KILLS_AFTER:
        problems.append(
            f"health_prolog_timeout {prolog_timeout}: must be between 1 and "
            f"{SLURM_KILLS_AFTER} s (every job start waits for it)"
        )
    for port in settings.get("ib_ports") or []:
        if not (
            isinstance(port, dict)
            and isinstance(port.get("device"), str)
            and isinstance(port.get("rate"), int)
            and port["rate"] > 0
            and isinstance(port.get("port", 1), int)
        ):
            problems.append(
                f"health_ib_ports: {port!r} is not {{device: mlx5_0, port: 1, rate: 400}} (Gb/s)"
            )
    for entry in settings.get("free_space") or []:
        if not (
            isinstance(entry, dict)
            and str(entry.get("path", "")).startswith("/")
            and isinstance(entry.get("min_mb"), int)
            and entry["min_mb"] >= 0
        ):
            problems.append(
                f"health_free_space: {entry!r} is not {{path: /absolute/path, min_mb: 1024}}"
            )
    return problems


def node_config(gpu_fact: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """What kiln-health checks on one node (/etc/kiln/health.json), from the node's
    kiln_gpu fact (the nvidia_driver role's) and the health_* settings (without the
    prefix; mount_check: the autofs role's check program, or ""). An operator's
    gpus or nvlinks_per_gpu wins; empty, they follow from what the node has."""
    nvswitches = _int(gpu_fact.get("nvswitch_count"))
    gpus, nvlinks = settings.get("gpus", ""), settings.get("nvlinks_per_gpu", "")
    return {
        "timeout": _int(settings.get("timeout")),
        "check_timeout": _int(settings.get("check_timeout")),
        "prolog_timeout": _int(settings.get("prolog_timeout")),
        "gpus": _int(gpus if str(gpus) else gpu_fact.get("gpu_count")),
        "nvswitches": nvswitches,
        "nvlinks_per_gpu": _int(nvlinks)
        if str(nvlinks)
        else gpu_models.nvlinks_expected(str(gpu_fact.get("gpu_model") or ""), nvswitches),
        "ib_ports": settings.get("ib_ports") or [],
        "free_space": settings.get("free_space") or [],
        "munge": True,
        "slurm": True,
        "mount_check": str(settings.get("mount_check") or ""),
        "metrics_dir": str(settings.get("metrics_dir") or ""),
        "dcgm_diag_level": _int(settings.get("dcgm_diag_level")),
        # NVL72: the fabric must be up on a node in an NVLink domain, and IMEX's domain
        # connected where the nvidia_driver role set IMEX up.
        "nvlink_domain": bool(gpu_fact.get("nvlink_domain")),
        "imex": bool(gpu_fact.get("imex")),
    } | _breaker(settings.get("max_unavailable"))


def _breaker(cap: Any) -> dict[str, Any]:
    """The repair breaker's cap where the repair loop is on (repair_max_unavailable):
    a number of nodes, or "N%" of the node's partition; none: kiln-health drains freely."""
    if cap in (None, ""):
        return {}
    return {"max_unavailable": int(cap) if str(cap).isdigit() else str(cap)}


def _int(value: Any) -> int:
    """As Jinja's int filter reads a setting: a number, or 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0
