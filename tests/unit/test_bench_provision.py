"""bench/provision.py's and bench/projection.py's pieces that run without a lab: the
apt-get baseline's command on a node (against stand-in apt tools), the growth ratio, the
control machine's CPU split and the projection to many nodes."""

import importlib.util
import os
import subprocess
import sys
import time

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("bench_provision", REPO / "bench/provision.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
spec = importlib.util.spec_from_file_location("bench_projection", REPO / "bench/projection.py")
projection = importlib.util.module_from_spec(spec)
spec.loader.exec_module(projection)

APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$LOG"
"""
# The archive knows slurmd and munge; enroot came from Kiln's artifact URL.
APT_CACHE = """#!/bin/sh
for last; do :; done
case "$last" in slurmd|munge) exit 0;; *) exit 100;; esac
"""


def test_the_apt_baseline_installs_what_the_archive_has_through_the_proxy(tmp_path):
    for name, text in (("apt-get", APT_GET), ("apt-cache", APT_CACHE)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    log = tmp_path / "log"
    command = bench.apt_install_command({"slurmd", "enroot", "munge"}, "http://10.1.0.1:3142")
    done = subprocess.run(
        ["sh", "-c", command],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "LOG": str(log)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    proxy = "-o Acquire::http::Proxy=http://10.1.0.1:3142"
    assert log.read_text().splitlines() == [
        f"apt-get {proxy} update -qq",
        f"apt-get {proxy} install -y -qq --no-install-recommends munge slurmd",
    ]


def test_growth_is_the_time_ratio_over_the_node_ratio():
    curve = [{"nodes": 4, "first_s": 300.0}, {"nodes": 8, "first_s": 420.0}]
    curve.append({"nodes": 16, "first_s": 900.0})
    assert bench.growth(curve, "first_s") == 0.75


def test_the_ansible_main_processes_are_the_ansible_playbooks_started_by_kiln(tmp_path):
    """Found among the children of the `kiln` process (here: this test's), by the script
    python runs, as ansible-runner starts it: one per part of a sliced run."""
    script = tmp_path / "ansible-playbook"
    script.write_text("import time\ntime.sleep(30)\n")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    playbooks = [subprocess.Popen([sys.executable, str(script)]) for _ in range(2)]
    try:
        # A loaded host may not have shown a child's new command line yet: a few seconds.
        wanted, until = sorted(p.pid for p in playbooks), time.monotonic() + 5
        while sorted(bench.ansible_mains(os.getpid())) != wanted and time.monotonic() < until:
            time.sleep(0.05)
        assert sorted(bench.ansible_mains(os.getpid())) == wanted
        assert bench.own_cpu(playbooks[0].pid) >= 0.0
    finally:
        for child in (other, *playbooks):
            child.kill()
            child.wait()


def test_cpu_per_host_splits_the_tree_into_kiln_the_main_process_and_workers():
    cpu = {"total_s": 100.0, "kiln_s": 4.0, "ansible_main_s": 36.0}
    assert bench.per_host(cpu, 4) == {
        "total_s": 25.0,
        "kiln_s": 1.0,
        "ansible_main_s": 9.0,
        "workers_s": 15.0,
    }


def test_the_projection_fits_cost_per_run_and_per_host_and_takes_the_larger_bound():
    # Per run 20 s + 2 s per host in all, 10 s + 0.5 s per host in the main process.
    figures = {
        "controller_cpu_per_host": {
            f"first provision of {n} nodes": {
                "total_s": (20 + 2 * n) / n,
                "ansible_main_s": (10 + 0.5 * n) / n,
            }
            for n in (4, 8, 16)
        },
    }
    fitted = projection.fits(figures, "first")
    assert {k: tuple(round(x, 6) for x in v) for k, v in fitted.items()} == {
        "total_s": (20.0, 2.0),
        "ansible_main_s": (10.0, 0.5),
    }
    # 1,000 nodes on 16 cores (64 forks): main 510 s, total 2020 / 16 = 126 s; 16
    # waves of 300 s = 4800 s.
    assert projection.project(fitted, 300.0, 16, 1000) == {
        "cpu_bound_min": 8.5,
        "wave_bound_min": 80.0,
        "projected_min": 80.0,
    }
    # 10,000 nodes on 64 cores (256 forks): main 5010 s; 40 waves of 60 s = 2400 s.
    assert projection.project(fitted, 60.0, 64, 10000) == {
        "cpu_bound_min": 83.5,
        "wave_bound_min": 40.0,
        "projected_min": 83.5,
    }


def sliced_figures() -> dict:
    """A lab of 16 nodes re-provisioned in 1 and 4 slices: the 4 slices cost 3 x 5 s of
    CPU in all and 3 x 2 s of main process more than 1; its tail's parts' wall times."""
    per_slice = {1: (160.0, 50.0), 4: (175.0, 56.0)}
    return {
        "controller_cpu_per_host": {
            f"provision of 16 nodes in {k} slice(s)": {"total_s": t / 16, "ansible_main_s": m / 16}
            for k, (t, m) in per_slice.items()
        },
        "parts_wall_s": {
            "16 nodes in 4 slices": {
                **{f"slice-{k}": 140.0 for k in range(1, 5)},
                "controllers": 15.0,
                **{f"slurm-{k}": 6.0 + k for k in range(1, 5)},
            },
        },
    }


def test_a_slice_costs_what_one_more_slice_cost_in_the_bench_and_the_tail_its_parts():
    costs = projection.slice_costs(sliced_figures())
    assert {k: round(v, 6) for k, v in costs.items()} == {
        "total_s": 5.0,
        "ansible_main_s": 2.0,
        "controllers_wall_s": 15.0,
        "slurm_check_wall_s": 10.0,
    }


def test_a_sliced_no_op_is_its_slowest_bound_then_the_controllers_and_the_checks():
    costs = {"total_s": 5.0, "ansible_main_s": 2.0, "controllers_wall_s": 15.0}
    costs["slurm_check_wall_s"] = 10.0
    fitted = {"total_s": (0.0, 10.0), "ansible_main_s": (0.0, 3.0)}
    # 1,000 nodes, 2 machines of 16 cores (64 forks), 4 slices each: 125 nodes a slice,
    # main 2 + 375 = 377 s; a machine's CPU 4 x (5 + 1250) = 5020 s / 16 = 313.75 s;
    # 16 forks a slice: 8 waves of 30 s = 240 s. Tail: 15 + 2.4 s, 8 checks of 10 s.
    assert projection.project_sliced(fitted, costs, 30.0, 16, 1000, 2, 4) == {
        "slices_per_machine": 4,
        "nodes_per_slice": 125,
        "cpu_bound_min": 6.3,
        "wave_bound_min": 4.0,
        "tail_min": 1.6,
        "projected_min": 7.9,
    }
    # 64 slices a machine: slices of 8 nodes, main 26 s, the machine's CPU 64 x 85 s /
    # 16 = 340 s, one fork a slice: 8 waves (240 s); 340 s beats 4 slices' 377 s.
    assert projection.best_sliced(fitted, costs, 30.0, 16, 1000, 2, [1, 4, 64]) == {
        "slices_per_machine": 64,
        "nodes_per_slice": 8,
        "cpu_bound_min": 5.7,
        "wave_bound_min": 4.0,
        "tail_min": 1.6,
        "projected_min": 7.3,
    }
