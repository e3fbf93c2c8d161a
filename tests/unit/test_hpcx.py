"""kiln.roles.hpcx: the build each node takes, the URL checked against it, the module files,
and the settings refused before any node is touched."""

import pytest

from kiln import formats
from kiln.roles import hpcx

SHA = "6fb0a81ed1ced47412a7703c2ab98e8de5d28de0d8333c926fadc7063661e67a"
SETTINGS = {
    "version": "2.22.1",
    "sha256": SHA,
    "url": "",
    "base_url": "https://content.mellanox.com/hpc/hpc-x",
    "cuda": "12",
    "fetch": "control",
    "root": "/opt/hpcx",
}
TRIXIE = {"distribution": "Debian", "distribution_major_version": "13", "architecture": "x86_64"}
# dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\n': rdma-core installed, MLNX OFED's
# utilities removed with their configuration left (rc): inbox.
INBOX = "ii \tlibc6\nii \trdma-core\nrc \tmlnx-ofed-kernel-utils\n"
DOCA = "ii \trdma-core\nii \tdoca-ofed\n"


@pytest.mark.parametrize(
    ("distribution", "major", "build"),
    [
        ("Debian", "12", "ubuntu22.04"),
        ("Debian", "13", "ubuntu24.04"),
        ("Ubuntu", "22", "ubuntu22.04"),
        ("Ubuntu", "24", "ubuntu24.04"),
    ],
)
def test_debian_takes_the_ubuntu_build_of_its_glibc(distribution, major, build):
    flavour = hpcx.node_flavour(distribution, major, "x86_64", "inbox", "12", "2.22.1")
    assert flavour == hpcx.Flavour(distro=build, ofed="inbox", cuda="12", arch="x86_64")


@pytest.mark.parametrize(
    ("stack", "version", "ofed"),
    [
        ("doca-ofed", "2.22.1", "doca_ofed"),
        ("mlnx-ofed", "2.22.1", "doca_ofed"),
        ("mlnx-ofed", "2.18.1", "mlnx_ofed"),
        ("inbox", "2.22.1", "inbox"),
        ("none", "2.22.1", "inbox"),
    ],
)
def test_the_ofed_build_follows_the_rdma_stack_and_the_release(stack, version, ofed):
    assert hpcx.node_flavour("Ubuntu", "22", "x86_64", stack, "12", version).ofed == ofed


def test_no_build_for_an_unknown_release_or_architecture():
    with pytest.raises(hpcx.HpcxError, match=r"^HPC-X has no build for Debian 11 \(Kiln knows"):
        hpcx.node_flavour("Debian", "11", "x86_64", "inbox", "12", "2.22.1")
    with pytest.raises(hpcx.HpcxError, match=r"^HPC-X has no build for the ppc64le architecture$"):
        hpcx.node_flavour("Ubuntu", "22", "ppc64le", "inbox", "12", "2.22.1")


def test_the_whole_plan_of_a_debian_13_node_with_doca_ofed():
    assert hpcx.plan(SETTINGS, TRIXIE, DOCA) == {
        "flavour": {"distro": "ubuntu24.04", "ofed": "doca_ofed", "cuda": "12", "arch": "x86_64"},
        "url": "https://content.mellanox.com/hpc/hpc-x/v2.22.1/"
        "hpcx-v2.22.1-gcc-doca_ofed-ubuntu24.04-cuda12-x86_64.tbz",
        "tarball": "hpcx-v2.22.1-gcc-doca_ofed-ubuntu24.04-cuda12-x86_64.tbz",
        "sha256": SHA,
        "home": "/opt/hpcx/2.22.1",
        "build_prefix_pattern": r"/build-result/[^/\s]+",
        "refusal": "",
    }


def test_a_mirror_keeping_nvidias_layout_needs_only_its_base_url():
    settings = {**SETTINGS, "base_url": "http://mirror.site/hpcx/"}
    assert hpcx.plan(settings, TRIXIE, INBOX)["url"] == (
        "http://mirror.site/hpcx/v2.22.1/hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda12-x86_64.tbz"
    )


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        (
            "http://m/hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda12-x86_64.tbz",
            "",
        ),
        (
            "http://m/hpcx-v2.22.1-gcc-inbox-ubuntu22.04-cuda12-x86_64.tbz",
            "hpcx_url 'hpcx-v2.22.1-gcc-inbox-ubuntu22.04-cuda12-x86_64.tbz' is the build for "
            "ubuntu22.04 (this node takes ubuntu24.04)",
        ),
        (
            "http://m/hpcx-v2.22.1-gcc-doca_ofed-redhat9-cuda12-aarch64.tbz?token=1",
            "hpcx_url 'hpcx-v2.22.1-gcc-doca_ofed-redhat9-cuda12-aarch64.tbz' is the build for "
            "redhat9 (this node takes ubuntu24.04), doca_ofed (this node has the "
            "distribution's rdma-core), aarch64 (this node is x86_64)",
        ),
        (
            "http://m/hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda13-x86_64.tbz",
            "hpcx_url 'hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda13-x86_64.tbz' is the build for "
            "cuda13 (hpcx_cuda is 12)",
        ),
        (
            "http://m/hpcx.tbz",
            "hpcx_url 'hpcx.tbz' is not HPC-X 2.22.1 (its name does not say v2.22.1)",
        ),
        (
            "http://m/hpcx-v2.22.1-x86_64.tbz",
            "hpcx_url 'hpcx-v2.22.1-x86_64.tbz' does not say which distro, cuda, ofed it is "
            "built for; keep NVIDIA's file name on a mirror",
        ),
    ],
)
def test_a_url_is_checked_against_the_node(url, refusal):
    assert hpcx.plan({**SETTINGS, "url": url}, TRIXIE, INBOX)["refusal"] == refusal


def test_an_older_release_name_with_mlnx_ofed_linux_is_read():
    url = (
        "https://m/hpcx-v2.14-gcc-MLNX_OFED_LINUX-5-ubuntu24.04-cuda12-gdrcopy2-nccl2.16-x86_64.tbz"
    )
    assert hpcx.url_flavour(url) == {
        "distro": "ubuntu24.04",
        "cuda": "12",
        "ofed": "mlnx_ofed",
        "arch": "x86_64",
    }
    settings = {**SETTINGS, "version": "2.14", "url": url}
    assert hpcx.plan(settings, TRIXIE, DOCA)["refusal"] == ""


@pytest.mark.parametrize(
    ("cuda", "driver", "refusal"),
    [
        ("12", "", ""),  # no driver: CPU nodes load HPC-X's CUDA parts never
        ("12", "535.230.02", ""),
        ("13", "580", ""),
        (
            "13",
            "570.172.08",
            "HPC-X for CUDA 13 needs driver 580 or newer; the node's is 570.172.08",
        ),
        (
            "12",
            "470.256.02",
            "HPC-X for CUDA 12 needs driver 525 or newer; the node's is 470.256.02",
        ),
    ],
)
def test_a_cuda_build_needs_a_driver_new_enough(cuda, driver, refusal):
    settings = {**SETTINGS, "cuda": cuda}
    assert hpcx.plan(settings, TRIXIE, INBOX, driver)["refusal"] == refusal


def test_module_files_whole():
    files = hpcx.module_files("/opt/hpcx/2.22.1", "2.22.1", rebuilt=True)
    assert files == {
        "mpi/hpcx": (
            "#%Module1.0\n"
            "## Written by Kiln (role hpcx): NVIDIA HPC-X 2.22.1 (its own Open MPI)\n"
            "module-whatis {NVIDIA HPC-X 2.22.1 (its own Open MPI)}\n"
            "family mpi\n"
            "conflict mpi\n"
            "setenv MPI_HOME /opt/hpcx/2.22.1/ompi\n"
            "module use /opt/hpcx/2.22.1/modulefiles\n"
            "module load hpcx\n"
        ),
        "mpi/hpcx-pmix": (
            "#%Module1.0\n"
            "## Written by Kiln (role hpcx): NVIDIA HPC-X 2.22.1, Open MPI rebuilt against the"
            " system PMIx (srun --mpi=pmix)\n"
            "module-whatis {NVIDIA HPC-X 2.22.1, Open MPI rebuilt against the system PMIx"
            " (srun --mpi=pmix)}\n"
            "family mpi\n"
            "conflict mpi\n"
            "setenv MPI_HOME /opt/hpcx/2.22.1/hpcx-rebuild\n"
            "module use /opt/hpcx/2.22.1/modulefiles\n"
            "module load hpcx-rebuild\n"
        ),
    }
    assert list(hpcx.module_files("/opt/hpcx/2.22.1", "2.22.1", rebuilt=False)) == ["mpi/hpcx"]


@pytest.mark.parametrize(
    ("settings", "problems"),
    [
        ({}, []),
        ({"version": ""}, []),
        ({"version": "2.22.1", "sha256": SHA}, []),
        (
            {"version": "2.22.1"},
            [
                "hpcx_version 2.22.1 needs hpcx_sha256: the tarball's sha256 (64 hex digits)"
                "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in"
            ],
        ),
        (
            {"version": "latest", "sha256": SHA.upper(), "cuda": "10", "fetch": "rsync"},
            [
                "hpcx_version 'latest': expected a release such as 2.22.1",
                f"hpcx_sha256 {SHA.upper()!r} is not a sha256 (64 hex digits, lower case)"
                "; `kiln inventory pins -i INVENTORY --write` fetches it and fills it in",
                "hpcx_fetch 'rsync': expected one of control, node",
                "hpcx_cuda '10': HPC-X is built for CUDA 11, 12, 13",
            ],
        ),
        (
            {"version": "2.22.1", "sha256": SHA, "root": "opt/hpcx"},
            [f"hpcx_root 'opt/hpcx': {formats.PATH_RULE}"],
        ),
        (
            {"version": "2.22.1", "sha256": SHA, "root": "/opt/hpcx/../../etc"},
            [f"hpcx_root '/opt/hpcx/../../etc': {formats.PATH_RULE}"],
        ),
    ],
)
def test_settings_refused_before_any_node_is_touched(settings, problems):
    assert hpcx.settings_problems(settings) == problems
