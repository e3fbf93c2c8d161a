"""kiln.topology on hand-written fabrics in both ibnetdiscover formats, synthetic fat
trees, the other sources, the writers (golden text) and the checks."""

from pathlib import Path

import pytest

from kiln.topology import fabric_tree, ibnetdiscover, policies, sources, writers
from kiln.topology.shape import Switch, Topology, TopologyError, safe_name
from tests import synthetic_fabric as synthetic

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
    assert topo.notes == [
        "left out the switches' own HCAs (SHARP aggregation nodes: 1)",
        "built from rail mlx5_0",
        "merged 1 redundant level-1 switches",
    ]
    assert topo.warnings == ["skipped 1 HCAs without a host name (a factory or empty description)"]


def test_rail_choice_and_unnamed_switch_gets_a_guid_name():
    topo = build(TWO_RAILS, hca_patterns=["mlx5_1"])
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=sw-b83fd2030000ab10 Nodes=gpu[001-003]\n"
        "SwitchName=ib-spine-1 Switches=sw-b83fd2030000ab10"
    )
    assert topo.notes[1] == "built from rail mlx5_1"


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


def whole_tree(topo: Topology) -> dict[str, tuple[int, set[str]]]:
    """Every switch: its level, and its nodes (a leaf) or its children (above)."""
    return {name: (s.level, s.nodes or s.children) for name, s in topo.switches.items()}


DGX = FIXTURES / "dgx-ndr-sharp.ibnetdiscover"


def test_a_fabric_with_aggregation_nodes_on_every_switch_keeps_its_spines():
    """Every Quantum switch shows its SHARP aggregation node as an HCA on port 65. Such a
    switch is still a spine; a UFM server sits on a leaf like a host; 'localhost HCA-N'
    on several hosts is no host; a factory description is no name."""
    topo = build(DGX)
    policies.apply(topo, None, policies.MissingPolicy.FAIL)
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=su1-r0-leaf Nodes=dgx[001-002],ufm-01\n"
        "SwitchName=su2-r0-leaf Nodes=dgx[003-004]\n"
        "SwitchName=spine-01 Switches=su1-r0-leaf,su2-r0-leaf"
    )
    assert whole_tree(topo) == {
        "su1-r0-leaf": (0, {"dgx001", "dgx002", "ufm-01"}),
        "su2-r0-leaf": (0, {"dgx003", "dgx004"}),
        "spine-01": (1, {"su1-r0-leaf", "su2-r0-leaf"}),
    }
    assert topo.notes == [
        "left out the switches' own HCAs (SHARP aggregation nodes: 6)",
        "built from rail mlx5_0",
        "merged 1 redundant level-1 switches",
    ]
    assert topo.warnings == [
        "skipped 1 HCAs without a host name (a factory or empty description)",
        "skipped 4 HCAs described as 'localhost ...' (under 4 leaves): one name on several "
        "HCAs of a rail is no host's own, as when a node description was never set; set "
        "each node's description (rdma-ndd, or /sys/class/infiniband/DEVICE/node_desc) or "
        "map the GUIDs with --node-name-map",
    ]
    # With the cluster's node list the UFM server is left out, and its leaf stays.
    topo = build(DGX)
    policies.apply(topo, {f"dgx00{i}" for i in range(1, 5)}, policies.MissingPolicy.FAIL)
    assert whole_tree(topo)["su1-r0-leaf"] == (0, {"dgx001", "dgx002"})
    assert topo.levels() == 2


def test_a_node_name_map_names_hosts_whose_description_was_never_set(tmp_path):
    text = DGX.read_text()
    guids = [
        line.split('"')[1][2:]
        for line in text.splitlines()
        if line.startswith("Ca") and "localhost HCA" in line
    ]
    names = ["dgx005 mlx5_0", "dgx005 mlx5_3", "dgx006 mlx5_0", "dgx006 mlx5_3"]
    mapping = tmp_path / "map"
    mapping.write_text("".join(f'0x{g} "{n}"\n' for g, n in zip(guids, names, strict=True)))
    selection = fabric_tree.Selection(name_map=fabric_tree.read_name_map(mapping))
    topo = fabric_tree.build(ibnetdiscover.parse(text), selection)
    assert whole_tree(topo)["su1-r0-leaf"] == (0, {"dgx001", "dgx002", "dgx005", "ufm-01"})
    assert whole_tree(topo)["su2-r0-leaf"] == (0, {"dgx003", "dgx004", "dgx006"})
    assert not any("localhost" in w for w in topo.warnings)


FABRICS = {
    "2 levels": {"levels": 2},
    "3 levels": {"levels": 3},
    "no aggregation nodes": {"levels": 3, "aggregation_nodes": False},
    "generic names": {"levels": 2, "generic": {5: "localhost", 40: "localhost", 77: "ubuntu"}},
    "UFM on a leaf": {"levels": 3, "ufm": True},
    "two islands": {"levels": 2, "islands": 2},
    "three islands, 3 levels": {"levels": 3, "islands": 3, "generic": {0: "ubuntu", 99: "ubuntu"}},
}


@pytest.mark.parametrize("shape", FABRICS.values(), ids=FABRICS.keys())
def test_synthetic_fabrics_round_trip_to_the_whole_tree(shape):
    """Every level, every switch's members and one root, on fabrics with what real ones
    have: aggregation nodes on every switch, generic names, a UFM host, several tops."""
    tree = synthetic.FatTree(nodes=200, rails=4, per_leaf=16, spines=4, pod_leaves=4, cores=2)
    for key, value in shape.items():
        setattr(tree, key, value)
    fabric = ibnetdiscover.parse(synthetic.generate(tree))
    topo = fabric_tree.build(fabric, fabric_tree.Selection())
    policies.apply(topo, tree.compute_hosts(), policies.MissingPolicy.FAIL)
    assert whole_tree(topo) == synthetic.expected(tree)
    children = set().union(*(s.children for s in topo.switches.values()))
    assert len(set(topo.switches) - children) == 1  # one top
    joined = [w for w in topo.warnings if "kiln-root" in w]
    assert len(joined) == (tree.islands > 1)


def test_aggregation_nodes_are_read_in_bulk(monkeypatch):
    """Only descriptions whose first word may be skipped are read one by one: one
    aggregation node per switch must not send every HCA down that path."""
    calls = []
    real = fabric_tree._host_of
    monkeypatch.setattr(fabric_tree, "_host_of", lambda desc: calls.append(desc) or real(desc))
    tree = synthetic.FatTree(nodes=256, rails=4, per_leaf=16, levels=2, spines=4)
    fabric = ibnetdiscover.parse(synthetic.generate(tree))
    topo = fabric_tree.build(fabric, fabric_tree.Selection())
    switches = len(fabric.switches())
    assert calls == [synthetic.AGGREGATION_NODE] * switches
    assert topo.levels() == 2


def test_several_tops_join_under_a_root_or_fail():
    tree = synthetic.FatTree(nodes=64, rails=2, per_leaf=8, levels=2, spines=2, islands=2)
    text = synthetic.generate(tree)
    topo = fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection())
    policies.apply(topo, None, policies.MissingPolicy.FAIL)
    assert body(writers.tree_conf(topo)).splitlines()[-3:] == [
        "SwitchName=i0-spine-00 Switches=i0-leaf-r0-[0000-0003]",
        "SwitchName=i1-spine-00 Switches=i1-leaf-r0-[0000-0003]",
        "SwitchName=kiln-root Switches=i0-spine-00,i1-spine-00",
    ]
    assert topo.warnings == [
        "2 top switches share no switch above them: i0-spine-00 (32 nodes), i1-spine-00 "
        "(32 nodes) (a partial dump, or two fabrics?); joined under kiln-root so that jobs "
        "can span them"
    ]
    topo = fabric_tree.build(ibnetdiscover.parse(text), fabric_tree.Selection())
    with pytest.raises(TopologyError, match=r"2 top switches and none reaches every node: i0-"):
        policies.apply(topo, None, policies.MissingPolicy.FAIL, policies.DisconnectedPolicy.FAIL)


def test_a_top_missing_a_cable_is_named_but_the_tree_stands():
    topo = sources.from_labels({"n1": ["s1", "l1"], "n2": ["s1", "l2"], "n3": ["s2", "l2"]})
    policies.apply(topo, None, policies.MissingPolicy.FAIL)
    assert "kiln-root" not in topo.switches
    assert topo.warnings == [
        "1 top switch reaches only part of the fabric that s1 reaches (s2): a missing or "
        "down cable?"
    ]


def test_unplaced_nodes_hang_under_the_root():
    # Under the one top of a connected tree...
    topo = sources.from_labels({"n1": ["s1", "l1"], "n2": ["s1", "l2"]})
    policies.apply(topo, {"n1", "n2", "n9"}, policies.MissingPolicy.CATCH_ALL)
    assert whole_tree(topo)["s1"] == (1, {"l1", "l2", "kiln-unplaced"})
    # ... under kiln-root when the source has several tops, or just one leaf.
    topo = sources.from_labels({"n1": ["l1"], "n2": ["l2"]})
    policies.apply(topo, {"n1", "n2", "n9"}, policies.MissingPolicy.CATCH_ALL)
    assert whole_tree(topo) == {
        "l1": (0, {"n1"}),
        "l2": (0, {"n2"}),
        "kiln-root": (1, {"l1", "l2", "kiln-unplaced"}),
        "kiln-unplaced": (0, {"n9"}),
    }
    topo = sources.from_labels({"n1": ["l1"]})
    policies.apply(topo, {"n1", "n9"}, policies.MissingPolicy.CATCH_ALL)
    assert whole_tree(topo)["kiln-root"] == (1, {"l1", "kiln-unplaced"})


def test_switches_left_empty_by_the_node_list_are_removed():
    topo = sources.from_labels(
        {"n1": ["core", "s1", "l1"], "ufm": ["core", "s2", "l2"], "n2": ["core", "s1", "l3"]}
    )
    policies.apply(topo, {"n1", "n2"}, policies.MissingPolicy.FAIL)
    assert whole_tree(topo) == {
        "core": (2, {"s1"}),
        "s1": (1, {"l1", "l3"}),
        "l1": (0, {"n1"}),
        "l3": (0, {"n2"}),
    }


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


@pytest.mark.parametrize(
    "line",
    [
        "gpu001,evil[1-9]: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766",
        "gpu001: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, 32766 evil",
        "gpu001: not-a-uuid, 32766",
        "gpu001: 6f8a0c4e-1b2c-4d5e-8f90-1234567890ab, ٣",
    ],
)
def test_an_nvlink_line_holds_a_host_a_uuid_and_a_clique_id_and_nothing_else(line):
    with pytest.raises(TopologyError) as refused:
        sources.from_nvlink(NVLINK + line + "\n", "nvl.txt")
    assert str(refused.value) == (
        f"nvl.txt:7: expected 'HOST: clusterUuid, cliqueId', got {line[:80]!r}"
    )


def test_nvlink_gpus_without_a_fabric_are_named_in_a_warning():
    text = NVLINK + "gpu006: N/A, N/A\ngpu007,[N/A],[N/A]\n"
    topo = sources.from_nvlink(text, "nvl.txt")
    assert topo.warnings == ["no NVLink domain reported by gpu[006-007]"]
    assert sorted(b.nodes for b in topo.blocks.values()) == [
        {"gpu001", "gpu002", "gpu003"},
        {"gpu004", "gpu005"},
    ]


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


def test_hand_written_file_round_trips():
    conf = (
        "SwitchName=s1 Switches=l[1-2]\nSwitchName=l1 Nodes=n[1-2]\n"
        "SwitchName=l2 Nodes=n3  # rack 2\n"
    )
    topo = sources.from_text(conf, "topology.conf")
    assert body(writers.tree_conf(topo)) == (
        "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n3\nSwitchName=s1 Switches=l[1-2]"
    )
    as_yaml = "switches:\n  s1: {switches: [l1]}\n  l1: {nodes: 'n[1-2]'}\n"
    assert sources.from_text(as_yaml, "t.yaml").switches["s1"].children == {"l1"}


def test_checks_missing_nodes_fail_or_go_to_a_catch_all():
    def topo():
        return sources.from_labels({"n1": ["s1", "l1"], "n2": ["s1", "l1"]})

    with pytest.raises(TopologyError, match=r"1 Slurm nodes are not in the topology source: n3"):
        policies.apply(topo(), {"n1", "n2", "n3"}, policies.MissingPolicy.FAIL)
    t = topo()
    policies.apply(t, {"n1", "n3"}, policies.MissingPolicy.CATCH_ALL)
    assert t.switches["kiln-unplaced"].nodes == {"n3"}
    assert "kiln-unplaced" in t.switches["s1"].children
    assert t.switches["l1"].nodes == {"n1"}  # n2 is not a Slurm node


def test_checks_refuse_an_empty_topology_and_a_node_under_two_leaves():
    with pytest.raises(TopologyError, match="places no node"):
        policies.apply(Topology(source="x"), None, policies.MissingPolicy.FAIL)
    twice = Topology(
        source="x", switches={"a": Switch("a", 0, nodes={"n1"}), "b": Switch("b", 0, nodes={"n1"})}
    )
    with pytest.raises(TopologyError, match="node n1 is under two of a leaf switch: a and b"):
        policies.apply(twice, None, policies.MissingPolicy.FAIL)


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


def test_node_name_map_with_a_guid_named_twice(tmp_path):
    mapping = tmp_path / "map"
    mapping.write_text('0x0002c90300a00031 "gpu004 mlx5_0"\n0x2c90300a00031 "gpu005 mlx5_0"\n')
    with pytest.raises(
        TopologyError, match=r"map:2: GUID 0x2c90300a00031 is already named on line 1"
    ):
        fabric_tree.read_name_map(mapping)
