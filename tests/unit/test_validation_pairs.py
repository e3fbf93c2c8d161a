"""Pairwise runs that find the slow node of a failed multi-node run."""

from kiln.validation import pairs
from kiln.validation.verdicts import Verdict
from tests.node_scripts import probe_launcher


def fake_fabric(slow: set[str]):
    """A pair passes unless one of its nodes is slow; records the rounds it ran."""
    rounds = []

    def run_round(index, chosen):
        rounds.append(chosen)
        return {pair: not (set(pair) & slow) for pair in chosen}

    return run_round, rounds


def test_first_round_pairs_every_node_and_the_odd_one_with_the_first():
    assert pairs.first_round(["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    assert pairs.first_round(["a", "b", "c"]) == [("a", "b"), ("c", "a")]


def test_one_slow_node_is_found_in_two_rounds():
    run_round, rounds = fake_fabric({"n3"})
    found = pairs.search(["n1", "n2", "n3", "n4", "n5", "n6"], run_round)
    assert found.slow == ["n3"]
    assert found.cleared == ["n1", "n2", "n4", "n5", "n6"]
    assert found.suspects == []
    assert rounds[1] == [("n3", "n1"), ("n4", "n2")]  # each suspect with a good partner
    judged = pairs.slow_judgements(
        found, 340.0, "all_reduce", "collectives.pairwise: ", "run", " (profile h100-sxm-8x-ib400)"
    )
    assert [(j.node, j.verdict) for j in judged] == [("n3", Verdict.FAIL)]
    assert "stays under 340 GB/s (profile h100-sxm-8x-ib400)" in judged[0].reason


def test_every_pair_failing_blames_no_node():
    run_round, rounds = fake_fabric({"a", "b", "c", "d"})
    found = pairs.search(["a", "b", "c", "d"], run_round)
    assert found.slow == [] and len(rounds) == 1
    assert found.note.startswith("every pair failed")


def test_a_healthy_first_round_needs_no_second():
    run_round, rounds = fake_fabric(set())
    found = pairs.search(["a", "b", "c"], run_round)
    assert found.slow == [] and found.suspects == [] and len(rounds) == 1


def test_pairs_sharing_a_node_run_in_different_waves():
    assert probe_launcher.waves([["s1", "g1"], ["s2", "g1"], ["s3", "g2"]]) == [
        [["s1", "g1"], ["s3", "g2"]],
        [["s2", "g1"]],
    ]


def test_a_failure_that_does_not_repeat_blames_no_node():
    first = {("a", "b"): True, ("c", "d"): False}
    findings, second = pairs.after_first(first)
    assert second == [("c", "a"), ("d", "b")]
    found = pairs.after_second(findings, dict.fromkeys(second, True))
    assert found.slow == [] and found.cleared == ["a", "b", "c", "d"]
    assert found.note.startswith("every suspect passed with a healthy partner")


def test_a_suspect_gets_a_partner_it_has_not_run_with():
    # c ran with a in round 1 (an odd node out pairs with the first); b is fresh for it
    findings, second = pairs.after_first({("a", "b"): True, ("c", "a"): False})
    assert findings.suspects == ["c"] and second == [("c", "b")]
