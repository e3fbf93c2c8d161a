"""kiln.cuda_toolkit: which CUDA compiler and NCCL the nccl_tests role installs from
NVIDIA's repository for a node's driver, when it installs nothing, and what it refuses;
each plan compared whole."""

import json
from pathlib import Path

import pytest

from kiln import cuda_toolkit
from kiln.roles import nccl_tests
from tests.unit.test_filter_plugins import filters

DOCS = Path(__file__).resolve().parents[2] / "docs" / "nccl.md"
AUTO = {"toolkit": "auto", "cuda_version": "", "nccl_version": "", "cuda_home": "", "nccl_home": ""}
# Nothing installed: no release chosen, the homes left to the search.
NOTHING = {
    **dict.fromkeys(("fail", "cuda", "nccl", "cuda_home", "nccl_home"), ""),
    "packages": [],
    "pin": [],
    "install": False,
}
CUDA_13_0 = {
    "install": True,
    "fail": "",
    "cuda": "13.0",
    "nccl": "2.28.9-1+cuda13.0",
    "packages": [
        "cuda-nvcc-13-0",
        "cuda-cudart-dev-13-0",
        "libnccl2=2.28.9-1+cuda13.0",
        "libnccl-dev=2.28.9-1+cuda13.0",
    ],
    "pin": ["libnccl2", "libnccl-dev"],
    "cuda_home": "/usr/local/cuda-13.0",
    "nccl_home": "/usr",
}

# `apt-cache policy cuda-nvcc-13-0 cuda-cudart-dev-13-0 libnccl2 libnccl-dev` (apt 3.0) on
# a node with NVIDIA's debian12 repository, which has NCCL built for CUDA 13 only.
REPO = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages"


def policy_block(package: str, versions: list[str]) -> str:
    """One package's block, the newest version apt's candidate."""
    table = "".join(f"     {v} 500\n        500 {REPO}\n" for v in versions)
    return f"{package}:\n  Installed: (none)\n  Candidate: {versions[0]}\n  Version table:\n{table}"


NCCL_BUILDS = ["2.29.2-1+cuda13.1", "2.28.9-1+cuda13.0"]
POLICY = (
    policy_block("cuda-nvcc-13-0", ["13.0.88-1", "13.0.48-1"])
    + policy_block("cuda-cudart-dev-13-0", ["13.0.96-1"])
    + policy_block("libnccl2", NCCL_BUILDS)
    + policy_block("libnccl-dev", NCCL_BUILDS)
)


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.95.05", "13.0"),
        ("580", "13.0"),  # a branch, as nvidia_driver_version may give it
        ("595.12.01", "13.1"),  # newer than the table: its newest release
        ("570.195.03", "12.8"),
        ("565.57.01", "12.4"),  # between rows: the newest release it runs
        ("535.261.03", "12.2"),
    ],
)
def test_the_release_for_a_driver_is_the_newest_it_runs(driver, cuda):
    release = cuda_toolkit.for_driver(driver)
    assert release is not None and release.cuda == cuda


@pytest.mark.parametrize("driver", ["530.30.02", "", "none"])
def test_no_release_for_an_older_or_unknown_driver(driver):
    assert cuda_toolkit.for_driver(driver) is None


def test_the_table_is_newest_first_and_docs_list_every_row():
    drivers = [r.driver for r in cuda_toolkit.RELEASES]
    assert drivers == sorted(drivers, reverse=True)
    text = DOCS.read_text()
    for r in cuda_toolkit.RELEASES:
        assert f"| {r.driver} | {r.cuda} | `{r.nccl}` |" in text, r


def test_the_plan_for_a_node_whose_driver_comes_from_nvidias_repository():
    fact = json.dumps({"driver": {"installed": "", "pinned": "580.95.05"}})
    driver = cuda_toolkit.node_driver(fact, "")
    assert driver == "580.95.05"
    assert cuda_toolkit.plan(AUTO, "cuda-repo", True, driver) == CUDA_13_0


def test_the_driver_from_the_fact_else_the_setting():
    installed = json.dumps({"driver": {"installed": "580.105.08", "pinned": "580.95.05"}})
    assert cuda_toolkit.node_driver(installed, "570") == "580.105.08"
    assert cuda_toolkit.node_driver("", "570") == "570"
    assert cuda_toolkit.node_driver("not json", "") == ""
    assert cuda_toolkit.node_driver('{"driver": "x"}', "575") == "575"


@pytest.mark.parametrize(
    ("settings", "source", "repository"),
    [
        (AUTO, "debian", True),  # Debian's driver: no NVIDIA repository to take it from
        (AUTO, "preinstalled", False),  # a cloud image: its own toolkit, searched
        (AUTO, "cuda-repo", False),  # the driver role left the node alone: no GPU
        ({**AUTO, "cuda_home": "/usr/local/cuda"}, "cuda-repo", True),  # the operator's
        ({**AUTO, "nccl_home": "/opt/nccl"}, "cuda-repo", True),
        ({**AUTO, "toolkit": "none"}, "cuda-repo", True),
    ],
)
def test_nothing_is_installed_unless_asked_and_possible(settings, source, repository):
    assert cuda_toolkit.plan(settings, source, repository, "580.95.05") == NOTHING


def test_cuda_repo_installs_beside_another_driver_source_and_its_versions_win():
    forced = {**AUTO, "toolkit": "cuda-repo"}
    assert cuda_toolkit.plan(forced, "preinstalled", True, "580.95.05") == CUDA_13_0
    chosen = {**forced, "cuda_version": "12.9", "nccl_version": "2.28.9-1+cuda12.9"}
    assert cuda_toolkit.plan(chosen, "debian", True, "580.95.05") == {
        **CUDA_13_0,
        "cuda": "12.9",
        "nccl": "2.28.9-1+cuda12.9",
        "packages": [
            "cuda-nvcc-12-9",
            "cuda-cudart-dev-12-9",
            "libnccl2=2.28.9-1+cuda12.9",
            "libnccl-dev=2.28.9-1+cuda12.9",
        ],
        "cuda_home": "/usr/local/cuda-12.9",
    }
    # A release alone takes its NCCL from the table.
    assert cuda_toolkit.plan({**AUTO, "cuda_version": "12.8"}, "cuda-repo", True, "")["nccl"] == (
        "2.26.2-1+cuda12.8"
    )


@pytest.mark.parametrize(
    ("settings", "repository", "driver", "fail"),
    [
        (
            {**AUTO, "toolkit": "cuda-repo"},
            False,
            "580.95.05",
            "nccl_tests_toolkit cuda-repo: NVIDIA's CUDA repository is not configured on "
            "this node (nvidia_driver_source: cuda-repo adds it)",
        ),
        (
            AUTO,
            True,
            "",
            "nccl_tests: no CUDA release to install: no driver version is known on this node "
            "(the nvidia_driver role's kiln_gpu fact, nvidia_driver_version); set "
            "nccl_tests_cuda_version and nccl_tests_nccl_version",
        ),
        (
            AUTO,
            True,
            "530.30.02",
            "nccl_tests: no CUDA release to install: driver 530.30.02 is older than branch "
            "535; set nccl_tests_cuda_version and nccl_tests_nccl_version",
        ),
        (
            {**AUTO, "cuda_version": "13.0"},
            True,
            "570.195.03",
            "nccl_tests_cuda_version 13.0 needs driver branch 580 or newer; this node's is "
            "570.195.03",
        ),
    ],
)
def test_what_cannot_be_installed_is_refused_naming_the_variables(
    settings, repository, driver, fail
):
    assert cuda_toolkit.plan(settings, "cuda-repo", repository, driver) == {
        **NOTHING,
        "fail": fail,
    }


def test_settings_problems_one_line_each():
    assert cuda_toolkit.settings_problems(AUTO) == []
    assert cuda_toolkit.settings_problems({}) == []
    assert cuda_toolkit.settings_problems(
        {"toolkit": "apt", "cuda_version": "13", "nccl_version": "2.28.9"}
    ) == [
        "nccl_tests_toolkit 'apt': expected one of auto, cuda-repo, none",
        "nccl_tests_cuda_version '13': expected a CUDA release such as 13.0",
        "nccl_tests_nccl_version '2.28.9': expected a package version of NVIDIA's "
        "repository such as 2.28.9-1+cuda13.0",
    ]
    assert cuda_toolkit.settings_problems(
        {"cuda_version": "13.0", "nccl_version": "2.27.7-1+cuda12.9"}
    ) == [
        "nccl_tests_nccl_version 2.27.7-1+cuda12.9 is built for CUDA 12, "
        "nccl_tests_cuda_version 13.0 is CUDA 13"
    ]
    assert cuda_toolkit.settings_problems({"cuda_version": "12.6"}) == [
        "nccl_tests_cuda_version 12.6 needs nccl_tests_nccl_version: Kiln knows NCCL's "
        "build for 13.1, 13.0, 12.9, 12.8, 12.4, 12.2"
    ]
    # The nccl_tests role's check and `kiln inventory check` include them.
    pinned = {
        "version": "2.19.6",
        "sha256": "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae",
        "toolkit": "apt",
    }
    assert nccl_tests.settings_problems(pinned) == [
        "nccl_tests_toolkit 'apt': expected one of auto, cuda-repo, none"
    ]


def test_a_release_the_repository_does_not_offer_is_named_with_the_command():
    assert cuda_toolkit.not_offered(POLICY, CUDA_13_0) == ""
    older = cuda_toolkit.plan({**AUTO, "cuda_version": "12.8"}, "cuda-repo", True, "580")
    assert cuda_toolkit.not_offered(POLICY, older) == (
        "NVIDIA's repository on this node offers no cuda-nvcc-12-8; no cuda-cudart-dev-12-8;"
        " no libnccl2 2.26.2-1+cuda12.8 (offered: 2.29.2-1+cuda13.1, 2.28.9-1+cuda13.0);"
        " no libnccl-dev 2.26.2-1+cuda12.8 (offered: 2.29.2-1+cuda13.1, 2.28.9-1+cuda13.0):"
        " set nccl_tests_cuda_version and nccl_tests_nccl_version to a release it has"
        " (apt-cache madison cuda-nvcc-<X>-<Y> libnccl2)"
    )


def test_the_role_reaches_it_through_its_filters():
    offered = filters("kiln_nccl_tests")
    fact = '{"driver": {"installed": "", "pinned": "580.95.05"}}'
    plan = offered["kiln_cuda_toolkit_plan"](AUTO, "cuda-repo", True, fact, "")
    assert plan == CUDA_13_0
    assert offered["kiln_cuda_toolkit_plan"](AUTO, "cuda-repo", True, "", "580") == CUDA_13_0
    assert offered["kiln_cuda_toolkit_not_offered"](POLICY, plan) == ""
