"""`kiln topology` through the real process: output, summary, bad input and exit codes."""

from pathlib import Path

from kiln.errors import ExitCode
from tests.conftest import cluster_inventory, run_kiln

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "topology"


def test_generate_prints_the_file_and_a_summary():
    result = run_kiln(
        "topology", "generate", "--from", "ibnetdiscover", str(FIXTURES / "two-rails.ibnetdiscover")
    )
    assert result.returncode == 0, result.stderr
    assert "SwitchName=ib-spine-1 Switches=ib-leaf-a[1-2]" in result.stdout
    assert "topology: 2 levels, 3 switches, 2 leaves, 3 nodes" in result.stderr
    assert "note: built from rail mlx5_0" in result.stderr
    assert "warning: skipped 1 HCAs without a host name" in result.stderr


def test_a_real_shaped_ndr_fabric_keeps_its_spine_and_a_disconnected_one_can_fail(tmp_path):
    dgx = str(FIXTURES / "dgx-ndr-sharp.ibnetdiscover")
    result = run_kiln("topology", "generate", "--from", "ibnetdiscover", dgx)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "SwitchName=su1-r0-leaf Nodes=dgx[001-002],ufm-01",
        "SwitchName=su2-r0-leaf Nodes=dgx[003-004]",
        "SwitchName=spine-01 Switches=su1-r0-leaf,su2-r0-leaf",
    ]
    # Two dumps of separate fabrics: joined under kiln-root, or refused on request.
    other = tmp_path / "other.ibnetdiscover"
    other.write_text((FIXTURES / "two-rails.ibnetdiscover").read_text().replace("gpu00", "gpu10"))
    result = run_kiln("topology", "generate", "--from", "ibnetdiscover", dgx, str(other))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "SwitchName=kiln-root Switches=ib-spine-1,spine-01"
    assert "joined under kiln-root" in result.stderr
    result = run_kiln(
        "topology", "generate", "--from", "ibnetdiscover", dgx, str(other),
        "--disconnected", "fail",
    )  # fmt: skip
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr == (
        "kiln: error: the fabric has 2 top switches and none reaches every node: ib-spine-1 "
        "(3 nodes), spine-01 (5 nodes) (a partial dump, or two fabrics?); to join them under "
        "kiln-root: --disconnected root\n"
    )


def test_generate_to_a_file_from_inventory_labels(write_inventory, tmp_path):
    hosts = cluster_inventory(
        host_vars={
            "gpu001": {"topology_path": ["spine", "leaf1"]},
            "gpu002": {"topology_path": ["spine", "leaf2"]},
        }
    )
    out = tmp_path / "topology.conf"
    result = run_kiln(
        "topology",
        "generate",
        "--from",
        "labels",
        "-i",
        str(write_inventory(hosts)),
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines()[1:] == [
        "SwitchName=leaf1 Nodes=gpu001",
        "SwitchName=leaf2 Nodes=gpu002",
        "SwitchName=spine Switches=leaf[1-2]",
    ]


def test_labels_missing_on_some_compute_nodes(write_inventory):
    hosts = cluster_inventory(
        compute=("gpu001", "gpu002", "gpu003"),
        host_vars={"gpu001": {"topology_path": ["spine", "leaf1"]}},
    )
    result = run_kiln("topology", "generate", "--from", "labels", "-i", str(write_inventory(hosts)))
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.strip() == (
        "kiln: error: 2 compute nodes have no topology_path label: gpu[002-003]"
    )


def test_inventory_nodes_missing_from_the_fabric(write_inventory):
    inv = write_inventory(cluster_inventory(compute=("gpu001", "gpu002", "gpu003", "gpu009")))
    args = [
        "topology",
        "generate",
        "--from",
        "ibnetdiscover",
        str(FIXTURES / "two-rails.ibnetdiscover"),
        "-i",
        str(inv),
    ]
    failed = run_kiln(*args)
    assert failed.returncode == ExitCode.BAD_INPUT
    assert failed.stderr == (
        "kiln: error: 1 Slurm nodes are not in the topology source: gpu009; to place them "
        "under one switch: --missing catch-all\n"
    )
    placed = run_kiln(*args, "--missing", "catch-all")
    assert placed.returncode == 0
    assert "SwitchName=kiln-unplaced Nodes=gpu009" in placed.stdout


def test_nvlink_node_with_two_clique_ids(tmp_path):
    data = tmp_path / "nvlink.txt"
    data.write_text("gpu001: 6f8a0c4e-aaaa, 7\ngpu001: 6f8a0c4e-aaaa, 8\n")
    result = run_kiln("topology", "generate", "--from", "nvlink", str(data), "--format", "block")
    assert result.returncode == ExitCode.BAD_INPUT
    assert result.stderr.strip() == (
        f"kiln: error: {data}:1: the GPUs of gpu001 report different NVLink domains "
        "(6f8a0c4e-aaaa/7; 6f8a0c4e-aaaa/8)"
    )


def test_node_name_map_with_a_duplicate_name(tmp_path):
    mapping = tmp_path / "node-name-map"
    mapping.write_text('0x0002c90300a00001 "gpu001 mlx5_0"\n0x0002c90300a00011 "gpu001 mlx5_0"\n')
    result = run_kiln(
        "topology",
        "generate",
        "--from",
        "ibnetdiscover",
        str(FIXTURES / "two-rails.ibnetdiscover"),
        "--node-name-map",
        str(mapping),
    )
    assert result.returncode == ExitCode.BAD_INPUT
    assert "node-name-map:2: name 'gpu001 mlx5_0' is already given to another GUID" in result.stderr


def test_garbage_input_names_the_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("#\nthis is not a fabric\n")
    result = run_kiln("topology", "generate", "--from", "ibnetdiscover", str(junk))
    assert result.returncode == ExitCode.BAD_INPUT
    assert f"{junk}:2: not ibnetdiscover output" in result.stderr


def test_show_draws_the_tree():
    result = run_kiln(
        "topology", "show", "--from", "ibnetdiscover", str(FIXTURES / "two-rails.ibnetdiscover")
    )
    assert result.returncode == 0
    assert "ib-spine-1" in result.stdout
    assert "ib-leaf-a1: gpu[001-002] (2)" in result.stdout


def test_block_sizes_that_place_no_block_are_refused(tmp_path):
    nvlink = tmp_path / "nvl.txt"
    nvlink.write_text("gpu001: 6f8a0c4e, 1\ngpu002: 6f8a0c4e, 1\n")
    args = ("topology", "generate", "--from", "nvlink", str(nvlink), "--format", "block")
    too_big = run_kiln(*args, "--block-size", "5")
    assert too_big.returncode == ExitCode.BAD_INPUT
    assert too_big.stderr.strip() == (
        "kiln: error: block size 5 is larger than every block (the largest has 2 nodes)"
    )
    negative = run_kiln(*args, "--block-size", "-5")
    assert negative.returncode == ExitCode.BAD_INPUT
    assert "-5 is not in the range x>=1" in negative.stderr
    assert run_kiln(*args, "--block-size", "2").stdout.splitlines()[1:] == [
        "BlockName=nvl01 Nodes=gpu[001-002]",
        "BlockSizes=2",
    ]


def test_a_fabric_name_slurm_would_read_as_a_hostlist_never_reaches_the_file(tmp_path):
    """An HCA described as `gpu003,evil[1-9] mlx5_0` would add evil1..evil9 to its
    switch: skipped with a warning naming it, as HCAs no host owns are."""
    dump = tmp_path / "fabric.ibnetdiscover"
    text = (FIXTURES / "two-rails.ibnetdiscover").read_text()
    dump.write_text(text.replace('"gpu003 ', '"gpu003,evil[1-9] '))
    result = run_kiln("topology", "generate", "--from", "ibnetdiscover", str(dump))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"# Generated by Kiln from {dump}. Do not edit: regenerate instead.",
        "SwitchName=ib-leaf-a1 Nodes=gpu[001-002]",
        "SwitchName=ib-spine-1 Switches=ib-leaf-a1",
    ]
    assert result.stderr.splitlines() == [
        "topology: 2 levels, 2 switches, 1 leaves, 2 nodes, 2-2 nodes per leaf",
        "note: left out the switches' own HCAs (SHARP aggregation nodes: 1)",
        "note: built from rail mlx5_0",
        "note: merged 1 redundant level-1 switches",
        "warning: skipped 1 HCAs without a host name (a factory or empty description)",
        "warning: skipped 3 HCAs whose host name is not a Slurm node name "
        "('gpu003,evil[1-9]'): names may hold only letters, digits, '.', '_' and '-'",
    ]


def test_a_file_name_with_a_line_break_stays_in_the_header_comment(tmp_path):
    dump = tmp_path / "fabric\nSwitchName=evil Nodes=gpu001"
    dump.write_text((FIXTURES / "two-rails.ibnetdiscover").read_text())
    result = run_kiln("topology", "generate", "--from", "ibnetdiscover", str(dump))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        f"# Generated by Kiln from {tmp_path}/fabric?SwitchName=evil Nodes=gpu001. Do not edit: "
        "regenerate instead.",
        "SwitchName=ib-leaf-a1 Nodes=gpu[001-002]",
    ]
