"""Kiln's node check (the health role's kiln-health) from the control node: its
settings as `kiln inventory check` judges them, and each node's results as `kiln
health` reads them (kiln.health_check runs it).

The check's rules live in the node program, which Slurm also runs on its own; this
module only reads what each node reported."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kiln import files, gpu_models
from kiln.validation.verdicts import Judgement, Verdict, worst

if TYPE_CHECKING:  # kiln inventory check imports this module: keep it light
    from kiln.run.events import RunSummary

# kiln-health's statuses as verdicts: the one mapping `kiln health`, the rollout's
# batch check, burn-in's rounds and the scheduled active check's reports judge them by.
VERDICTS = {"OK": Verdict.PASS, "WARN": Verdict.WARN, "FAIL": Verdict.FAIL}
STATUSES = tuple(VERDICTS)
TEST = "health"  # a check's judgement is health.<check>
RUN = "health.run"  # a node that could not report: why, not checked
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


@dataclass
class CheckResult:
    check: str
    status: str
    reason: str


@dataclass
class NodeHealth:
    node: str
    results: list[CheckResult] = field(default_factory=list)
    action: str = ""  # what the check did in Slurm: drained or resumed the node
    error: str = ""  # why the node could not be checked

    @property
    def status(self) -> str:
        if self.error:
            return "ERROR"
        found = {r.status for r in self.results}
        return next((s for s in reversed(STATUSES) if s in found), "OK")

    @property
    def verdict(self) -> Verdict:
        """Its judgements' worst (`judgements`): not checked when it could not report,
        unless a check it did report failed."""
        return worst(j.verdict for j in judgements([self]))

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "results": [vars(r) for r in self.results],
            "action": self.action,
            "error": self.error,
        }


@dataclass
class Health:
    nodes: list[NodeHealth]
    summary: "RunSummary"

    @property
    def checks(self) -> list[str]:
        """Every check any node ran, in the order the nodes report them."""
        seen: dict[str, None] = {}
        for node in self.nodes:
            seen.update((r.check, None) for r in node.results)
        return list(seen)

    @property
    def verdict(self) -> Verdict:
        """The run's verdict for its exit code: a failing node, else one not checked."""
        return worst(n.verdict for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": {n.node: n.to_json() for n in self.nodes}, "run": self.summary.run}


def read_node(node: str, text: str) -> NodeHealth:
    """A node's results from kiln-health --json; an error when they cannot be read."""
    try:
        data = files.loads(text)
        return from_results(node, data["results"], data.get("action", ""))
    except (ValueError, KeyError, TypeError) as exc:
        return NodeHealth(node, error=f"kiln-health printed no readable result ({exc})")


def from_results(node: str, results: list[dict], action: str = "", error: str = "") -> NodeHealth:
    """A node's results as kiln-health writes them ({check, status, reason}); a status
    it never writes makes the whole report unreadable (KeyError, TypeError: a result
    that is not one)."""
    checked = [CheckResult(r["check"], r["status"], r["reason"]) for r in results]
    unknown = sorted({r.status for r in checked} - set(STATUSES))
    if unknown:
        said = f"kiln-health reported an unknown status {unknown[0]!r}"
        return NodeHealth(node, action=action, error="; ".join(e for e in (error, said) if e))
    return NodeHealth(node, checked, action, error)


def judgements(checked: Iterable[NodeHealth]) -> list[Judgement]:
    """kiln-health's results as judgements, for every campaign that reads them (the
    rollout's batch check, burn-in's rounds, the scheduled active check's reports): a
    judgement `health.<check>` per result, by VERDICTS.

    The one rule for a node that could not report (`NodeHealth.error`: unreachable,
    its output unreadable, its run cut short, even beside some results): a judgement
    `health.run`, not checked, with why. Never a pass (a node not measured is never
    PASS), and not a failure either (nothing was found wrong on it): its campaign
    resumes only passing nodes, so it stays out of service where it was drained, and
    is drained for no fault it was not shown to have."""
    out = []
    for node in checked:
        out += [
            Judgement(node.node, f"{TEST}.{r.check}", "", None, "", VERDICTS[r.status], r.reason)
            for r in node.results
        ]
        if node.error:
            out.append(Judgement(node.node, RUN, "", None, "", Verdict.UNCHECKED, node.error))
    return out
