"""Slurm accounting that moves with a cluster (`kiln accounting dump | load`).

A dump is one JSON file: the associations as `sacctmgr dump` writes them (cluster,
accounts, users, their limits and fairshare) and the QOS, which `sacctmgr dump` leaves
out although associations name them. Loading it on another cluster creates the QOS
first, then loads the associations under the new cluster's name, so the accounts,
users and limits of the old region exist in the new one before its first job. Job
history stays in the old database (slurmdbd's archive moves it, when wanted)."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.errors import ExitCode, InputError, KilnError
from kiln.files import json_text, loads, read_text, write_private
from kiln_node import counted

if TYPE_CHECKING:  # the slurm role's filter imports this module (qos_to_set): keep it light
    from kiln.inventory.spec import ClusterSpec
    from kiln.run.display import Displays
    from kiln.run.events import RunSummary

PLAYBOOK = "accounting.yml"
FORMAT = 1
# The QOS settings carried over, by sacctmgr's names (the same in `show qos format=` and
# `modify qos set`). Usage and raw limits that only count (GrpTRESMins...) stay behind.
QOS_FIELDS = (
    "Name",
    "Description",
    "Priority",
    "Flags",
    "GraceTime",
    "PreemptMode",
    "Preempt",
    "UsageFactor",
    "GrpTRES",
    "GrpJobs",
    "GrpSubmitJobs",
    "MaxTRESPerJob",
    "MaxTRESPerNode",
    "MaxTRESPerUser",
    "MaxJobsPerUser",
    "MaxSubmitJobsPerUser",
    "MaxWall",
    "MinTRESPerJob",
)


@dataclass
class Dump:
    cluster: str  # the cluster it was dumped from
    associations: str  # `sacctmgr dump` text
    qos: list[dict[str, str]]  # one per QOS, QOS_FIELDS that are set

    def names(self, kind: str) -> list[str]:
        """The accounts ("Account") or users ("User") the associations name, once each."""
        found = {
            line.split("'")[1]
            for line in self.associations.splitlines()
            if line.startswith(f"{kind} - '")
        }
        return sorted(found)

    def describe(self) -> str:
        accounts, users = len(self.names("Account")), len(self.names("User"))
        return (
            f"cluster {self.cluster}: {counted(accounts, 'account')}, {counted(users, 'user')}, "
            f"{len(self.qos)} QOS"
        )

    def write(self, path: Path) -> None:
        """To PATH, mode 0600: it lists the cluster's users and their limits."""
        write_private(path, json_text(self.to_json()) + "\n")

    def to_json(self) -> dict[str, Any]:
        return {
            "kiln_accounting": FORMAT,
            "cluster": self.cluster,
            "associations": self.associations,
            "qos": self.qos,
        }


def parse_qos(table: str) -> list[dict[str, str]]:
    """`sacctmgr -n -P show qos format=<QOS_FIELDS>` as one dict per QOS, with the
    fields that are set. (The header would abbreviate the names: Descr, MaxTRESPU.)"""
    rows = [line.split("|") for line in table.splitlines() if line.strip()]
    return [{k: v for k, v in zip(QOS_FIELDS, row, strict=False) if v} for row in rows]


def _seconds(text: str) -> str:
    """GraceTime as sacctmgr shows it ([days-]HH:MM:SS) in seconds, which `set` takes."""
    days, _, clock = text.rpartition("-")
    hours, minutes, seconds = (int(p) for p in clock.split(":"))
    return str(((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds)


def qos_to_set(current: list[str], wanted: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The QOS of WANTED whose settings differ from CURRENT (this cluster's `sacctmgr -n
    -P show qos format=<QOS_FIELDS>` lines), each with its `modify qos ... set` words.
    Only what the dump sets is compared and set: a setting the new cluster has and the
    old one had not is kept."""
    have = {q["Name"]: q for q in parse_qos("\n".join(current))}
    changes = []
    for qos in wanted:
        now = have.get(qos["Name"], {})
        words = [
            f"{key}={_seconds(value) if key == 'GraceTime' else value}"
            for key, value in qos.items()
            if key != "Name" and now.get(key) != value
        ]
        if words:
            changes.append({"name": qos["Name"], "set": words})
    return changes


def dumped_cluster(associations: str) -> str:
    """The cluster named by a `sacctmgr dump` file's `Cluster - 'name'` line."""
    for line in associations.splitlines():
        if line.startswith("Cluster - '"):
            return line.split("'")[1]
    raise ValueError("no \"Cluster - 'name'\" line: not a sacctmgr dump")


# sacctmgr reads a QOS name as a list (`add qos a,b` adds two), turns quotes into
# backticks, and prints one QOS a line: a QOS Slurm holds has a name, and none of these
# in it. (Any other text is passed as it is, never as a template: kiln.run.extravars.)
_NOT_IN_QOS_NAMES = re.compile(r"[,'\"\x00-\x1f\x7f]")


def _check_qos_name(name: str) -> None:
    if not name.strip():
        raise ValueError("a QOS with an empty name")
    if found := _NOT_IN_QOS_NAMES.search(name):
        raise ValueError(f"QOS name {name!r} holds {found.group()!r}, which no Slurm QOS name has")


def read(path: Path) -> Dump:
    """A dump file written by `kiln accounting dump`; InputError says what is wrong."""
    try:
        data = loads(read_text(path), strict=True)  # json_text wrote it
    except ValueError as exc:  # not JSON, or JSON Python cannot hold
        raise InputError(f"{path}: not a Kiln accounting dump (not JSON: {exc})") from None
    try:
        if not isinstance(data, dict) or data.get("kiln_accounting") != FORMAT:
            raise ValueError(f'no "kiln_accounting": {FORMAT}')
        associations, qos = data["associations"], data["qos"]
        if not isinstance(associations, str):
            raise ValueError("associations is not text")
        if not isinstance(qos, list) or not all(
            isinstance(q, dict) and isinstance(q.get("Name"), str) for q in qos
        ):
            raise ValueError("qos is not a list of named QOS")
        unknown = sorted({k for q in qos for k in q} - set(QOS_FIELDS))
        if unknown:
            raise ValueError(f"unknown QOS setting {unknown[0]}")
        for q in qos:
            _check_qos_name(q["Name"])
        return Dump(dumped_cluster(associations), associations, qos)
    except KeyError as exc:
        raise InputError(f"{path}: not a Kiln accounting dump (no {exc})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not a Kiln accounting dump ({exc})") from None


def controller(spec: "ClusterSpec") -> str:
    """The controller whose slurmdbd holds the accounting; InputError when there is none."""
    controllers = spec.group("slurm_controller")
    if not controllers:
        raise InputError(f"{spec.path}: no host in slurm_controller: accounting lives there")
    first = controllers[0]
    if not spec.hosts[first].vars.get("slurm_accounting_enabled", False):
        raise InputError(
            f"{spec.path}: slurm_accounting_enabled is not true: this cluster keeps no "
            "accounting to dump or load"
        )
    return first


def _failed(summary: "RunSummary", host: str) -> None:
    """KilnError with the run's exit code when the run on HOST did not succeed."""
    if summary.exit_code != ExitCode.OK:
        why = "; ".join(f"{f.task}: {f.message}" for f in summary.failures)
        raise KilnError(f"{host}: {why or summary.error or summary.status}", summary.exit_code)


def dump(spec: "ClusterSpec", display: "Displays") -> Dump:
    """The controller's associations and QOS."""
    from kiln.run.gather import gather

    host = controller(spec)
    gathered = gather(
        PLAYBOOK,
        spec,
        [host],
        display,
        "accounting_dir",
        {"accounting_action": "dump", "accounting_qos_fields": list(QOS_FIELDS)},
    )
    _failed(gathered.summary, host)
    if host not in gathered.texts:
        raise KilnError(f"{host}: {gathered.errors[host]}")
    raw = gathered.json(host)
    return Dump(dumped_cluster(raw["associations"]), raw["associations"], parse_qos(raw["qos"]))


def load(spec: "ClusterSpec", found: Dump, display: "Displays") -> "RunSummary":
    """Create the dump's QOS and load its associations on SPEC's cluster."""
    from kiln.run.execute import RunRequest, run_playbook  # ansible_runner: only when running

    host = controller(spec)
    summary = run_playbook(
        RunRequest(
            playbook=PLAYBOOK,
            inventory=spec,
            limit=host,
            display=display,
            extravars={
                "accounting_action": "load",
                "accounting_associations": found.associations,
                "accounting_qos": found.qos,
                "accounting_qos_fields": list(QOS_FIELDS),
            },
        )
    )
    _failed(summary, host)
    return summary
