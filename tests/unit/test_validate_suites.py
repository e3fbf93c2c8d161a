"""What the validate role runs, decided in kiln.validation.suites and .registry and
handed to the role through its filters (kiln_validate_look, _prepare, _tree,
_cold_import, _cold_import_argv, _writer, _recorder). Each argv is compared whole: the YAML
runs it as it is."""

import json
import time

from kiln.validation import profiles, registry, suites
from tests.unit.test_filter_plugins import filters

VALIDATE = filters("kiln_validate")

SETTINGS = {
    "libexec_dir": "/usr/local/libexec/kiln",
    "run": "r1",
    "probe_user": "nobody",
    "scratch_paths": ["/scratch", "/nvme"],
    "cold_import_python": "/opt/py/bin/python3",
    "reservation": "kiln_validate",
    "suites": ["slurm", "storage", "collectives"],
    "suites_named": False,
    "burn_in_step": "",
    "torch_python": "python3",
    "nccl_tests_dir": "/opt/nccl-tests/build",
    "nccl_tests_image": "",
    "nccl_tests_version": "",
    "cuda_home": "",
    "nccl_home": "",
    "storage": dict(profiles.STORAGE_DEFAULTS),
    "collectives": dict(profiles.COLLECTIVES_DEFAULTS),
    "burn_in": {},
    "burn_in_seconds": 0,
    "srun_timeout_s": 30,
    "pairs": [["gpu1", "gpu2"], ["gpu3", "gpu4"]],
    "paths": VALIDATE["kiln_validate_paths"]("/state/raw", "r1"),
}

# What tasks/main.yml registers on each node (kiln_node.prerequisites' JSON, as
# suites.FOUND): gpu1 has everything, gpu2 lacks torch, gpu3 lacks torch, nccl-tests
# (and a CUDA toolkit: kiln_node.cuda_toolchain found only NCCL) and the MPI check; on
# gpu4 the look was skipped.
NO_CUDA = {"cuda": None, "nccl": {"home": "/usr", "version": "2.28.9"}, "mpi": None}
NO_TORCH = {"rc": 1, "stdout": "", "stderr": "ModuleNotFoundError: No module named 'torch'"}


def looked(torch=None, nccl_tests=None, mpi_check=None, toolchain=None) -> dict:
    """The look's registered result on a node, as Ansible's command module gives it."""
    found = {"torch": torch, "nccl_tests": nccl_tests, "mpi_check": mpi_check}
    return {"rc": 0, "stdout": json.dumps({**found, "toolchain": toolchain}), "stderr": ""}


TORCH = {"rc": 0, "stdout": "2.5.1\n", "stderr": ""}
HOSTVARS = {
    "gpu1": {suites.FOUND: looked(TORCH, nccl_tests=True, mpi_check=True)},
    "gpu2": {suites.FOUND: looked(NO_TORCH, nccl_tests=True, mpi_check=True)},
    "gpu3": {
        suites.FOUND: looked(
            {**NO_TORCH, "rc": 127}, nccl_tests=False, mpi_check=False, toolchain=NO_CUDA
        )
    },
    "gpu4": {suites.FOUND: {"skipped": True, "changed": False}},
}


LAUNCHER = ["/usr/bin/python3", "/usr/local/libexec/kiln/kiln-probe-launcher"]
PROBE = ["/usr/bin/python3", "/usr/local/libexec/kiln/kiln-validate-probe"]
# Where kiln_node.records (kiln-validate-probe record) writes the run's records on the
# controller; the role brings them back (tasks/bring.yml).
ON = "/var/lib/kiln/validate/r1-controller"


def run(record: str, *argv: str, add: str = "") -> list[str]:
    """argv recorded: its JSON output written as the controller's record `record`."""
    extra = ["--json", add] if add else []
    return [*PROBE, "record", "run", "--out", f"{ON}/{record}", *extra, "--", *argv]


def step(record: str, name: str, *argv: str) -> list[str]:
    """An srun step whose end is written under `name` in the controller's `record`."""
    return [*PROBE, "record", "step", "--out", f"{ON}/{record}", "--name", name, "--", *argv]


# The storage suite's settings as kiln-validate-probe reads them (`storage --config`).
STORAGE_CONFIG = (
    '{"run": "r1", "user": "nobody", "params": {"file_size_mib": 4096, "block_size": "1M",'
    ' "numjobs": 4, "direct": true, "runtime_s": 30, "metadata_files": 10000,'
    ' "import_modules": 3000, "timeout_s": 900, "mount_timeout_s": 10},'
    ' "scratch": ["/scratch", "/nvme"]}'
)
BENCH = [
    *("python3", "/usr/local/libexec/kiln/kiln-torch-bench", "--backend", "nccl"),
    *("--min-bytes", "1048576", "--max-bytes", "8589934592", "--warmup", "5", "--iters", "20"),
    *("--init-timeout", "900"),
]


def srun(job, ranks, nodes="gpu3,gpu2,gpu1,gpu4", minutes=65):
    return [
        *("srun", f"--nodes={len(nodes.split(','))}", f"--nodelist={nodes}"),
        f"--ntasks-per-node={ranks}",
        *("--reservation=kiln_validate", f"--time={minutes}", "--immediate=60"),
        *("--kill-on-bad-exit=0", f"--job-name={job}"),
    ]


def test_prepare_for_a_validation_where_nodes_lack_benchmarks():
    prepared = VALIDATE["kiln_validate_prepare"](
        HOSTVARS, ["gpu3", "gpu2", "gpu1", "gpu4"], SETTINGS
    )
    assert prepared == {
        "probe": ["/usr/bin/python3", "/usr/local/libexec/kiln/kiln-validate-probe"],
        "launcher": ["/usr/bin/python3", "/usr/local/libexec/kiln/kiln-probe-launcher"],
        "step": {
            "nodes": ["gpu3", "gpu2", "gpu1", "gpu4"],
            "job_name": "kiln-validate",
            "reservation": "kiln_validate",
            "minutes": 65,  # 4 storage timeouts of 900 s, and 5 minutes
            "immediate_s": 60,
            "kill_on_bad_exit": False,
            "tasks_per_node": 1,
        },
        "launcher_minutes": 17,  # 900 s, and 2 minutes
        "lacking": {"torch": ["gpu3", "gpu2"], "nccl_tests": ["gpu3"], "mpi_check": ["gpu3"]},
        "missing": [],  # the collectives suite was not named: its parts are skipped
        "collectives_notes": {
            "single_node_skipped": "",
            "torch_skipped": "torch is not importable with python3 on gpu3,gpu2",
            "nccl_tests_skipped": "no /opt/nccl-tests/build/all_reduce_perf on gpu3",
            # A GPU profile (backend nccl): neither benchmark runs, so no node is
            # measured, each told what it lacks itself or which node stops the run.
            "unmeasured": {
                "gpu3": "collectives not measured: no nccl-tests"
                " (/opt/nccl-tests/build/all_reduce_perf): no CUDA toolkit (bin/nvcc) on the"
                " node; no torch (python3 cannot import it)",
                "gpu2": "collectives not measured: nccl-tests not run: missing on gpu3;"
                " no torch (python3 cannot import it)",
                "gpu1": "collectives not measured: nccl-tests not run: missing on gpu3;"
                " Kiln's benchmark not run: no torch on gpu3,gpu2",
                "gpu4": "collectives not measured: nccl-tests not run: missing on gpu3;"
                " Kiln's benchmark not run: no torch on gpu3,gpu2",
            },
        },
        "within_node": True,
        "records": {
            # Each step skipped until it runs, and the collectives' notes as above.
            "storage_steps": {
                "storage": {"skipped": True},
                "cold_import": {"skipped": True},
                "cold_import_skipped": "",
            },
            "collectives_steps": {
                "single_node": {"skipped": True},
                "multi_node": {"skipped": True},
                **prepared["collectives_notes"],
            },
        },
        "commands": {
            "srun_time": run(
                "srun.json",
                *LAUNCHER,
                *("srun-time", "--nodes", "gpu3,gpu2,gpu1,gpu4", "--reservation", "kiln_validate"),
                *("--timeout", "30"),
            ),
            "mpi_nodes": ["gpu2", "gpu1", "gpu4"],
            "mpi": run(
                "mpi.json",
                *LAUNCHER,
                *("mpi", "--nodes", "gpu2,gpu1,gpu4", "--reservation", "kiln_validate"),
                *("--program", "/usr/local/libexec/kiln/kiln-mpi-check"),
                add='{"unbuilt": ["gpu3"]}',
            ),
            "mpi_skipped": [
                *(*PROBE, "record", "note", "--out", f"{ON}/mpi.json", "--name", "skipped"),
                *("--", suites.NO_MPI_CHECK),
            ],
            "storage": step(
                "storage_steps.json",
                "storage",
                *srun("kiln-validate-storage", ranks=1),
                *PROBE,
                *("storage", "--config", STORAGE_CONFIG),
                *("--out", "/var/lib/kiln/validate/r1/storage.json"),
            ),
            "cold_import_skipped": [
                *(*PROBE, "record", "note", "--out", f"{ON}/storage_steps.json"),
                *("--name", "cold_import_skipped", "--"),
            ],
            "collectives_node": step(
                "collectives_steps.json",
                "single_node",
                *srun("kiln-validate-node-collectives", ranks=8),
                *BENCH,
                *("--per-node", "--out", "/var/lib/kiln/validate/r1/collectives_node.json"),
            ),
            "collectives_all": step(
                "collectives_steps.json",
                "multi_node",
                *srun("kiln-validate-collectives", ranks=8),
                *BENCH,
                *("--out", "/var/lib/kiln/validate/r1/collectives_all.json"),
            ),
            "nccl_tests": run(
                "nccl_tests.json",
                *LAUNCHER,
                *("nccl-tests", "--nodes", "gpu3,gpu2,gpu1,gpu4", "--reservation", "kiln_validate"),
                *("--bin-dir", "/opt/nccl-tests/build", "--ranks-per-node", "8"),
                *("--min-bytes", "1048576", "--max-bytes", "8589934592", "--time", "17"),
                *("--container-image", ""),
            ),
            "pairs": run(
                "pairs.json",
                *LAUNCHER,
                *("pairs", "--reservation", "kiln_validate", "--ranks-per-node", "8"),
                *("--time", "17", "--pairs", "gpu1,gpu2", "gpu3,gpu4", "--", *BENCH),
                *("--collectives", "all_reduce"),
            ),
        },
    }


def test_a_named_collectives_suite_stops_where_a_node_has_neither_benchmark():
    named = {**SETTINGS, "suites_named": True, "torch_python": "/opt/py/bin/python"}
    prepared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3", "gpu2", "gpu1"], named)
    assert prepared["missing"] == [
        "collectives suite: neither torch (/opt/py/bin/python) nor nccl-tests"
        " (/opt/nccl-tests/build) on gpu3 (set validate_torch_python,"
        " validate_nccl_tests_dir or validate_nccl_tests_image)"
    ]
    # An image brings nccl-tests: every node has them, nothing stops the run.
    imaged = {**named, "nccl_tests_image": "nvcr.io#nvidia/pytorch:24.05-py3"}
    prepared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3", "gpu2", "gpu1"], imaged)
    assert (prepared["missing"], prepared["lacking"]["nccl_tests"]) == ([], [])
    assert prepared["collectives_notes"]["nccl_tests_skipped"] == ""
    # Without the collectives suite, nothing it lacks stops the run.
    storage_only = {**named, "suites": ["storage"]}
    assert VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3"], storage_only)["missing"] == []


def test_a_burn_in_hold_stops_where_a_node_lacks_torch_and_a_round_never():
    burn_in = {**SETTINGS, "burn_in_step": "hold", "burn_in": dict(profiles.BURN_IN_DEFAULTS)}
    prepared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3", "gpu2", "gpu1"], burn_in)
    assert prepared["missing"] == [
        "burn-in: torch is not importable with python3 on gpu2,gpu3"
        " (set validate_torch_python to a Python that has it)"
    ]
    # The round's steps last the round (600 s) when it is longer than the storage suite.
    long_round = {
        **burn_in,
        "burn_in_step": "round",
        "burn_in": {**profiles.BURN_IN_DEFAULTS, "round_s": 7200},
    }
    prepared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3"], long_round)
    assert (prepared["missing"], prepared["step"]["minutes"]) == ([], 125)
    # Only a round stresses the nodes.
    assert (
        "burn_stress"
        not in VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu3"], burn_in)["commands"]
    )


def test_a_burn_in_round_stresses_every_node_with_the_profiles_load():
    params = {**profiles.BURN_IN_DEFAULTS, "memory_fraction": 0.85, "threads": 4}
    round_ = {**SETTINGS, "burn_in_step": "round", "burn_in": params, "burn_in_seconds": 450}
    commands = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu1", "gpu2"], round_)["commands"]
    assert commands["burn_stress"] == step(
        "burn_in_steps.json",
        "stress",
        *srun("kiln-burn-in-stress", ranks=1, nodes="gpu1,gpu2"),
        *("python3", "/usr/local/libexec/kiln/kiln-burn-stress", "--seconds", "450"),
        *("--device", "cuda", "--dtype", "bfloat16", "--size", "16384"),
        *("--memory-fraction", "0.85", "--threads", "4", "--interval", "5"),
        *("--out", "/var/lib/kiln/validate/r1/burn_stress.json"),
    )
    # The round's suites run in the same step settings, the stress's length included.
    assert commands["storage"][9:18] == srun("kiln-validate-storage", 1, "gpu1,gpu2")


def test_srun_minutes_round_down_then_add_their_margin():
    assert suites.step_minutes({"timeout_s": 10}, {}) == 5  # 40 s: 0 minutes
    assert suites.step_minutes({"timeout_s": 899}, {"round_s": 600}) == 64
    assert suites.step_minutes({"timeout_s": 60}, {"round_s": 659}) == 15
    assert suites.launcher_minutes({"timeout_s": 119}) == 3
    assert suites.launcher_minutes({"timeout_s": 120.5}) == 4


def test_one_rank_per_node_skips_the_within_node_runs_with_a_note():
    one = {**SETTINGS, "collectives": {**SETTINGS["collectives"], "ranks_per_node": 1}}
    prepared = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu1"], one)
    assert prepared["within_node"] is False
    assert prepared["collectives_notes"] == {
        "single_node_skipped": "within-node collectives not run: 1 rank per node crosses"
        " no link (ranks_per_node in the profile)",
        "torch_skipped": "",
        "nccl_tests_skipped": "",
        "unmeasured": {},
    }


def toolchain(cuda: bool, nccl: bool) -> dict:
    """kiln_node.cuda_toolchain's report, as kiln_node.prerequisites includes it."""
    return {
        "cuda": {"home": "/usr/local/cuda-13.0", "version": "13.0.88"} if cuda else None,
        "nccl": {"home": "/usr", "version": "2.28.9"} if nccl else None,
        "mpi": None,
    }


def test_on_a_gpu_profile_each_unmeasured_node_is_told_what_it_lacks():
    """Neither torch nor nccl-tests on any node: each reason names what is missing there,
    from the look at its CUDA toolkit and NCCL."""

    def bare(toolchain):
        return {suites.FOUND: looked(NO_TORCH, nccl_tests=False, toolchain=toolchain)}

    hostvars = {
        "gpu1": bare(toolchain(cuda=False, nccl=False)),
        "gpu2": bare(toolchain(cuda=True, nccl=True)),
        "gpu3": bare(None),  # no report of the toolchain: nothing more is known
        "gpu4": bare(toolchain(cuda=True, nccl=False)),
    }
    pinned = {**SETTINGS, "nccl_tests_dir": "/opt/nccl-tests/2.19.6/bin"}
    nodes = ["gpu1", "gpu2", "gpu3", "gpu4"]
    where = "no nccl-tests (/opt/nccl-tests/2.19.6/bin/all_reduce_perf)"
    torch = "no torch (python3 cannot import it)"
    expected = {
        "gpu1": f"{where}: no CUDA toolkit (bin/nvcc) and no NCCL (nccl.h) on the node",
        "gpu2": f"{where}: nccl_tests_version is not set (the nccl_tests role builds them)",
        "gpu3": where,  # the look itself failed: nothing more is known
        "gpu4": f"{where}: no NCCL (nccl.h) on the node",
    }
    notes = VALIDATE["kiln_validate_prepare"](hostvars, nodes, pinned)["collectives_notes"]
    assert notes["unmeasured"] == {
        node: f"collectives not measured: {why}; {torch}" for node, why in expected.items()
    }
    # A release asked for and a toolkit there: it was not built yet.
    asked = {**pinned, "nccl_tests_version": "2.19.6"}
    notes = VALIDATE["kiln_validate_prepare"](hostvars, ["gpu2"], asked)["collectives_notes"]
    assert notes["unmeasured"] == {
        "gpu2": f"collectives not measured: {where}: not built yet"
        f" (kiln provision --tags nccl_tests); {torch}"
    }


def test_a_benchmark_that_runs_or_a_cpu_profile_leaves_every_node_measured():
    """torch everywhere (nccl-tests missing), nccl-tests everywhere (torch missing), an
    image bringing nccl-tests, or the lab's gloo profile: no node is unmeasured."""
    no_nccl = {suites.FOUND: looked(TORCH, nccl_tests=False, toolchain=NO_CUDA)}
    no_torch = {suites.FOUND: looked(NO_TORCH, nccl_tests=True)}
    neither = {suites.FOUND: looked(NO_TORCH, nccl_tests=False, toolchain=NO_CUDA)}
    lab = profiles.load("lab-cpu")
    cpu = {**SETTINGS, "collectives": lab.collectives, "storage": lab.storage}
    image = {**SETTINGS, "nccl_tests_image": "nvcr.io#nvidia/pytorch:25.01-py3"}
    for hostvars, settings in (
        ({"gpu1": no_nccl}, SETTINGS),
        ({"gpu1": no_torch}, SETTINGS),
        ({"gpu1": neither}, image),
        ({"gpu1": neither}, cpu),
    ):
        notes = VALIDATE["kiln_validate_prepare"](hostvars, ["gpu1"], settings)
        assert notes["collectives_notes"]["unmeasured"] == {}


def test_a_node_missing_from_the_inventory_lacks_nothing_it_was_not_checked_for():
    found = {node: suites.Found.on(HOSTVARS, node) for node in ("gpu9", "gpu1")}
    assert suites.lacking(found, ["gpu9", "gpu1"], "") == {
        "torch": [],
        "nccl_tests": [],
        "mpi_check": [],
    }


def _mount(path, status="OK", indirect=False):
    return {"name": path.strip("/"), "path": path, "status": status, "indirect": indirect}


def test_the_cold_import_tree_goes_on_the_first_healthy_direct_mount():
    tree = VALIDATE["kiln_validate_tree"]
    check = {
        "rc": 0,
        "stdout": json.dumps(
            {
                "mounts": [
                    _mount("/broken", status="FAIL"),
                    _mount("/home", indirect=True),  # an automount map: no directory of its own
                    _mount("/shared"),
                    _mount("/data"),
                ]
            }
        ),
    }
    assert tree(check, SETTINGS) == {
        "mount": "/shared",
        "write": [
            *(*PROBE, "tree", "--mount", "/shared", "--run", "r1"),
            *("--user", "nobody", "--modules", "3000"),
        ],
        "remove": [*PROBE, "remove", "--mount", "/shared", "--run", "r1"],
    }
    nothing = {"mount": "", "write": [], "remove": []}
    warned = {"rc": 0, "stdout": json.dumps({"mounts": [_mount("/x", status="WARN")]})}
    assert tree(warned, SETTINGS) == nothing
    assert tree({"rc": 0, "stdout": "{}"}, SETTINGS) == nothing
    assert tree({"rc": 2, "stdout": "", "stderr": "kiln-mount-check: no config"}, SETTINGS) == (
        nothing
    )
    assert tree({"skipped": True}, SETTINGS) == nothing  # the operator's own module: no tree


def test_the_cold_import_imports_the_tree_or_the_operators_module_or_says_why_not():
    cold_import = VALIDATE["kiln_validate_cold_import"]
    written = {"rc": 0, "stdout": json.dumps({"root": "/shared/.kiln/r1", "modules": 200})}
    assert cold_import(written, "/shared", "") == {
        "run": True,
        "module": "kiln_cold_import.all",
        "root": "/shared/.kiln/r1",
        "needs_mount": "/shared",
        "skipped": "",
    }
    refused = {"rc": 0, "stdout": json.dumps({"error": "/shared is not writable by nobody"})}
    assert cold_import(refused, "/shared", "") == {
        "run": False,
        "module": "kiln_cold_import.all",
        "root": "",
        "needs_mount": "/shared",
        "skipped": "/shared is not writable by nobody",
    }
    assert cold_import({"skipped": True}, "", "") == {
        "run": False,
        "module": "kiln_cold_import.all",
        "root": "",
        "needs_mount": "",
        "skipped": "no shared mount is healthy on the controller to hold the package tree",
    }
    # The operator's own module: no tree, no mount. `run` is a bool, which Ansible
    # 2.19's `when` needs (the module's name there failed the storage suite).
    assert cold_import({"skipped": True}, "", "torch") == {
        "run": True,
        "module": "torch",
        "root": "",
        "needs_mount": "",
        "skipped": "",
    }


def _import_argv(config: str, nodes="gpu3,gpu2,gpu1,gpu4") -> list[str]:
    return step(
        "storage_steps.json",
        "cold_import",
        *srun("kiln-validate-import", ranks=1, nodes=nodes),
        *(*PROBE, "cold-import", "--config", config),
        *("--out", "/var/lib/kiln/validate/r1/cold_import.json"),
    )


def test_the_cold_import_starts_on_every_node_10_s_after_its_argv_is_made():
    typed = suites.Settings.from_role(SETTINGS)
    shared = registry.prepare(HOSTVARS, ["gpu3", "gpu2", "gpu1", "gpu4"], typed)
    chosen = suites.cold_import(json.dumps({"root": "/shared/.kiln/r1"}), "/shared", "")
    assert suites.cold_import_argv(typed, shared, chosen, clock=lambda: 1795738285.9) == (
        _import_argv(
            '{"run": "r1", "user": "nobody", "module": "kiln_cold_import.all",'
            ' "python": "/opt/py/bin/python3", "root": "/shared/.kiln/r1",'
            ' "needs_mount": "/shared", "mount_timeout_s": 10, "timeout_s": 900,'
            ' "start_at": 1795738295}'
        )
    )
    # The operator's module: no tree to mount. The filter reads the clock when called.
    own = suites.cold_import("", "", "torch")
    before = int(time.time())
    argv = VALIDATE["kiln_validate_cold_import_argv"](own, SETTINGS, shared)
    after = int(time.time())
    start_at = json.loads(argv[22])["start_at"]
    assert before + 10 <= start_at <= after + 10
    assert argv == _import_argv(
        '{"run": "r1", "user": "nobody", "module": "torch", "python": "/opt/py/bin/python3",'
        ' "root": "", "needs_mount": "", "mount_timeout_s": 10, "timeout_s": 900,'
        f' "start_at": {start_at}}}'
    )


def test_the_nccl_tests_argv_is_the_launchers_and_an_image_reaches_srun(monkeypatch):
    """The builder's argv parses as the launcher's command line (a name on one side
    only was refused on every cluster with nccl-tests), and an image goes to srun, as
    pyxis's option, before the program."""
    from tests.node_scripts import probe_launcher

    launched = []

    def fake_run(argv, timeout, stdin=None):
        launched.append(argv)
        return {"rc": 0, "stdout": "", "stderr": ""}

    monkeypatch.setattr(probe_launcher, "run", fake_run)
    for image, expected in (
        ("", []),
        ("/shared/nccl.sqsh", ["--container-image=/shared/nccl.sqsh"]),
    ):
        settings = {**SETTINGS, "nccl_tests_image": image}
        argv = VALIDATE["kiln_validate_prepare"](HOSTVARS, ["gpu1"], settings)["commands"][
            "nccl_tests"
        ]
        launcher_argv = argv[argv.index("--") + 1 :]
        assert launcher_argv[:2] == LAUNCHER
        args = probe_launcher.arguments().parse_args(launcher_argv[2:])
        assert args.container_image == image
        launched.clear()
        probe_launcher.nccl_tests(args)
        assert len(launched) == 3  # all_reduce, all_gather, reduce_scatter across nodes
        for srun_argv in launched:
            at = next(i for i, a in enumerate(srun_argv) if a.startswith("/opt/nccl-tests/"))
            assert srun_argv[at - len(expected) : at] == expected
            assert sum(a.startswith("--container-image") for a in srun_argv) == len(expected)
