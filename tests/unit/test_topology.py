"""kiln.topology on hand-written fabrics in both ibnetdiscover formats, synthetic fat
trees, the other sources, the writers (golden text) and the checks."""

from pathlib import Path

import pytest

from kiln.topology import checks, fabric_tree, ibnetdiscover, sources, synthetic, writers
from kiln.topology.model import Switch, Topology, TopologyError, safe_name

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "topology"
TWO_RAILS = FIXTURES / "two-rails.ibnetdiscover"


def build(path: Path, **selection) -> Topology:
    fabric = ibnetdiscover.parse(path.read_text(), path.name)
    return fabric_tree.build(fabric, fabric_tree.Selection(**selection), path.name)


def body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("# Generated"))


def test_default_format_two_rails():
    topo = build(TWO_RAILS)
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=ib-leaf-a1 Nodes=gpu[001-002]\n"
        "SwitchName=ib-leaf-a2 Nodes=gpu003\n"
        "SwitchName=ib-spine-1 Switches=ib-leaf-a[1-2]"
    )
    assert topo.notes == ["built from rail mlx5_0", "merged 1 redundant level-1 switches"]
    assert topo.warnings == [
        "skipped 2 HCAs without a host name (1 SHARP aggregation node, 1 unnamed)"
    ]


def test_rail_choice_and_unnamed_switch_gets_a_guid_name():
    topo = build(TWO_RAILS, hca_patterns=["mlx5_1"])
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=sw-b83fd2030000ab10 Nodes=gpu[001-003]\n"
        "SwitchName=ib-spine-1 Switches=sw-b83fd2030000ab10"
    )
    assert topo.notes[0] == "built from rail mlx5_1"


def test_storage_rail_never_becomes_a_leaf():
    names = set(build(TWO_RAILS, hca_patterns=["mlx5_[0-7]"]).switches)
    assert "stor-leaf" not in names
    # Even when only the storage rail is selected, compute leaves are not its parents.
    storage = build(TWO_RAILS, hca_patterns=["mlx5_8"])
    assert set(storage.switches) == {"stor-leaf"}


def test_ports_format_with_an_inactive_port():
    topo = build(FIXTURES / "two-leaves.ports")
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=ib-leaf-a1 Nodes=gpu[001-002]\n"
        "SwitchName=ib-leaf-a2 Nodes=gpu003\n"
        "SwitchName=ib-spine-1 Switches=ib-leaf-a[1-2]"
    )


def test_node_name_map_overrides_descriptions(tmp_path):
    mapping = tmp_path / "map"
    mapping.write_text('# comment\n0x0002c90300a00031 "gpu004 mlx5_0"\n')
    selection = fabric_tree.Selection(name_map=fabric_tree.read_name_map(mapping))
    topo = fabric_tree.build(ibnetdiscover.parse(TWO_RAILS.read_text()), selection)
    assert topo.switches["ib-leaf-a2"].nodes == {"gpu003", "gpu004"}


def test_node_name_map_with_a_duplicate_name(tmp_path):
    mapping = tmp_path / "map"
    mapping.write_text('0x1 "gpu001 mlx5_0"\n0x2 "gpu001 mlx5_0"\n')
    with pytest.raises(
        TopologyError, match=r"map:2: name 'gpu001 mlx5_0' is already given .* line 1"
    ):
        fabric_tree.read_name_map(mapping)


def test_garbage_and_truncated_input_name_the_line():
    with pytest.raises(TopologyError, match=r"x:2: not ibnetdiscover output: 'hello world'"):
        ibnetdiscover.parse('Switch\t2 "S-01"\t\t# "MF0;a:b/U1"\nhello world\n', "x")
    # Port lines are read when the tree needs them, so a cut dump fails the build.
    cut = TWO_RAILS.read_text().split('Ca\t1 "H-0002c90300a00021"')[0]
    with pytest.raises(TopologyError, match=r"cut: S-b83fd2030000aa\d0 is cabled to H-.*truncated"):
        fabric_tree.build(ibnetdiscover.parse(cut, "cut"), fabric_tree.Selection())
    no_hcas = TWO_RAILS.read_text().split('Ca\t1 "H-0002c90300a00001"')[0]
    with pytest.raises(TopologyError, match=r"the file describes no HCAs \(truncated output"):
        fabric_tree.build(ibnetdiscover.parse(no_hcas, "cut"), fabric_tree.Selection())
    broken = TWO_RAILS.read_text().replace('[1]\t"H-0002c90300a00021"', '[1]\t"H-0002c9', 1)
    line = next(n for n, text in enumerate(broken.splitlines(), 1) if '"H-0002c9[' in text)
    with pytest.raises(TopologyError, match=rf"broken:{line}: not ibnetdiscover output: '\[1\]"):
        fabric_tree.build(ibnetdiscover.parse(broken, "broken"), fabric_tree.Selection())
    with pytest.raises(TopologyError, match="no switches found"):
        ibnetdiscover.parse("", "empty")


@pytest.mark.parametrize("levels", [2, 3])
def test_synthetic_fat_trees_round_trip(levels):
    tree = synthetic.FatTree(
        nodes=200, rails=4, per_leaf=16, levels=levels, spines=4, pod_leaves=4, cores=2
    )
    topo = fabric_tree.build(ibnetdiscover.parse(synthetic.generate(tree)), fabric_tree.Selection())
    placed = {node: leaf.name for leaf in topo.leaves() for node in leaf.nodes}
    assert placed == tree.true_leaf
    assert topo.levels() == levels
    assert len([s for s in topo.switches.values() if s.level == levels - 1]) == 1


def test_output_is_byte_identical_for_the_same_input():
    tree = synthetic.FatTree(nodes=64, rails=2, per_leaf=8, levels=3, spines=2, pod_leaves=2)
    text = synthetic.generate(tree)
    outputs = {
        writers.render(fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection()), f)
        for f in ("tree",) * 3
    }
    assert len(outputs) == 1


def test_safe_names():
    assert safe_name("leaf 1/a", "x") == "leaf_1_a"
    assert safe_name("sw" + "1" * 20, "x") == "sw" + "1" * 20 + "x"
    assert safe_name("sw" + "1" * 19, "x") == "sw" + "1" * 19
    assert safe_name("///", "fallback") == "fallback"


def test_labels_source():
    topo = sources.from_labels(
        {
            "gpu001": ["spine1", "leaf1"],
            "gpu002": ["spine1", "leaf1"],
            "gpu003": ["spine1", "leaf2"],
        }
    )
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=leaf1 Nodes=gpu[001-002]\n"
        "SwitchName=leaf2 Nodes=gpu003\n"
        "SwitchName=spine1 Switches=leaf[1-2]"
    )


def test_labels_of_mixed_depth_are_rejected():
    with pytest.raises(
        TopologyError, match="host n2: switch sw2 is at level 1 here but at level 0"
    ):
        sources.from_labels({"n1": ["sw1", "sw2"], "n2": ["sw2", "sw3"]})


NVLINK = """\
gpu001: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766
gpu001: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766
gpu002: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766
gpu003: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766
gpu004: 0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f, 32766
gpu005: 0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f, 32766
"""


def test_nvlink_blocks_with_an_undersized_block_commented_out():
    topo = sources.from_nvlink(NVLINK, "nvl.txt")
    assert body(writers.block_conf(topo)) == (
        "BlockName=nvl01 Nodes=gpu[001-003]\n"
        "# BlockName=nvl02 Nodes=gpu[004-005]  (only 2 nodes, below the block size 3)\n"
        "BlockSizes=3"
    )


def test_nvlink_node_with_two_cliques():
    text = NVLINK + "gpu002: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 1\n"
    with pytest.raises(TopologyError, match=r"nvl.txt:3: the GPUs of gpu002 report different"):
        sources.from_nvlink(text, "nvl.txt")


def test_yaml_writer_golden():
    topo = sources.from_labels({"n1": ["s1", "l1"], "n2": ["s1", "l2"]})
    assert body(writers.topology_yaml(topo)) == (
        "- topology: default\n"
        "  cluster_default: true\n"
        "  tree:\n"
        "    switches:\n"
        "    - switch: l1\n"
        "      nodes: n1\n"
        "    - switch: l2\n"
        "      nodes: n2\n"
        "    - switch: s1\n"
        "      children: l[1-2]"
    )


def test_hand_written_file_round_trips(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text(
        "SwitchName=s1 Switches=l[1-2]\nSwitchName=l1 Nodes=n[1-2]\n"
        "SwitchName=l2 Nodes=n3  # rack 2\n"
    )
    topo = sources.from_file(conf)
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n3\nSwitchName=s1 Switches=l[1-2]"
    )
    as_yaml = tmp_path / "t.yaml"
    as_yaml.write_text("switches:\n  s1: {switches: [l1]}\n  l1: {nodes: 'n[1-2]'}\n")
    assert sources.from_file(as_yaml).switches["s1"].children == {"l1"}


def test_checks_missing_nodes_fail_or_go_to_a_catch_all():
    def topo():
        return sources.from_labels({"n1": ["s1", "l1"], "n2": ["s1", "l1"]})

    with pytest.raises(TopologyError, match=r"1 Slurm nodes are not in the topology source: n3"):
        checks.apply(topo(), {"n1", "n2", "n3"}, checks.MissingPolicy.FAIL)
    t = topo()
    checks.apply(t, {"n1", "n3"}, checks.MissingPolicy.CATCH_ALL)
    assert t.switches["kiln-unplaced"].nodes == {"n3"}
    assert "kiln-unplaced" in t.switches["s1"].children
    assert t.switches["l1"].nodes == {"n1"}  # n2 is not a Slurm node


def test_checks_refuse_an_empty_topology_and_a_node_under_two_leaves():
    with pytest.raises(TopologyError, match="places no node"):
        checks.apply(Topology(source="x"), None, checks.MissingPolicy.FAIL)
    twice = Topology(
        source="x", switches={"a": Switch("a", 0, nodes={"n1"}), "b": Switch("b", 0, nodes={"n1"})}
    )
    with pytest.raises(TopologyError, match="node n1 is under two of a leaf switch: a and b"):
        checks.apply(twice, None, checks.MissingPolicy.FAIL)


def test_pasted_and_hand_edited_dumps_read_the_same():
    """CRLF line ends, indented lines and upper-case GUIDs (a paste, a hand edit) give the
    same tree as ibnetdiscover's own output."""
    text = TWO_RAILS.read_text()
    want = fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection())
    pasted = "\r\n".join("  " + line for line in text.splitlines())
    edited = text.replace("H-0002c90300a00011", "H-0002C90300A00011")
    for variant in (pasted, edited):
        got = fabric_tree.build(ibnetdiscover.parse(variant), fabric_tree.Selection())
        assert writers.tree_conf(got) == writers.tree_conf(want)


def test_hcas_read_one_by_one_give_the_same_tree():
    """Most HCAs are read in bulk; a second port, a block listed twice, a longer
    description, a GUID selection and the same dump given twice take the slower paths,
    which must agree with it."""
    text = TWO_RAILS.read_text()
    want = fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection())
    port = '[1](2c90300a00002) \t"S-b83fd2030000aa10"[1]'
    header = text.index('Ca\t1 "H-0002c90300a00011"')
    block = text[text.rindex("vendid", 0, header) : text.index("\n\n", header)]
    variants = {
        "second port": text.replace(port, port + '\n[2](2c90300a00003) \t"S-b83fd2030000aa10"[9]'),
        "listed twice": text + "\n" + block,
        "three words": text.replace('"gpu001 mlx5_0"', '"gpu001 mlx5_0 port1"'),
    }
    for name, variant in variants.items():
        got = fabric_tree.build(ibnetdiscover.parse(variant), fabric_tree.Selection())
        assert writers.tree_conf(got) == writers.tree_conf(want), name
        assert got.warnings == want.warnings, name
    guids = {"2c90300a00001", "2c90300a00011", "2c90300a00021"}
    got = fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection(guids=guids))
    assert writers.tree_conf(got) == writers.tree_conf(want)
    twice = ibnetdiscover.Fabric()
    for _ in range(2):
        twice.merge(ibnetdiscover.parse(text))
    got = fabric_tree.build(twice, fabric_tree.Selection())
    assert writers.tree_conf(got) == writers.tree_conf(want)


def test_a_switch_header_gone_wrong_names_its_line():
    text = TWO_RAILS.read_text().replace('Switch\t40 "S-b83fd2030000aa20"', "Switch\tmystery", 1)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("Switch\tmystery"))
    with pytest.raises(TopologyError, match=rf"x:{line}: not ibnetdiscover output: 'Switch"):
        ibnetdiscover.parse(text, "x")
