"""Reference profiles and verdicts."""

import pytest

from kiln.validation import profiles, verdicts
from kiln.validation.profiles import ProfileError
from kiln.validation.verdicts import Judgement, Threshold, Verdict


def test_shipped_profiles_load_and_name_only_known_tests():
    names = profiles.shipped()
    assert {"h100-sxm-8x-ib400", "h200-sxm-8x-ib400", "a100-sxm-8x", "lab-cpu"} <= set(names)
    for name in names:
        profile = profiles.load(name)
        assert profile.thresholds and set(profile.thresholds) <= set(profiles.TESTS)


def test_inheritance():
    h100 = profiles.load("h100-sxm-8x-ib400")
    h200 = profiles.load("h200-sxm-8x-ib400")
    a100 = profiles.load("a100-sxm-8x")
    assert h200.thresholds == h100.thresholds
    assert a100.thresholds["collectives.all_reduce.single_node"] == 200
    assert a100.thresholds["storage.seq_read"] == h100.thresholds["storage.seq_read"]


def test_operator_profile_extends_a_shipped_one(tmp_path):
    mine = tmp_path / "ours.yaml"
    mine.write_text(
        "extends: h100-sxm-8x-ib400\nwarn_band_percent: 10\nthresholds:\n  storage.seq_read: 4000\n"
    )
    profile = profiles.load(str(mine))
    assert profile.name == "ours"
    assert profile.thresholds["storage.seq_read"] == 4000
    assert profile.thresholds["collectives.all_reduce.multi_node"] == 340
    assert profile.warn_band_percent == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "thresholds:\n  storage.seq_raed: 10\n",
            "unknown test 'storage.seq_raed'; did you mean 'storage.seq_read'",
        ),
        (
            "thresholds:\n  storage.seq_read: fast\n",
            "storage.seq_read: expected a non-negative number",
        ),
        (
            "thresholds:\n  collectives.all_reduce.multi_node: .nan\n",
            "collectives.all_reduce.multi_node: expected a non-negative number, got nan",
        ),
        ("outlier_percent: .inf\n", "outlier_percent: expected a non-negative number, got inf"),
        ("thresholds: [1]\n", "'thresholds' must map test names to numbers"),
        ("treshold: {}\n", "unknown key 'treshold'"),
        ("extends: nope\n", "unknown profile 'nope'; shipped: a100-sxm-8x"),
        ("a: [\n", "YAML does not parse"),
    ],
)
def test_bad_profiles(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message.replace("(", r"\(").replace("[", r"\[")):
        profiles.load(str(path))


def test_extends_cycle(tmp_path):
    (tmp_path / "a.yaml").write_text(f"extends: {tmp_path}/b.yaml\n")
    (tmp_path / "b.yaml").write_text(f"extends: {tmp_path}/a.yaml\n")
    with pytest.raises(ProfileError, match="extends itself"):
        profiles.load(str(tmp_path / "a.yaml"))


def test_unknown_profile_name():
    with pytest.raises(ProfileError, match="unknown profile 'h100'; shipped: "):
        profiles.load("h100")


def test_verdicts_minimum_with_warn_band():
    t = Threshold(1000, True, "profile p")
    fail = verdicts.judge("n1", "storage.seq_read", "/shared", 412, "MB/s", t)
    assert fail.verdict is Verdict.FAIL
    assert fail.reason == "storage.seq_read /shared 412 MB/s < 1000 MB/s (profile p)"
    assert (
        verdicts.judge("n1", "storage.seq_read", "/shared", 1030, "MB/s", t).verdict is Verdict.WARN
    )
    assert (
        verdicts.judge("n1", "storage.seq_read", "/shared", 1100, "MB/s", t).verdict is Verdict.PASS
    )


@pytest.mark.parametrize("threshold", [Threshold(1000, True, "profile p"), None])
def test_a_value_that_is_no_number_fails_whatever_the_threshold(threshold):
    """NaN passes every comparison; Infinity beats every floor: neither is a measurement
    (fio's or a probe's numbers are read with Python's json, which takes both). The
    judgement keeps no value, so the report holds only numbers JSON has."""
    for value, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")):
        judged = verdicts.judge("n1", "storage.seq_read", "/shared", value, "MB/s", threshold)
        assert judged == Judgement(
            "n1",
            "storage.seq_read",
            "/shared",
            None,
            "MB/s",
            Verdict.FAIL,
            f"storage.seq_read /shared: no measurement ({shown} MB/s)",
            threshold.limit if threshold else None,
        )


def test_verdicts_maximum():
    t = Threshold(60, False, "profile p")
    assert verdicts.judge("n", "storage.cold_import_s", "", 75, "s", t).reason == (
        "storage.cold_import_s 75 s > 60 s (profile p)"
    )
    assert verdicts.judge("n", "storage.cold_import_s", "", 58, "s", t).verdict is Verdict.WARN
    assert verdicts.judge("n", "storage.cold_import_s", "", 20, "s", t).verdict is Verdict.PASS


def test_outliers_need_three_peers_and_keep_failures():
    def j(node, value, verdict=Verdict.PASS):
        return verdicts.Judgement(node, "storage.seq_read", "/shared", value, "MB/s", verdict, "")

    two = [j("a", 100), j("b", 10)]
    assert verdicts.outliers(two, 15, {"storage.seq_read": True}) == two
    fleet = [j("a", 100), j("b", 98), j("c", 102), j("d", 70), j("e", 5, Verdict.FAIL)]
    judged = {x.node: x for x in verdicts.outliers(fleet, 15, {"storage.seq_read": True})}
    assert judged["d"].verdict is Verdict.FAIL
    assert judged["d"].reason.startswith("storage.seq_read /shared 70 MB/s < 83")
    assert judged["e"] is fleet[4]
    assert {judged[n].verdict for n in "abc"} == {Verdict.PASS}


def test_suite_settings_are_checked_after_extends(tmp_path):
    """Each setting in its range, and pairs in order across the base and the profile:
    lab-cpu's max_bytes is 4 MiB, so a min_bytes of 8 MiB would run no size at all."""
    mine = tmp_path / "ours.yaml"
    mine.write_text("extends: lab-cpu\ncollectives: {min_bytes: 8388608}\n")
    with pytest.raises(ProfileError) as refused:
        profiles.load(str(mine))
    assert refused.value.message == (
        f"{mine}: collectives.min_bytes 8388608: must be at most collectives.max_bytes (4194304)"
    )
    mine.write_text("extends: lab-cpu\nstorage: {numjobs: 8, block_size: 128k}\n")
    assert (
        profiles.load(str(mine)).storage["numjobs"],
        profiles.load("lab-cpu").storage["numjobs"],
    ) == (8, 2)
