"""What the validate role needs to run its suites, decided here so that its YAML only
runs command lines: the role's settings (`Settings`), what each node under test has
(`Found`, from kiln_node.prerequisites), the srun time limits, every suite's argv (the
slurm, storage and collectives suites, the pairwise runs, a burn-in round's stress),
the nodes under test that lack a benchmark, the messages that stop a run or skip part
of a suite, and what the cold-import test imports. Which suite runs which builder is
kiln.validation.registry's.

Filters: kiln_validate_look (the argv that looks at a node), kiln_validate_prepare
(everything known once the nodes are chosen), kiln_validate_tree (the cold-import tree's
mount, from the controller's mount check, and the probe's argv that write and remove
it), kiln_validate_cold_import (what the test imports), kiln_validate_cold_import_argv
(its argv, built at its task: all nodes start importing 10 s after it runs)."""

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kiln import files
from kiln.validation import profiles
from kiln.validation.results import Record
from kiln_node import cuda_toolchain
from kiln_node.slurm_jobs import Srun

NO_TREE_MOUNT = "no shared mount is healthy on the controller to hold the package tree"
NO_MPI_CHECK = "no node under test has it (provision with the mpi role, mpi_openmpi: true)"
ONE_RANK_NOTE = (
    "within-node collectives not run: 1 rank per node crosses no link "
    "(ranks_per_node in the profile)"
)
# The one result tasks/main.yml registers on each node (kiln_node.prerequisites' JSON):
# the only registered variable of the role that Python reads by name.
FOUND = "_validate_found"


@dataclass(frozen=True)
class Settings:
    """The validate role's settings (`_validate_settings` in roles/validate/vars/main.yml,
    each from the role variable of the same name with `validate_` in front, except
    `paths`, `nccl_tests_*` of the nccl_tests role and the profile's sections)."""

    libexec_dir: str
    run: str
    probe_user: str
    scratch_paths: list[str]
    cold_import_python: str
    reservation: str
    suites: list[str]
    suites_named: bool
    burn_in_step: str  # "", hold or round
    torch_python: str
    nccl_tests_dir: str
    nccl_tests_image: str
    nccl_tests_version: str
    cuda_home: str  # nccl_tests_cuda_home: where the toolchain look looks
    nccl_home: str  # nccl_tests_nccl_home
    storage: dict[str, Any]  # the profile's storage section
    collectives: dict[str, Any]  # the profile's collectives section ({}: none)
    burn_in: dict[str, Any]  # the profile's burn_in section ({} outside a burn-in)
    burn_in_seconds: int
    srun_timeout_s: int
    pairs: list[list[str]]
    paths: dict[str, Any] = field(default_factory=dict)  # results.for_role

    @classmethod
    def from_role(cls, data: Mapping[str, Any]) -> "Settings":
        """The role's mapping, every key present and no other (a key added on one side
        only fails here, in the unit tests, not in a half-run suite)."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        lacking = [n for n in names if n not in data]
        if unknown or lacking:
            raise ValueError(
                f"validate settings: unknown {unknown}, missing {lacking} "
                "(roles/validate/vars/main.yml and kiln.validation.suites.Settings differ)"
            )
        return cls(**{n: data[n] for n in names})


@dataclass
class Found(Record):
    """What kiln_node.prerequisites found on one node; None where it did not look (the
    suites asked for do not need it, or the node is not under test)."""

    torch: dict | None = None  # its import's record: rc, stdout (the version), stderr
    nccl_tests: bool | None = None  # all_reduce_perf in nccl_tests_dir
    mpi_check: bool | None = None  # Kiln's MPI check (the mpi role)
    toolchain: dict | None = None  # cuda_toolchain.find(), where nccl-tests is missing

    @classmethod
    def on(cls, hostvars: Mapping, node: str) -> "Found":
        """The node's registered look (FOUND); nothing found where it did not run."""
        registered = (hostvars.get(node) or {}).get(FOUND) or {}
        stdout = str(registered.get("stdout") or "")
        try:
            return cls.from_json(files.loads(stdout) if stdout.startswith("{") else None)
        except ValueError:
            return cls()


def look(settings: Settings, needs: set[str]) -> list[str]:
    """kiln_node.prerequisites' argv on a node under test, looking only for what `needs`
    names (the registry's prerequisites of the suites asked for, and torch for a
    burn-in's stress): torch, nccl_tests (with the CUDA toolkit and NCCL where they are
    missing; none when an image brings them), mpi_check."""
    argv = ["python3", "-m", "kiln_node.prerequisites"]
    if "torch" in needs:
        argv += ["--torch-python", settings.torch_python]
    if "nccl_tests" in needs and not settings.nccl_tests_image:
        argv += ["--nccl-tests-dir", settings.nccl_tests_dir]
        argv += ["--cuda-home", settings.cuda_home, "--nccl-home", settings.nccl_home]
    if "mpi_check" in needs:
        argv += ["--mpi-check", settings.paths["mpi_check"]]
    return argv


def step_minutes(storage: Mapping, burn_in: Mapping) -> int:
    """srun --time of the suites' steps: the longest of four storage timeouts and a
    burn-in round (none in a validation), with five minutes to start and end."""
    return max(int(storage["timeout_s"] * 4 / 60), int(burn_in.get("round_s", 0) / 60)) + 5


def launcher_minutes(collectives: Mapping) -> int:
    """--time of each run kiln-probe-launcher starts (nccl-tests, each pair): the
    benchmark's timeout, with two minutes to start and end."""
    return int(collectives["timeout_s"] / 60) + 2


def lacking(found: Mapping[str, Found], nodes: list[str], nccl_tests_image: str) -> dict:
    """The nodes under test (in their order) where the look ran and found no torch, no
    nccl-tests (none counts when an image brings them) or no MPI check."""
    seen = {n: found.get(n) or Found() for n in nodes}
    return {
        "torch": [n for n in nodes if seen[n].torch is not None and seen[n].torch.get("rc") != 0],
        "nccl_tests": [] if nccl_tests_image else [n for n in nodes if seen[n].nccl_tests is False],
        "mpi_check": [n for n in nodes if seen[n].mpi_check is False],
    }


def missing(settings: Settings, lack: Mapping) -> list[str]:
    """What stops the run before any node is held (prerequisites.json, exit 2): torch on
    any node for a burn-in's hold; for a validation whose collectives suite was named, a
    node with neither torch nor nccl-tests. A burn-in round stops for nothing."""
    step = settings.burn_in_step
    if step == "hold" and lack["torch"]:
        return [
            f"burn-in: torch is not importable with {settings.torch_python} on "
            f"{','.join(sorted(lack['torch']))} (set validate_torch_python to a Python that has it)"
        ]
    neither = sorted(set(lack["torch"]) & set(lack["nccl_tests"]))
    if not step and settings.suites_named and "collectives" in settings.suites and neither:
        return [
            f"collectives suite: neither torch ({settings.torch_python}) "
            f"nor nccl-tests ({settings.nccl_tests_dir}) on {','.join(neither)} "
            "(set validate_torch_python, validate_nccl_tests_dir or validate_nccl_tests_image)"
        ]
    return []


def nccl_tests_missing(found: Found, settings: Settings) -> str:
    """Why a node has no nccl-tests, from the look at what building them takes
    (kiln_node.cuda_toolchain's report): no CUDA toolkit or no NCCL, no release asked
    for, or not built yet."""
    where = f"no nccl-tests ({settings.nccl_tests_dir}/all_reduce_perf)"
    if not isinstance(found.toolchain, dict):
        return where
    lacks = cuda_toolchain.missing(found.toolchain)
    if lacks:
        return f"{where}: {lacks} on the node"
    if not settings.nccl_tests_version:
        return f"{where}: nccl_tests_version is not set (the nccl_tests role builds them)"
    return f"{where}: not built yet (kiln provision --tags nccl_tests)"


def unmeasured(
    found: Mapping[str, Found], nodes: list[str], settings: Settings, lack: Mapping
) -> dict[str, str]:
    """On a profile that measures GPUs (profiles.measures_gpus), each node under test
    whose collectives neither benchmark can measure, with what is missing: each
    benchmark runs on every node at once, so one node without it stops it on all.
    kiln.validation.collect makes these nodes unchecked: never a pass. Empty where a
    benchmark runs, or on a CPU profile (the lab: its skips stay notes)."""
    torch, nccl = lack["torch"], lack["nccl_tests"]
    if not (profiles.measures_gpus(settings.collectives) and torch and nccl):
        return {}
    reasons = {}
    for node in nodes:
        parts = [
            nccl_tests_missing(found.get(node) or Found(), settings)
            if node in nccl
            else f"nccl-tests not run: missing on {','.join(nccl)}",
            f"no torch ({settings.torch_python} cannot import it)"
            if node in torch
            else f"Kiln's benchmark not run: no torch on {','.join(torch)}",
        ]
        reasons[node] = f"collectives not measured: {'; '.join(parts)}"
    return reasons


def collectives_notes(
    settings: Settings, lack: Mapping, unmeasured_nodes: Mapping | None = None
) -> dict[str, Any]:
    """Why part of the collectives suite did not run (collectives_steps.json), and the
    nodes it could not measure at all (`unmeasured`); empty where it ran."""
    ranks = int(settings.collectives["ranks_per_node"])
    torch, nccl = lack["torch"], lack["nccl_tests"]
    return {
        "single_node_skipped": ONE_RANK_NOTE if ranks < 2 else "",
        "torch_skipped": f"torch is not importable with {settings.torch_python} on "
        f"{','.join(torch)}"
        if torch
        else "",
        "nccl_tests_skipped": f"no {settings.nccl_tests_dir}/all_reduce_perf on {','.join(nccl)}"
        if nccl
        else "",
        "unmeasured": dict(unmeasured_nodes or {}),
    }


def bench(settings: Settings) -> list[str]:
    """Kiln's collectives benchmark as the suite and the pairwise runs start it."""
    c = settings.collectives
    return [
        settings.torch_python,
        f"{settings.libexec_dir}/kiln-torch-bench",
        *("--backend", c["backend"], "--min-bytes", str(c["min_bytes"])),
        *("--max-bytes", str(c["max_bytes"]), "--warmup", str(c["warmup"])),
        *("--iters", str(c["iters"]), "--init-timeout", str(c["timeout_s"])),
    ]


def slurm_commands(settings: Settings, shared: Mapping) -> dict[str, Any]:
    """srun-time, and the MPI check on the nodes that have it (mpi.json adds the
    nodes without it; mpi_skipped is the record where no node has it)."""
    nodes, launcher = shared["step"]["nodes"], shared["launcher"]
    reservation, paths = settings.reservation, settings.paths
    unbuilt = shared["lacking"]["mpi_check"]
    mpi_nodes = [n for n in nodes if n not in unbuilt]
    return {
        "srun_time": recorded(
            settings,
            "srun",
            *launcher,
            *("srun-time", "--nodes", ",".join(nodes), "--reservation", reservation),
            *("--timeout", str(settings.srun_timeout_s)),
        ),
        "mpi_nodes": mpi_nodes,
        "mpi": recorded(
            settings,
            "mpi",
            *launcher,
            *("mpi", "--nodes", ",".join(mpi_nodes), "--reservation", reservation),
            *("--program", paths["mpi_check"]),
            add={"unbuilt": list(unbuilt)},
        ),
        "mpi_skipped": [
            *recorder(settings),
            *("note", "--out", paths["on_controller"]["mpi"], "--name", "skipped"),
            *("--", NO_MPI_CHECK),
        ],
    }


def storage_commands(settings: Settings, shared: Mapping) -> dict[str, Any]:
    """The storage benchmarks, on every node at once (the cold-import test's argv is
    built at its own task: cold_import_argv)."""
    config = {
        "run": settings.run,
        "user": settings.probe_user,
        "params": settings.storage,
        "scratch": settings.scratch_paths,
    }
    storage = (
        Srun(**shared["step"])
        .but(job_name="kiln-validate-storage")
        .argv(
            *shared["probe"],
            *("storage", "--config", json.dumps(config)),
            *("--out", f"{settings.paths['node_dir']}/storage.json"),
        )
    )
    out = settings.paths["on_controller"]["storage_steps"]
    return {
        "storage": recorded(settings, "storage_steps", *storage, step="storage"),
        # Why there is no cold-import test, added to the record once known.
        "cold_import_skipped": [
            *recorder(settings),
            *("note", "--out", out, "--name", "cold_import_skipped", "--"),
        ],
    }


def collectives_commands(settings: Settings, shared: Mapping) -> dict[str, Any]:
    """Kiln's benchmark within each node and across all, nccl-tests, and the pairwise
    runs; none without the collectives settings."""
    c = settings.collectives
    if not c:
        return {}
    nodes, launcher = shared["step"]["nodes"], shared["launcher"]
    reservation, out = settings.reservation, settings.paths["node_dir"]
    ranks = int(c["ranks_per_node"])
    srun = Srun(**{**shared["step"], "tasks_per_node": ranks})
    benchmark = bench(settings)
    within = srun.but(job_name="kiln-validate-node-collectives").argv(
        *benchmark, "--per-node", "--out", f"{out}/collectives_node.json"
    )
    across = srun.but(job_name="kiln-validate-collectives").argv(
        *benchmark, "--out", f"{out}/collectives_all.json"
    )
    return {
        "collectives_node": recorded(settings, "collectives_steps", *within, step="single_node"),
        "collectives_all": recorded(settings, "collectives_steps", *across, step="multi_node"),
        "nccl_tests": recorded(
            settings,
            "nccl_tests",
            *launcher,
            *("nccl-tests", "--nodes", ",".join(nodes), "--reservation", reservation),
            *("--bin-dir", settings.nccl_tests_dir, "--ranks-per-node", str(ranks)),
            *("--min-bytes", str(c["min_bytes"]), "--max-bytes", str(c["max_bytes"])),
            *("--time", str(shared["launcher_minutes"])),
            *("--container-image", settings.nccl_tests_image),
        ),
        "pairs": recorded(
            settings,
            "pairs",
            *launcher,
            *("pairs", "--reservation", reservation, "--ranks-per-node", str(ranks)),
            *("--time", str(shared["launcher_minutes"]), "--pairs"),
            *(",".join(pair) for pair in settings.pairs),
            "--",
            *benchmark,
            *("--collectives", "all_reduce"),
        ),
    }


def stress_commands(settings: Settings, shared: Mapping) -> dict[str, Any]:
    """A burn-in round's stress (kiln-burn-stress) on every node at once; none outside a
    round."""
    if settings.burn_in_step != "round":
        return {}
    b = settings.burn_in
    stress = (
        Srun(**shared["step"])
        .but(job_name="kiln-burn-in-stress")
        .argv(
            *(settings.torch_python, f"{settings.libexec_dir}/kiln-burn-stress"),
            *("--seconds", str(settings.burn_in_seconds), "--device", b["device"]),
            *("--dtype", b["dtype"], "--size", str(b["size"])),
            *("--memory-fraction", str(b["memory_fraction"])),
            *("--threads", str(b["threads"]), "--interval", str(b["sample_s"])),
            *("--out", f"{settings.paths['node_dir']}/burn_stress.json"),
        )
    )
    return {"burn_stress": recorded(settings, "burn_in_steps", *stress, step="stress")}


def probe(settings: Settings) -> list[str]:
    """kiln-validate-probe, as the controller and each srun task start it."""
    return ["/usr/bin/python3", f"{settings.libexec_dir}/kiln-validate-probe"]


def recorder(settings: Settings) -> list[str]:
    """kiln_node.records through kiln-validate-probe: what writes the run's records on the
    host where they are made (`record write|note|run|step|munge`)."""
    return [*probe(settings), "record"]


def writer(settings: Settings, record: str) -> list[str]:
    """What writes the record `record` (a key of results.CONTROLLER_RECORDS) on the
    controller from the JSON object on its stdin."""
    return [*recorder(settings), "write", "--out", settings.paths["on_controller"][record]]


def first_records(notes: Mapping) -> dict[str, dict]:
    """What the storage and collectives suites' records hold before their steps run:
    each step skipped until it runs, and the collectives' notes (`collectives_notes`)."""
    skipped = {"skipped": True}
    return {
        "storage_steps": {"storage": skipped, "cold_import": skipped, "cold_import_skipped": ""},
        "collectives_steps": {"single_node": skipped, "multi_node": skipped, **notes},
    }


def recorded(settings: Settings, record: str, *argv: str, step: str = "", add=None) -> list:
    """`argv` run on the controller with its outcome written into the record `record`
    (a key of results.CONTROLLER_RECORDS): under `step`, how an srun step ended; else
    the command's JSON output, with `add`'s keys."""
    out = settings.paths["on_controller"][record]
    if step:
        return [*recorder(settings), "step", "--out", out, "--name", step, "--", *argv]
    extra = ["--json", json.dumps(add)] if add else []
    return [*recorder(settings), "run", "--out", out, *extra, "--", *argv]


def tree_mount(mount_check: str) -> str:
    """The first mount kiln-mount-check found healthy and not automounted (an indirect
    map has no directory of its own to write in); '' for none or no check."""
    if not mount_check.startswith("{"):
        return ""
    mounts = files.loads(mount_check).get("mounts") or []
    healthy = [
        m.get("path", "")
        for m in mounts
        if m.get("status") == "OK" and m.get("indirect") is not True
    ]
    return healthy[0] if healthy else ""


def tree(settings: Settings, mount_check: str) -> dict[str, Any]:
    """The cold-import tree: its mount (tree_mount) and the probe's argv that write
    this run's tree there and remove it afterwards; no argv without a mount."""
    mount = tree_mount(mount_check)
    if not mount:
        return {"mount": "", "write": [], "remove": []}
    run = settings.run
    return {
        "mount": mount,
        "write": [
            *probe(settings),
            *("tree", "--mount", mount, "--run", run, "--user", settings.probe_user),
            *("--modules", str(settings.storage["import_modules"])),
        ],
        "remove": [*probe(settings), "remove", "--mount", mount, "--run", run],
    }


def cold_import(written: str, mount: str, module: str) -> dict[str, Any]:
    """The cold-import test: the operator's own module, else the tree `kiln-validate-probe
    tree` wrote on `mount` (its output `written`); where there is no tree, why."""
    if module:
        return {"run": True, "module": module, "root": "", "needs_mount": "", "skipped": ""}
    doc = files.loads(written) if mount else {"error": NO_TREE_MOUNT}
    root = doc.get("root", "")
    return {
        "run": bool(root),
        "module": "kiln_cold_import.all",
        "root": root,
        "needs_mount": mount,
        "skipped": doc.get("error", ""),
    }


def cold_import_argv(
    settings: Settings,
    shared: Mapping,
    chosen: Mapping,
    clock: Callable[[], float] = time.time,
) -> list[str]:
    """The cold-import test on every node at once, `chosen` by cold_import. srun starts
    its tasks a little apart: all of them wait for start_at, 10 s after `clock` (so this
    is built when the test starts, not when the suites are prepared)."""
    params = settings.storage
    config = {
        "run": settings.run,
        "user": settings.probe_user,
        "module": chosen["module"],
        "python": settings.cold_import_python,
        "root": chosen["root"],
        "needs_mount": chosen["needs_mount"],
        "mount_timeout_s": params["mount_timeout_s"],
        "timeout_s": params["timeout_s"],
        "start_at": int(clock()) + 10,
    }
    step = (
        Srun(**shared["step"])
        .but(job_name="kiln-validate-import")
        .argv(
            *shared["probe"],
            *("cold-import", "--config", json.dumps(config)),
            *("--out", f"{settings.paths['node_dir']}/cold_import.json"),
        )
    )
    return recorded(settings, "storage_steps", *step, step="cold_import")
