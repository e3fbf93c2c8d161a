"""The node-side scripts, run for real on this host: the probe's package tree, cold
import and small-file test, and Kiln's torch benchmark with two gloo ranks."""

import argparse
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

from kiln.roles import node_library
from tests.conftest import REPO
from tests.node_scripts import node_probe, probe_launcher, torch_bench

BENCH = Path(torch_bench.__file__)


ME = pwd.getpwuid(os.geteuid()).pw_name
# `srun --mpi=list` of a Slurm built with PMIx, and of Ubuntu 22.04's 21.08.5 (without).
PMIX_LISTED = (
    "MPI plugin types are...\n\tnone\n\tcray_shasta\n\tpmi2\n\tpmix\n"
    "specific pmix plugin versions available: pmix_v5\n"
)
NO_PMIX_LISTED = "srun: MPI types are...\nsrun: none\nsrun: cray_shasta\nsrun: pmi2\n"


def tree_args(mount: Path, run: str = "r1", modules: int = 250, user: str = ME):
    return types.SimpleNamespace(mount=str(mount), run=run, user=user, modules=modules)


def import_config(root: str, **changes) -> dict:
    return {
        "run": "r1",
        "user": ME,
        "module": "kiln_cold_import.all",
        "root": root,
        "python": sys.executable,
        "needs_mount": "",
        "mount_timeout_s": 1,
        "timeout_s": 60,
        "start_at": 0,
        **changes,
    }


def ok_mount_check(tmp_path: Path, monkeypatch, mount: Path) -> None:
    check = tmp_path / "kiln-mount-check"
    healthy = {"name": "shared", "path": str(mount), "status": "OK", "reason": ""}
    check.write_text(f"#!/bin/sh\necho '{json.dumps({'host': 'n', 'mounts': [healthy]})}'\n")
    check.chmod(0o755)
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", str(check))


def test_each_run_writes_a_fresh_private_tree_that_imports(tmp_path):
    done = node_probe.tree(tree_args(tmp_path))
    root = tmp_path / ".kiln-validate-r1-tree"
    assert done == {"root": str(root), "modules": 250}
    assert root.stat().st_mode & 0o777 == 0o700
    assert len(list((root / node_probe.TREE_PACKAGE).rglob("m*.py"))) == 250
    result = subprocess.run(
        [
            sys.executable,
            "-B",
            "-c",
            "import kiln_cold_import.all as a; print(a.sub0002.m049.value())",
        ],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "249"
    # The same run never writes into, or trusts, a tree that is already there.
    assert node_probe.tree(tree_args(tmp_path)) == {
        "error": f"{root} exists already, not made by this run: not used"
    }
    assert node_probe.remove_tree(tree_args(tmp_path)) == {"removed": True}
    assert list(tmp_path.iterdir()) == []


def plant_tree(root: Path, witness: Path) -> None:
    """A package tree as an attacker would leave it: importing it writes `witness`."""
    package = root / node_probe.TREE_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "all.py").write_text(f"open({str(witness)!r}, 'w').write('imported')\n")
    (package / ".complete-250").write_text("")  # the old probe trusted this marker


def test_a_planted_tree_is_never_imported(tmp_path, monkeypatch):
    mount, witness = tmp_path / "shared", tmp_path / "witness"
    mount.mkdir()
    # Where older Kiln kept its tree, and where this run's tree will go.
    plant_tree(mount / ".kiln-validate" / "import-tree", witness)
    plant_tree(mount / ".kiln-validate-r1-tree", witness)
    os.chmod(mount / ".kiln-validate-r1-tree", 0o777)
    done = node_probe.tree(tree_args(mount))
    assert done["error"].endswith("exists already, not made by this run: not used")
    # The role imports only the tree this run made; pointed at any other, the probe refuses.
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", "/nonexistent/kiln-mount-check")
    for planted in (mount / ".kiln-validate" / "import-tree", mount / ".kiln-validate-r1-tree"):
        refused = node_probe.cold_import(import_config(str(planted)))
        assert "not made by this run: not used" in refused["error"], refused
    assert not witness.exists()
    if os.geteuid() == 0:  # private, but another user's: refused as well
        foreign = mount / ".kiln-validate-r1-tree"
        os.chown(foreign, 12345, 12345)
        os.chmod(foreign, 0o700)
        refused = node_probe.cold_import(import_config(str(foreign)))
        assert refused["error"] == (
            f"{foreign} is owned by uid 12345 with mode 700, not made by this run: not used"
        )
        assert not witness.exists()


def test_cold_import_times_the_import_and_reports_a_missing_module(tmp_path, monkeypatch):
    root = node_probe.tree(tree_args(tmp_path, modules=120))["root"]
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", "/nonexistent/kiln-mount-check")
    config = import_config(root)
    done = node_probe.cold_import(config)
    assert done["seconds"] > 0 and done["module"] == "kiln_cold_import.all"
    missing = node_probe.cold_import({**config, "module": "no_such_package"})
    assert missing["error"].startswith("import no_such_package failed: ModuleNotFoundError")
    # a mount the node does not have is reported, and nothing is imported from it
    unmounted = node_probe.cold_import({**config, "needs_mount": "/shared"})
    assert unmounted["error"] == "/shared is not mounted"


def test_storage_never_follows_a_planted_symlink(tmp_path, monkeypatch):
    mount, victim = tmp_path / "shared", tmp_path / "victim"
    mount.mkdir()
    victim.mkdir()
    (victim / "keep").write_text("precious")
    node = socket.gethostname()
    (mount / f".kiln-validate-r1-{node}").symlink_to(victim)
    ok_mount_check(tmp_path, monkeypatch, mount)
    params = {"mount_timeout_s": 1, "timeout_s": 30}
    result = node_probe.storage({"run": "r1", "user": ME, "params": params, "scratch": []})
    link = mount / f".kiln-validate-r1-{node}"
    assert result["targets"] == [
        {"path": str(mount), "error": f"{link} exists already, not made by this run: not used"}
    ]
    assert [p.name for p in victim.iterdir()] == ["keep"]
    assert (victim / "keep").read_text() == "precious"
    assert link.is_symlink()  # not Kiln's to remove either


def test_storage_works_in_a_fresh_directory_and_removes_it(tmp_path, monkeypatch):
    mount = tmp_path / "shared"
    mount.mkdir()
    ok_mount_check(tmp_path, monkeypatch, mount)
    params = {
        "mount_timeout_s": 1,
        "timeout_s": 30,
        "numjobs": 1,
        "file_size_mib": 1,
        "direct": False,
        "block_size": "1M",
        "runtime_s": 1,
        "metadata_files": 50,
    }
    result = node_probe.storage({"run": "r1", "user": ME, "params": params, "scratch": []})
    (target,) = result["targets"]
    assert target["path"] == str(mount) and "error" not in target, target
    assert target["metadata"]["files"] == 50
    assert set(target) == {"path", "seq_write", "seq_read", "rand_read", "metadata"}
    assert list(mount.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")
def test_as_root_the_probes_work_as_the_unprivileged_account(tmp_path, monkeypatch):
    # A world-traversable place, as a shared mount is (pytest's tmp_path is root's 0700).
    base = Path(tempfile.mkdtemp(prefix="kiln-probe-"))
    try:
        base.chmod(0o755)
        probe = base / "kiln-validate-probe"
        shutil.copy(node_probe.__file__, probe)
        for name, text in node_library.shipped_files().items():  # found beside the probe
            (base / name).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            (base / name).write_text(text)
        monkeypatch.setattr(node_probe, "__file__", str(probe))
        # the nodes' Python (the test's own may sit under root's home)
        monkeypatch.setattr(node_probe.sys, "executable", "/usr/bin/python3")
        mount = base / "shared"
        mount.mkdir(mode=0o755)
        nobody = pwd.getpwnam("nobody")
        done = node_probe.tree(tree_args(mount, modules=120, user="nobody"))
        root = Path(done["root"])
        for path in [root, *root.rglob("*")]:
            assert path.stat().st_uid == nobody.pw_uid, path
        assert root.stat().st_mode & 0o777 == 0o700
        (root / "kiln_whoami.py").write_text(
            "import os\nopen(__file__ + '.uid', 'w').write(str(os.getuid()))\n"
        )
        os.chown(root / "kiln_whoami.py", nobody.pw_uid, nobody.pw_gid)
        monkeypatch.setattr(node_probe, "MOUNT_CHECK", "/nonexistent/kiln-mount-check")
        config = import_config(
            str(root), user="nobody", module="kiln_whoami", python="/usr/bin/python3"
        )
        assert "seconds" in node_probe.cold_import(config)
        assert (root / "kiln_whoami.py.uid").read_text() == str(nobody.pw_uid)
        # Storage: the fresh directory is the account's, and the small files are written
        # there as that account.
        ok_mount_check(base, monkeypatch, mount)
        params = {
            "mount_timeout_s": 1,
            "timeout_s": 30,
            "block_size": "1M",
            "numjobs": 1,
            "file_size_mib": 1,
            "direct": False,
            "runtime_s": 1,
            "metadata_files": 20,
        }
        result = node_probe.storage(
            {"run": "r2", "user": "nobody", "params": params, "scratch": []}
        )
        assert result["targets"][0]["metadata"]["files"] == 20, result
        assert sorted(p.name for p in mount.iterdir()) == [".kiln-validate-r1-tree"]
        assert node_probe.tree(tree_args(mount, user="no-such-user"))["error"] == (
            "no user 'no-such-user' on this node to run the probes as"
        )
    finally:
        shutil.rmtree(base)


def test_small_files_counts_create_stat_delete(tmp_path):
    done = node_probe.small_files(tmp_path, 200)
    assert done["files"] == 200 and done["ops"] == 600 and done["seconds"] > 0
    assert not (tmp_path / "meta").exists()


def test_storage_never_benchmarks_a_mount_the_check_did_not_pass(tmp_path, monkeypatch):
    check = tmp_path / "kiln-mount-check"
    broken = {
        "name": "shared",
        "path": str(tmp_path),
        "status": "FAIL",
        "reason": "not mounted after access",
    }
    check.write_text(f"#!/bin/sh\necho '{json.dumps({'host': 'n', 'mounts': [broken]})}'\nexit 1\n")
    check.chmod(0o755)
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", str(check))
    params = {"mount_timeout_s": 1}
    result = node_probe.storage({"run": "r1", "params": params, "scratch": []})
    assert result["targets"] == []
    assert result["mount_check"]["mounts"][0]["status"] == "FAIL"
    assert list(tmp_path.iterdir()) == [check]  # nothing written on the bare mount point


def test_bus_factors_match_nccl_tests():
    assert torch_bench.bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert torch_bench.bus_factor("all_gather", 8) == pytest.approx(0.875)
    assert torch_bench.bus_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert torch_bench.sizes(1024, 8192) == [1024, 2048, 4096, 8192]


def free_port() -> int:
    """A TCP port free on this host now, for the ranks' rendezvous (a fixed one may be
    taken by another test run)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory) -> dict:
    """Kiln's torch benchmark, two gloo ranks on this host: what rank 0 writes."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo") / "bench.json"
    argv = [
        sys.executable,
        "-W",
        "ignore",
        str(BENCH),
        "--backend",
        "gloo",
        "--min-bytes",
        "4096",
        "--max-bytes",
        "65536",
        "--warmup",
        "1",
        "--iters",
        "3",
        "--master-port",
        str(free_port()),
        "--out",
        str(out),
    ]
    ranks = [
        subprocess.Popen(
            argv,
            env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for rank in ranks:
        _, err = rank.communicate(timeout=180)
        assert rank.returncode == 0, err
    return json.loads(out.read_text())


def test_torch_benchmark_two_gloo_ranks(gloo_run):
    doc = gloo_run
    assert doc["benchmark"] == "kiln-torch-bench" and doc["ranks"] == 2 and doc["backend"] == "gloo"
    rows = doc["results"]
    assert {r["collective"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter"}
    assert [r["size_bytes"] for r in rows if r["collective"] == "all_reduce"] == [
        4096,
        8192,
        16384,
        32768,
        65536,
    ]
    for r in rows:
        # algbw = bytes / time; busbw = algbw x the collective's factor for 2 ranks
        algbw = r["size_bytes"] / (r["time_us"] / 1e6) / 1e9
        assert r["algbw_gbps"] == pytest.approx(algbw, rel=0.01)
        factor = 1.0 if r["collective"] == "all_reduce" else 0.5
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor, rel=1e-3)


@pytest.mark.parametrize(
    "env",
    [{"WORLD_SIZE": "1"}, {"SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "1(x4)"}],
    ids=["world of one", "one rank per node, --per-node"],
)
def test_torch_benchmark_refuses_one_rank(tmp_path, env):
    pytest.importorskip("torch")
    argv = [sys.executable, "-W", "ignore", str(BENCH), "--backend", "gloo"]
    argv += ["--per-node"] if "SLURM_NTASKS" in env else []
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_", "RANK"))}
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "x.json")],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kiln-torch-bench: 1 rank: no link is crossed; nothing to measure (run 2 or more ranks)"
    ]
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("ranks_per_node", [1, 8])
def test_nccl_tests_never_schedules_a_one_rank_run(monkeypatch, ranks_per_node):
    launched = []

    def fake_run(argv, timeout, stdin=None):
        launched.append(argv)
        return {"rc": 0, "stdout": "", "stderr": ""}

    monkeypatch.setattr(probe_launcher, "run", fake_run)
    args = argparse.Namespace(
        nodes="a,b", reservation="r", bin_dir="/x", collectives="all_reduce", time=1,
        ranks_per_node=ranks_per_node, min_bytes=1, max_bytes=2, container_image="",
    )  # fmt: skip
    probe_launcher.nccl_tests(args)
    nodes = sorted(next(a for a in argv if a.startswith("--nodes=")) for argv in launched)
    if ranks_per_node == 1:
        assert nodes == ["--nodes=2"]  # only across the nodes: 2 ranks
    else:
        assert nodes == ["--nodes=1", "--nodes=1", "--nodes=2"]


@pytest.mark.parametrize("across_rc", [0, 1])
def test_the_mpi_check_runs_each_node_alone_only_when_the_run_across_fails(monkeypatch, across_rc):
    launched = []

    def fake_srun(argv, timeout, stdin=None):
        if argv == ["srun", "--mpi=list"]:
            return {"rc": 0, "stdout": PMIX_LISTED, "stderr": "", "seconds": 0.1}
        launched.append(argv)
        across = "--nodes=3" in argv
        return {"rc": across_rc if across else 0, "stdout": "{}", "stderr": "", "seconds": 1.0}

    monkeypatch.setattr(probe_launcher, "run", fake_srun)
    args = argparse.Namespace(nodes="a,b,c", reservation="r", program="/p/check", time=5)
    found = probe_launcher.mpi_check(args)
    assert launched[0] == [
        "srun", "--nodes=3", "--nodelist=a,b,c", "--ntasks-per-node=1", "--mpi=pmix",
        "--reservation=r", "--time=5", "--immediate=60", "--job-name=kiln-validate-mpi",
        "/p/check",
    ]  # fmt: skip
    assert found["all"]["rc"] == across_rc
    if across_rc == 0:
        assert len(launched) == 1 and found["alone"] == {}
    else:
        alone = sorted(
            next(a for a in argv if a.startswith("--nodelist=")) for argv in launched[1:]
        )
        assert alone == ["--nodelist=a", "--nodelist=b", "--nodelist=c"]
        assert sorted(found["alone"]) == ["a", "b", "c"]


# --- the probes' own outputs, read through the result records -----------------------------
# Each output below is what kiln-validate-probe's functions write, run here; only the programs
# they start are stand-ins (srun, fio, nccl-tests, the MPI check) that print recorded
# outputs. So a key the probe renames, drops or fills with another kind of value fails
# here, not only in the lab.

FIXTURES = Path(__file__).parent.parent / "fixtures"


def reads_whole(record_type, written: dict):
    """`written` read into its record: each key is a field and keeps its value."""
    kept = record_type.from_json(written).to_json()
    assert {key: kept.get(key, "(no such field)") for key in written} == written
    return record_type.from_json(written)


def stand_in(directory: Path, name: str, body: str) -> Path:
    program = directory / name
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)
    return program


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """A directory of stand-ins ahead of PATH, srun among them: it drops srun's options and
    runs the command on this host, as srun runs it on a node."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(
        bin_dir,
        "srun",
        f'[ "$*" = --mpi=list ] && {{ printf %s "{PMIX_LISTED}"; exit 0; }}\n'
        'while [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return bin_dir


def test_the_storage_probes_output_reads_whole(tmp_path, monkeypatch, on_path):
    """The real kiln-mount-check on a declared mount that is not mounted, and fio (its
    recorded JSON) on declared scratch."""
    from kiln.roles import autofs
    from kiln.validation import results as layout

    shared, scratch = tmp_path / "shared", tmp_path / "scratch"
    shared.mkdir()
    scratch.mkdir()
    declared = [{"name": "shared", "path": str(shared), "type": "nfs", "source": "nas:/ml"}]
    config = tmp_path / "mounts.json"
    config.write_text(json.dumps(autofs.check_list(autofs.parse(declared))))
    mount_check = REPO / "roles" / "autofs" / "files" / "kiln-mount-check"
    check = stand_in(
        on_path, "mount-check", f'exec {sys.executable} {mount_check} --config {config} "$@"'
    )
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", str(check))
    fio = {
        name: (FIXTURES / "fio" / f"{name}.json").read_text()
        for name in ("seq_read", "seq_write_4jobs")
    }
    stand_in(
        on_path,
        "fio",
        f'case "$1" in --name=seq_write) cat {FIXTURES}/fio/seq_write_4jobs.json;; '
        f"*) cat {FIXTURES}/fio/seq_read.json;; esac",
    )
    params = {
        "mount_timeout_s": 5, "timeout_s": 30, "numjobs": 1, "file_size_mib": 1,
        "direct": False, "block_size": "1M", "runtime_s": 1, "metadata_files": 20,
    }  # fmt: skip
    written = node_probe.storage(
        {"run": "r1", "user": ME, "params": params, "scratch": [str(scratch)]}
    )

    record = reads_whole(layout.NodeStorage, written)
    assert record.node == socket.gethostname()
    checked = reads_whole(layout.MountCheck, written["mount_check"])
    assert (checked.rc, checked.stderr) == (1, "")
    (entry,) = [reads_whole(layout.Mount, m) for m in written["mount_check"]["mounts"]]
    assert entry == layout.Mount(
        name="shared",
        path=str(shared),
        indirect=False,
        fstype="nfs",
        source="nas:/ml",
        server="nas",
        required=True,
        status="FAIL",
        reason="not mounted after access: autofs could not mount nas:/ml (server nas)",
    )
    assert record.check().entries() == [entry]
    (target,) = written["targets"]
    assert reads_whole(layout.Target, target) == record.target_list()[0]
    assert record.target_list()[0].path == str(scratch)
    for name, text in (("seq_write", fio["seq_write_4jobs"]), ("seq_read", fio["seq_read"])):
        assert reads_whole(layout.Fio, target[name]) == layout.Fio(rc=0, json=text, stderr="")
    assert reads_whole(layout.Fio, target["rand_read"]).json == fio["seq_read"]
    small = reads_whole(layout.SmallFiles, target["metadata"])
    assert (small.files, small.ops, small.seconds > 0) == (20, 60, True)
    assert list(scratch.iterdir()) == []


def test_the_cold_import_output_reads_whole(tmp_path, monkeypatch):
    from kiln.validation import results as layout

    root = node_probe.tree(tree_args(tmp_path, modules=20))["root"]
    monkeypatch.setattr(node_probe, "MOUNT_CHECK", "/nonexistent/kiln-mount-check")
    config = import_config(root)
    timed = reads_whole(layout.ColdImport, node_probe.cold_import(config))
    assert (timed.node, timed.module, timed.problem()) == (
        socket.gethostname(),
        "kiln_cold_import.all",
        "",
    )
    assert timed.seconds > 0
    failed = reads_whole(layout.ColdImport, node_probe.cold_import({**config, "module": "nope"}))
    assert (failed.seconds, failed.problem()) == (
        None,
        "import nope failed: ModuleNotFoundError: No module named 'nope'",
    )


def test_the_srun_probes_outputs_read_whole(tmp_path, on_path):
    """srun-time, nccl-tests and the MPI check through srun (recorded nccl-tests text)."""
    from kiln.validation import results as layout

    srun = probe_launcher.srun_time(
        argparse.Namespace(nodes="gpu001,gpu002", reservation="r", timeout=5)
    )
    assert sorted(srun) == ["gpu001", "gpu002"]
    for written in srun.values():
        command = reads_whole(layout.Command, written)
        assert (command.rc, command.stdout, command.stderr) == (0, "", "")
    assert layout.Command.by_name(srun)["gpu001"].seconds >= 0

    recorded = (FIXTURES / "nccl-tests" / "all_reduce_1node.txt").read_text()
    stand_in(on_path, "all_reduce_perf", f"cat {FIXTURES}/nccl-tests/all_reduce_1node.txt")
    args = argparse.Namespace(
        nodes="gpu001,gpu002", reservation="r", bin_dir=str(on_path), collectives="all_reduce",
        time=1, ranks_per_node=8, min_bytes=1, max_bytes=2, container_image="",
    )  # fmt: skip
    written = probe_launcher.nccl_tests(args)
    outputs = reads_whole(layout.NcclTests, written)
    ran = layout.Command(rc=0, stdout=recorded, stderr="", seconds=None)
    assert outputs.within("gpu001") == outputs.within("gpu002") == {"all_reduce": ran}
    assert outputs.across() == {"all_reduce": ran}
    reads_whole(layout.Command, written["multi_node"]["all_reduce"])

    program = stand_in(on_path, "kiln-mpi-check", "echo '{\"ranks\": 2}'; echo lost >&2; exit 1")
    args = argparse.Namespace(nodes="gpu001,gpu002", reservation="r", program=str(program), time=1)
    written = probe_launcher.mpi_check(args)
    run = reads_whole(layout.MpiRun, written)
    across = reads_whole(layout.Command, written["all"])
    assert (across.rc, across.stdout, across.stderr) == (1, '{"ranks": 2}\n', "lost")
    assert run.across() == across
    assert sorted(run.each()) == ["gpu001", "gpu002"]
    assert reads_whole(layout.Command, written["alone"]["gpu002"]) == run.each()["gpu002"]


@pytest.mark.parametrize(
    ("listed", "skipped"),
    [
        ({"rc": 0, "stdout": "", "stderr": NO_PMIX_LISTED}, True),  # 21.08 writes to stderr
        ({"rc": 0, "stdout": PMIX_LISTED, "stderr": ""}, False),
        # No answer is no reason to skip: the check runs and its failure is reported.
        ({"rc": 1, "stdout": "", "stderr": "srun: error: Unable to establish controller"}, False),
    ],
)
def test_where_srun_lists_no_pmix_the_mpi_check_starts_nothing_and_says_why(
    monkeypatch, listed, skipped
):
    launched = []

    def fake_srun(argv, timeout, stdin=None):
        if argv == ["srun", "--mpi=list"]:
            return {**listed, "seconds": 0.1}
        launched.append(argv)
        return {"rc": 0, "stdout": "{}", "stderr": "", "seconds": 1.0}

    monkeypatch.setattr(probe_launcher, "run", fake_srun)
    args = argparse.Namespace(nodes="a,b", reservation="r", program="/p/check", time=5)
    found = probe_launcher.mpi_check(args)
    if skipped:
        assert (found, launched) == ({"skipped": probe_launcher.NO_PMIX}, [])
    else:
        assert found == {
            "all": {"rc": 0, "stdout": "{}", "stderr": "", "seconds": 1.0},
            "alone": {},
        }
        assert len(launched) == 1


def test_the_benchmark_and_a_pairs_output_read_whole(gloo_run, on_path):
    """The benchmark's own output (two gloo ranks), and the probe's pairs run around it
    (the benchmark a stand-in that prints that output)."""
    from kiln.validation import results as layout

    benchmark = reads_whole(layout.Benchmark, gloo_run)
    points = [reads_whole(layout.Point, point) for point in gloo_run["results"]]
    assert benchmark.points() == points and len(points) == 15
    printed = on_path / "bench.json"
    printed.write_text(json.dumps(gloo_run) + "\n")
    bench = stand_in(on_path, "kiln-bench", f"cat {printed}")
    args = argparse.Namespace(
        reservation="r", ranks_per_node=1, time=1, pairs=["gpu001,gpu002"], bench=[str(bench)]
    )
    written = probe_launcher.run_pairs(args)
    assert sorted(written) == ["gpu001,gpu002"]
    pair = reads_whole(layout.Pair, written["gpu001,gpu002"])
    assert (pair.rc, pair.stderr, pair.benchmark()) == (0, "", benchmark)
