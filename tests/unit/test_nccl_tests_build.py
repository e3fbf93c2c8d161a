"""kiln.roles.nccl_tests, nccl-tests built by Kiln: the release pinned together, the GPU
architectures, the stamp a build is judged stale by, and the make command for a
toolchain (NCCL from the CUDA repository's libnccl-dev or from a PyPI wheel, with and
without MPI), each result compared whole."""

import json

import pytest

from kiln.roles import nccl_tests
from tests import standins

REAL = standins.facts("nccl_tests", standins.NCCL_FACTS_DOC)

SHA = "85c65a240432a5bd8bf8598ac235582921a96e8a968a8a675d23419478a4ab9c"
SETTINGS = {
    "version": "2.19.6",
    "sha256": SHA,
    "base_url": "https://github.com/NVIDIA/nccl-tests/archive/refs/tags",
    "fetch": "control",
    "cuda_archs": [],
}
CUDA = {"home": "/usr/local/cuda", "version": "13.0.88", "lib": "/usr/local/cuda/lib64"}
MPI = {
    "home": "/usr/lib/x86_64-linux-gnu/openmpi",
    "version": "5.0.7",
    "lib": "/usr/lib/x86_64-linux-gnu/openmpi/lib",
}
SITE = "/usr/local/lib/python3.13/dist-packages"
WHEEL_NCCL = {
    "home": f"{SITE}/nvidia/nccl",
    "version": "2.27.7",
    "lib": f"{SITE}/nvidia/nccl/lib",
    "library": "libnccl.so.2",
}
DEB_NCCL = {
    "home": "/usr",
    "version": "2.27.7",
    "lib": "/usr/lib/x86_64-linux-gnu",
    "library": "libnccl.so",
}
TOP = "/usr/local/src/kiln-nccl-tests/nccl-tests-2.19.6"
BUILD = "/opt/nccl-tests/2.19.6"


def test_a_pinned_release_has_no_problems():
    assert nccl_tests.settings_problems(SETTINGS) == []
    assert nccl_tests.settings_problems({**SETTINGS, "cuda_archs": ["90", "100a", 120]}) == []
    assert nccl_tests.settings_problems({"version": ""}) == []  # nothing asked for
    assert nccl_tests.settings_problems({"cuda_archs": "90"}) == []


def test_every_problem_is_named():
    bad = {"version": "v2.19", "sha256": "abc", "fetch": "mirror", "cuda_archs": ["sm_90"]}
    assert nccl_tests.settings_problems(bad) == [
        "nccl_tests_version 'v2.19': expected a release such as 2.19.6",
        "nccl_tests_sha256 'abc' is not a sha256 (64 hex digits, lower case)"
        "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in",
        "nccl_tests_fetch 'mirror': expected one of control, node",
        "nccl_tests_cuda_archs ['sm_90']: expected a list of compute capabilities such as "
        "['90', '100']",
    ]
    assert nccl_tests.settings_problems(
        {"version": "2.19.6", "sha256": SHA, "cuda_archs": "90"}
    ) == [
        "nccl_tests_cuda_archs '90': expected a list of compute capabilities such as ['90', '100']",
    ]


def test_source_in_githubs_tag_archive_layout():
    assert nccl_tests.source("2.19.6", SHA, "http://mirror.site/nccl-tests/") == {
        "url": "http://mirror.site/nccl-tests/v2.19.6.tar.gz",
        "file": "nccl-tests-2.19.6.tar.gz",
        "top": "nccl-tests-2.19.6",
        "sha256": SHA,
    }


def test_where_the_programs_are():
    assert nccl_tests.build_dir("2.19.6") == BUILD
    assert nccl_tests.bin_dir("2.19.6") == f"{BUILD}/bin"
    assert nccl_tests.bin_dir("") == "/opt/nccl-tests/build"  # none pinned
    # The release's own list (docs/nccl.md's facts, from its src/Makefile).
    assert nccl_tests.programs(BUILD) == [f"{BUILD}/bin/{name}_perf" for name in REAL["programs"]]


def test_archs_configured_else_the_nodes_gpus_in_numeric_order():
    assert nccl_tests.archs(["100", "90", 90, "90a"], ["8.0"]) == ["90", "90a", "100"]
    # nvidia-smi --query-gpu=compute_cap --format=csv,noheader: one line per GPU.
    assert nccl_tests.archs([], ["9.0", "9.0", "10.0", "12.0", ""]) == ["90", "100", "120"]
    assert nccl_tests.archs([], ["[N/A]", " "]) == []
    assert nccl_tests.archs([], []) == []  # nccl-tests' own list


def test_gencode_one_flag_per_arch():
    assert nccl_tests.gencode(["90", "100a"]) == (
        "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100a,code=sm_100a"
    )


def test_make_with_nccl_from_a_wheel_and_mpi():
    toolchain = {"cuda": CUDA, "nccl": WHEEL_NCCL, "mpi": MPI}
    assert nccl_tests.make_command(TOP, BUILD, toolchain, ["90"], 16) == {
        "argv": [
            "make",
            "-C",
            TOP,
            "-j16",
            f"BUILDDIR={BUILD}/bin",
            "CUDA_HOME=/usr/local/cuda",
            f"NCCL_HOME={BUILD}/nccl",
            "MPI=1",
            "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi",
            "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90",
        ],
        "env": {
            "LD_RUN_PATH": f"{SITE}/nvidia/nccl/lib:/usr/lib/x86_64-linux-gnu/openmpi/lib:"
            "/usr/local/cuda/lib64"
        },
        # The wheel has libnccl.so.2 only; the Makefile links -lnccl.
        "nccl_link": [
            {"path": f"{BUILD}/nccl/include", "src": f"{SITE}/nvidia/nccl/include"},
            {"path": f"{BUILD}/nccl/lib/libnccl.so", "src": f"{SITE}/nvidia/nccl/lib/libnccl.so.2"},
        ],
    }


def test_make_with_libnccl_dev_without_mpi_and_nccl_tests_own_archs():
    toolchain = {"cuda": CUDA, "nccl": DEB_NCCL, "mpi": None}
    assert nccl_tests.make_command(TOP, BUILD, toolchain, [], 0) == {
        "argv": [
            "make",
            "-C",
            TOP,
            "-j1",
            f"BUILDDIR={BUILD}/bin",
            "CUDA_HOME=/usr/local/cuda",
            "NCCL_HOME=/usr",
        ],
        "env": {"LD_RUN_PATH": "/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64"},
        "nccl_link": [],
    }


def test_the_stamp_names_what_the_build_was_made_from():
    toolchain = {"cuda": CUDA, "nccl": WHEEL_NCCL, "mpi": MPI}
    stamp = nccl_tests.stamp("2.19.6", toolchain, ["90"])
    assert stamp == {
        "nccl_tests": "2.19.6",
        "cuda": {"home": "/usr/local/cuda", "version": "13.0.88"},
        "nccl": {"home": f"{SITE}/nvidia/nccl", "version": "2.27.7"},
        "mpi": {"home": "/usr/lib/x86_64-linux-gnu/openmpi", "version": "5.0.7"},
        "archs": ["90"],
    }
    assert json.loads(nccl_tests.stamp_text(stamp)) == stamp
    assert nccl_tests.stamp("2.19.6", {**toolchain, "mpi": None}, [])["mpi"] == {
        "home": "",
        "version": "",
    }


@pytest.mark.parametrize(
    "change",
    [
        {"cuda": {**CUDA, "version": "13.1.80"}},
        {"nccl": {**WHEEL_NCCL, "version": "2.28.3"}},
        {"mpi": {**MPI, "home": "/opt/hpcx/ompi"}},
        {"mpi": None},
    ],
    ids=["cuda", "nccl", "mpi", "mpi-gone"],
)
def test_a_changed_toolchain_changes_the_stamp(change):
    toolchain = {"cuda": CUDA, "nccl": WHEEL_NCCL, "mpi": MPI}
    before = nccl_tests.plan(SETTINGS, toolchain, ["9.0"], 4)["stamp"]
    assert nccl_tests.plan(SETTINGS, {**toolchain, **change}, ["9.0"], 4)["stamp"] != before
    assert nccl_tests.plan(SETTINGS, toolchain, ["9.0"], 8)["stamp"] == before  # not -j
    assert nccl_tests.plan(SETTINGS, toolchain, ["10.0"], 4)["stamp"] != before


def test_the_plan_for_a_node():
    toolchain = {"cuda": CUDA, "nccl": DEB_NCCL, "mpi": MPI}
    settings = {**SETTINGS, "base_url": "http://mirror.site/nccl-tests", "cuda_archs": ["90"]}
    assert nccl_tests.plan(settings, toolchain, ["10.0"], 2) == {
        "skip": "",
        "source": {
            "url": "http://mirror.site/nccl-tests/v2.19.6.tar.gz",
            "file": "nccl-tests-2.19.6.tar.gz",
            "top": "nccl-tests-2.19.6",
            "sha256": SHA,
        },
        "source_dir": "/usr/local/src/kiln-nccl-tests",
        "build_dir": BUILD,
        "bin_dir": f"{BUILD}/bin",
        "stamp_path": f"{BUILD}/kiln-build.json",
        "stamp": nccl_tests.stamp_text(nccl_tests.stamp("2.19.6", toolchain, ["90"])),
        "make": nccl_tests.make_command(TOP, BUILD, toolchain, ["90"], 2),
        "programs": nccl_tests.programs(BUILD),
    }


@pytest.mark.parametrize(
    "cuda, nccl, reason",
    [
        (None, DEB_NCCL, "no CUDA toolkit (bin/nvcc) on this node: nccl-tests not built"),
        (CUDA, None, "no NCCL (nccl.h) on this node: nccl-tests not built"),
        (
            None,
            None,
            "no CUDA toolkit (bin/nvcc) and no NCCL (nccl.h) on this node: nccl-tests not built",
        ),
    ],
)
def test_a_node_without_cuda_or_nccl_is_skipped(cuda, nccl, reason):
    assert nccl_tests.plan(SETTINGS, {"cuda": cuda, "nccl": nccl, "mpi": MPI}, [], 4) == {
        "skip": reason
    }
