"""What the validate role needs to run its suites, decided here so that its YAML only
runs command lines and copies files: the srun time limits, every suite's argv (the
slurm, storage and collectives suites, the pairwise runs, a burn-in round's stress),
the nodes under test that lack a benchmark, the messages that stop a run or skip part
of a suite, and what the cold-import test imports.

Filters: kiln_validate_prepare (everything known once the nodes are chosen),
kiln_validate_tree (the cold-import tree's mount, from the controller's mount check, and
the probe's argv that write and remove it), kiln_validate_cold_import (what the test
imports), kiln_validate_cold_import_argv (its argv, built at its task: all nodes start
importing 10 s after it runs) and kiln_validate_mpi_record."""

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kiln import files
from kiln.node import cuda_toolchain
from kiln.node.slurm_jobs import Srun
from kiln.validation import profiles

NO_TREE_MOUNT = "no shared mount is healthy on the controller to hold the package tree"
NO_MPI_CHECK = "no node under test has it (provision with the mpi role, mpi_openmpi: true)"
ONE_RANK_NOTE = (
    "within-node collectives not run: 1 rank per node crosses no link "
    "(ranks_per_node in the profile)"
)


def step_minutes(storage: Mapping, burn_in: Mapping) -> int:
    """srun --time of the suites' steps: the longest of four storage timeouts and a
    burn-in round (none in a validation), with five minutes to start and end."""
    return max(int(storage["timeout_s"] * 4 / 60), int(burn_in.get("round_s", 0) / 60)) + 5


def launcher_minutes(collectives: Mapping) -> int:
    """--time of each run probe_launcher.py starts (nccl-tests, each pair): the
    benchmark's timeout, with two minutes to start and end."""
    return int(collectives["timeout_s"] / 60) + 2


def _registered(hostvars: Mapping, node: str, name: str) -> Mapping:
    """A task's registered result on `node`; empty where the node or the task is absent."""
    if node not in hostvars:
        return {}
    return hostvars[node].get(name) or {}


def lacking(hostvars: Mapping, nodes: list[str], nccl_tests_image: str) -> dict[str, list[str]]:
    """The nodes under test (in their order) where the look in tasks/main.yml ran and
    found no torch, no nccl-tests (none counts when an image brings them) or no MPI check."""
    torch = [n for n in nodes if _registered(hostvars, n, "_validate_torch").get("rc", 0) != 0]
    found = {
        key: [
            n
            for n in nodes
            if "stat" in (seen := _registered(hostvars, n, name)) and not seen["stat"].get("exists")
        ]
        for key, name in (
            ("nccl_tests", "_validate_nccl_tests"),
            ("mpi_check", "_validate_mpi_check"),
        )
    }
    if nccl_tests_image:
        found["nccl_tests"] = []
    return {"torch": torch, **found}


def missing(settings: Mapping, lack: Mapping) -> list[str]:
    """What stops the run before any node is held (prerequisites.json, exit 2): torch on
    any node for a burn-in's hold; for a validation whose collectives suite was named, a
    node with neither torch nor nccl-tests. A burn-in round stops for nothing."""
    step = settings["burn_in_step"]
    if step == "hold" and lack["torch"]:
        return [
            f"burn-in: torch is not importable with {settings['torch_python']} on "
            f"{','.join(sorted(lack['torch']))} (set validate_torch_python to a Python that has it)"
        ]
    neither = sorted(set(lack["torch"]) & set(lack["nccl_tests"]))
    if not step and settings["suites_named"] and "collectives" in settings["suites"] and neither:
        return [
            f"collectives suite: neither torch ({settings['torch_python']}) "
            f"nor nccl-tests ({settings['nccl_tests_dir']}) on {','.join(neither)} "
            "(set validate_torch_python, validate_nccl_tests_dir or validate_nccl_tests_image)"
        ]
    return []


def nccl_tests_missing(hostvars: Mapping, node: str, settings: Mapping) -> str:
    """Why `node` has no nccl-tests, from the look in tasks/main.yml at what building
    them takes (kiln.node.cuda_toolchain's report): no CUDA toolkit or no NCCL, no
    release asked for, or not built yet."""
    where = f"no nccl-tests ({settings['nccl_tests_dir']}/all_reduce_perf)"
    stdout = str(_registered(hostvars, node, "_validate_toolchain").get("stdout") or "")
    try:
        toolchain = json.loads(stdout) if stdout.startswith("{") else None
    except ValueError:
        toolchain = None
    if not isinstance(toolchain, dict):
        return where
    lacks = cuda_toolchain.missing(toolchain)
    if lacks:
        return f"{where}: {lacks} on the node"
    if not settings.get("nccl_tests_version"):
        return f"{where}: nccl_tests_version is not set (the nccl_tests role builds them)"
    return f"{where}: not built yet (kiln provision --tags nccl_tests)"


def unmeasured(
    hostvars: Mapping, nodes: list[str], settings: Mapping, lack: Mapping
) -> dict[str, str]:
    """On a profile that measures GPUs (profiles.measures_gpus), each node under test
    whose collectives neither benchmark can measure, with what is missing: each
    benchmark runs on every node at once, so one node without it stops it on all.
    kiln.validation.collect makes these nodes unchecked: never a pass. Empty where a
    benchmark runs, or on a CPU profile (the lab: its skips stay notes)."""
    torch, nccl = lack["torch"], lack["nccl_tests"]
    if not (profiles.measures_gpus(settings["collectives"]) and torch and nccl):
        return {}
    found = {}
    for node in nodes:
        parts = [
            nccl_tests_missing(hostvars, node, settings)
            if node in nccl
            else f"nccl-tests not run: missing on {','.join(nccl)}",
            f"no torch ({settings['torch_python']} cannot import it)"
            if node in torch
            else f"Kiln's benchmark not run: no torch on {','.join(torch)}",
        ]
        found[node] = f"collectives not measured: {'; '.join(parts)}"
    return found


def collectives_notes(
    settings: Mapping, lack: Mapping, unmeasured_nodes: Mapping | None = None
) -> dict[str, Any]:
    """Why part of the collectives suite did not run (collectives_steps.json), and the
    nodes it could not measure at all (`unmeasured`); empty where it ran."""
    ranks = int(settings["collectives"]["ranks_per_node"])
    torch, nccl = lack["torch"], lack["nccl_tests"]
    return {
        "single_node_skipped": ONE_RANK_NOTE if ranks < 2 else "",
        "torch_skipped": f"torch is not importable with {settings['torch_python']} on "
        f"{','.join(torch)}"
        if torch
        else "",
        "nccl_tests_skipped": f"no {settings['nccl_tests_dir']}/all_reduce_perf on {','.join(nccl)}"
        if nccl
        else "",
        "unmeasured": dict(unmeasured_nodes or {}),
    }


def bench(settings: Mapping) -> list[str]:
    """Kiln's collectives benchmark as the suite and the pairwise runs start it."""
    c = settings["collectives"]
    return [
        settings["torch_python"],
        f"{settings['libexec_dir']}/torch_bench.py",
        *("--backend", c["backend"], "--min-bytes", str(c["min_bytes"])),
        *("--max-bytes", str(c["max_bytes"]), "--warmup", str(c["warmup"])),
        *("--iters", str(c["iters"]), "--init-timeout", str(c["timeout_s"])),
    ]


def _slurm(settings: Mapping, shared: Mapping) -> dict[str, Any]:
    """srun-time, and the MPI check on the nodes that have it."""
    nodes, launcher = shared["step"]["nodes"], shared["launcher"]
    reservation, paths = settings["reservation"], settings["paths"]
    mpi_nodes = [n for n in nodes if n not in shared["lacking"]["mpi_check"]]
    return {
        "srun_time": [
            *launcher,
            *("srun-time", "--nodes", ",".join(nodes), "--reservation", reservation),
            *("--timeout", str(settings["srun_timeout_s"])),
        ],
        "mpi_nodes": mpi_nodes,
        "mpi": [
            *launcher,
            *("mpi", "--nodes", ",".join(mpi_nodes), "--reservation", reservation),
            *("--program", paths["mpi_check"]),
        ],
    }


def _storage(settings: Mapping, shared: Mapping) -> dict[str, Any]:
    """The storage benchmarks, on every node at once (the cold-import test's argv is
    built at its own task: cold_import_argv)."""
    config = {
        "run": settings["run"],
        "user": settings["probe_user"],
        "params": settings["storage"],
        "scratch": settings["scratch_paths"],
    }
    return {
        "storage": Srun(**shared["step"])
        .but(job_name="kiln-validate-storage")
        .argv(
            *shared["probe"],
            *("storage", "--config", json.dumps(config)),
            *("--out", f"{settings['paths']['node_dir']}/storage.json"),
        )
    }


def _collectives(settings: Mapping, shared: Mapping) -> dict[str, Any]:
    """Kiln's benchmark within each node and across all, nccl-tests, and the pairwise
    runs; none without the collectives settings."""
    c = settings["collectives"]
    if not c:
        return {}
    nodes, launcher = shared["step"]["nodes"], shared["launcher"]
    reservation, out = settings["reservation"], settings["paths"]["node_dir"]
    ranks = int(c["ranks_per_node"])
    srun = Srun(**{**shared["step"], "tasks_per_node": ranks})
    benchmark = bench(settings)
    return {
        "collectives_node": srun.but(job_name="kiln-validate-node-collectives").argv(
            *benchmark, "--per-node", "--out", f"{out}/collectives_node.json"
        ),
        "collectives_all": srun.but(job_name="kiln-validate-collectives").argv(
            *benchmark, "--out", f"{out}/collectives_all.json"
        ),
        "nccl_tests": [
            *launcher,
            *("nccl-tests", "--nodes", ",".join(nodes), "--reservation", reservation),
            *("--bin-dir", settings["nccl_tests_dir"], "--ranks-per-node", str(ranks)),
            *("--min-bytes", str(c["min_bytes"]), "--max-bytes", str(c["max_bytes"])),
            *("--time", str(shared["launcher_minutes"])),
            *("--container-image", settings["nccl_tests_image"]),
        ],
        "pairs": [
            *launcher,
            *("pairs", "--reservation", reservation, "--ranks-per-node", str(ranks)),
            *("--time", str(shared["launcher_minutes"]), "--pairs"),
            *(",".join(pair) for pair in settings["pairs"]),
            "--",
            *benchmark,
            *("--collectives", "all_reduce"),
        ],
    }


def _stress(settings: Mapping, shared: Mapping) -> dict[str, Any]:
    """A burn-in round's stress (burn_stress.py) on every node at once; none outside a
    round."""
    if settings["burn_in_step"] != "round":
        return {}
    b = settings["burn_in"]
    return {
        "burn_stress": Srun(**shared["step"])
        .but(job_name="kiln-burn-in-stress")
        .argv(
            *(settings["torch_python"], f"{settings['libexec_dir']}/burn_stress.py"),
            *("--seconds", str(settings["burn_in_seconds"]), "--device", b["device"]),
            *("--dtype", b["dtype"], "--size", str(b["size"])),
            *("--memory-fraction", str(b["memory_fraction"])),
            *("--threads", str(b["threads"]), "--interval", str(b["sample_s"])),
            *("--out", f"{settings['paths']['node_dir']}/burn_stress.json"),
        )
    }


def commands(settings: Mapping, shared: Mapping) -> dict[str, Any]:
    """Every suite's command lines that are known once the nodes are chosen, each one
    argv, by name: the slurm suite (srun_time, mpi, and mpi_nodes it runs on), the
    storage suite's benchmarks (storage), the collectives suite (collectives_node,
    collectives_all, nccl_tests), the pairwise runs (pairs) and a burn-in round's
    stress (burn_stress)."""
    return {
        **_slurm(settings, shared),
        **_storage(settings, shared),
        **_collectives(settings, shared),
        **_stress(settings, shared),
    }


def probe(settings: Mapping) -> list[str]:
    """node_probe.py, as the controller and each srun task start it."""
    return ["/usr/bin/python3", f"{settings['libexec_dir']}/node_probe.py"]


def prepare(hostvars: Mapping, nodes: list[str], settings: Mapping) -> dict[str, Any]:
    """Everything the suites share once the nodes under test are chosen: the srun step
    (kiln.node.slurm_jobs.Srun's settings, which each suite names its job in), the
    launcher's --time, the probe's and launcher's command lines, what the nodes lack,
    what stops the run, the collectives suite's notes and every suite's argv
    (`commands`)."""
    nodes = list(nodes)
    lack = lacking(hostvars, nodes, settings["nccl_tests_image"])
    notes = (
        collectives_notes(settings, lack, unmeasured(hostvars, nodes, settings, lack))
        if settings["collectives"]
        else {}
    )
    shared = {
        "probe": probe(settings),
        "launcher": ["/usr/bin/python3", f"{settings['libexec_dir']}/probe_launcher.py"],
        # One task per node, all nodes at once; a node that cannot start fails the
        # step within a minute instead of queueing.
        "step": {
            "nodes": nodes,
            "job_name": "kiln-validate",
            "reservation": settings["reservation"],
            "minutes": step_minutes(settings["storage"], settings["burn_in"]),
            "immediate_s": 60,
            "kill_on_bad_exit": False,
            "tasks_per_node": 1,
        },
        "launcher_minutes": launcher_minutes(settings["collectives"])
        if settings["collectives"]
        else None,
        "lacking": lack,
        "missing": missing(settings, lack),
        "collectives_notes": notes,
        # One rank per node crosses no link within the node: those runs are not scheduled.
        "within_node": bool(notes) and not notes["single_node_skipped"],
    }
    return {**shared, "commands": commands(settings, shared)}


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


def tree(settings: Mapping, mount_check: str) -> dict[str, Any]:
    """The cold-import tree: its mount (tree_mount) and the probe's argv that write
    this run's tree there and remove it afterwards; no argv without a mount."""
    mount = tree_mount(mount_check)
    if not mount:
        return {"mount": "", "write": [], "remove": []}
    run = settings["run"]
    return {
        "mount": mount,
        "write": [
            *probe(settings),
            *("tree", "--mount", mount, "--run", run, "--user", settings["probe_user"]),
            *("--modules", str(settings["storage"]["import_modules"])),
        ],
        "remove": [*probe(settings), "remove", "--mount", mount, "--run", run],
    }


def cold_import(written: str, mount: str, module: str) -> dict[str, Any]:
    """The cold-import test: the operator's own module, else the tree `node_probe.py
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
    settings: Mapping,
    shared: Mapping,
    chosen: Mapping,
    clock: Callable[[], float] = time.time,
) -> list[str]:
    """The cold-import test on every node at once, `chosen` by cold_import. srun starts
    its tasks a little apart: all of them wait for start_at, 10 s after `clock` (so this
    is built when the test starts, not when the suites are prepared)."""
    params = settings["storage"]
    config = {
        "run": settings["run"],
        "user": settings["probe_user"],
        "module": chosen["module"],
        "python": settings["cold_import_python"],
        "root": chosen["root"],
        "needs_mount": chosen["needs_mount"],
        "mount_timeout_s": params["mount_timeout_s"],
        "timeout_s": params["timeout_s"],
        "start_at": int(clock()) + 10,
    }
    return (
        Srun(**shared["step"])
        .but(job_name="kiln-validate-import")
        .argv(
            *shared["probe"],
            *("cold-import", "--config", json.dumps(config)),
            *("--out", f"{settings['paths']['node_dir']}/cold_import.json"),
        )
    )


def mpi_record(ran: Mapping, unbuilt: list[str]) -> dict[str, Any]:
    """mpi.json: the launcher's output and the nodes without the check, or why the check
    did not run at all."""
    if ran.get("skipped"):
        return {"skipped": NO_MPI_CHECK}
    return {**files.loads(ran["stdout"]), "unbuilt": list(unbuilt)}
