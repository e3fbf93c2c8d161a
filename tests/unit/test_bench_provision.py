"""bench/provision.py's pieces that run without a lab: the apt-get baseline's command on
a node (against stand-in apt tools) and the growth ratio."""

import importlib.util
import subprocess

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("bench_provision", REPO / "bench/provision.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

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
