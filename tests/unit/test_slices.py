"""kiln.run.slices (which runs a sliced provision is made of) and kiln.run.merge (one
summary from its parts)."""

import json

import pytest

from kiln import inventory
from kiln.errors import InputError
from kiln.run.events import Failure, HostCounts, RunSummary
from kiln.run.execute import RunRequest
from kiln.run.merge import merge
from kiln.run.slices import plan, split
from tests.conftest import cluster_inventory


def test_split_is_contiguous_and_even():
    nodes = [f"gpu{i:02d}" for i in range(1, 11)]
    assert split(nodes, 3) == [
        ["gpu01", "gpu02", "gpu03", "gpu04"],
        ["gpu05", "gpu06", "gpu07"],
        ["gpu08", "gpu09", "gpu10"],
    ]
    assert split(nodes, 1) == [nodes]
    assert split(["a", "b"], 2) == [["a"], ["b"]]


def provisioned(state_dir, host="ctl1"):
    """HOST's facts in Kiln's fact cache, as ansible-core 2.19's jsonfile writes them."""
    facts = state_dir / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"ansible_hostname": host, "ansible_os_family": "Debian"})
    (facts / f"s1_{host}").write_text(json.dumps({"__payload__": payload}))


@pytest.fixture
def spec(write_inventory, state_dir):
    provisioned(state_dir)
    hosts = cluster_inventory(compute=("gpu10", "gpu2", "gpu1", "gpu3", "gpu11"))
    hosts["all"]["children"]["slurm_login"] = {"hosts": {"login1": None}}
    return inventory.load(write_inventory(hosts))


def _shape(result):
    return [
        [
            (p.name, p.request.playbook, p.request.limit, p.request.extravars, p.request.check)
            for p in phase
        ]
        for phase in result.phases
    ]


def test_plan_slices_then_controllers_then_slurm_state(spec):
    result = plan(RunRequest(playbook="site.yml", inventory=spec), 2)
    assert (result.slices, result.note) == (2, None)
    sliced = {"kiln_slice": True}
    assert _shape(result) == [
        [
            ("slice-1", "site.yml", "gpu1,gpu2,gpu3", sliced, False),
            ("slice-2", "site.yml", "gpu10,gpu11", sliced, False),
        ],
        [("controllers", "site.yml", "ctl1,login1", {}, False)],
        [
            ("slurm-1", "slurm_state.yml", "gpu1,gpu2,gpu3", {}, False),
            ("slurm-2", "slurm_state.yml", "gpu10,gpu11", {}, False),
        ],
    ]


def test_more_slices_than_nodes_are_clamped_with_a_note(spec):
    result = plan(RunRequest(playbook="site.yml", inventory=spec), 9)
    assert result.slices == 5
    assert result.note == "5 compute node(s), so 5 slice(s)"
    assert [p.hosts for p in result.phases[0]] == [
        ["gpu1"],
        ["gpu2"],
        ["gpu3"],
        ["gpu10"],
        ["gpu11"],
    ]


def test_check_mode_goes_to_every_part_and_checks_no_slurm_state(spec):
    result = plan(RunRequest(playbook="site.yml", inventory=spec, check=True, diff=True), 2)
    assert len(result.phases) == 2  # check mode skips the Slurm state check anyway
    assert all(p.request.check and p.request.diff for phase in result.phases for p in phase)


@pytest.mark.parametrize(
    ("tags", "skip_tags", "phases"),
    [("base", None, 2), ("slurm", None, 3), ("base,slurm", None, 3), (None, "slurm", 2)],
)
def test_slurm_state_only_when_slurm_runs(spec, tags, skip_tags, phases):
    request = RunRequest(playbook="site.yml", inventory=spec, tags=tags, skip_tags=skip_tags)
    result = plan(request, 2)
    assert len(result.phases) == phases
    assert [p.request.tags for p in result.phases[0]] == [tags, tags]


def test_a_cluster_never_provisioned_is_refused(write_inventory):
    spec = inventory.load(write_inventory())
    with pytest.raises(InputError) as caught:
        plan(RunRequest(playbook="site.yml", inventory=spec), 2)
    assert caught.value.message == (
        "ctl1 has no cached facts (never provisioned from here): provision the cluster "
        "once unsliced; the slices' nodes take the munge key and slurmctld from it"
    )


def test_a_part_by_name_is_the_plans_own(spec):
    """`--part NAME`: the very run --slices N makes for NAME, its limit and variables."""
    result = plan(RunRequest(playbook="site.yml", inventory=spec, tags="slurm"), 2)
    assert [p.name for p in result.parts] == [
        "slice-1",
        "slice-2",
        "controllers",
        "slurm-1",
        "slurm-2",
    ]
    for name in ("slice-2", "controllers", "slurm-1"):
        assert result.part(name) is next(p for p in result.parts if p.name == name)
    chosen = result.part("slice-2")
    assert (chosen.hosts, chosen.request.limit, chosen.request.extravars) == (
        ["gpu10", "gpu11"],
        "gpu10,gpu11",
        {"kiln_slice": True},
    )
    assert (chosen.request.playbook, chosen.request.tags) == ("site.yml", "slurm")


@pytest.mark.parametrize(
    ("slices", "check", "name", "message"),
    [
        (
            2,
            False,
            "slice-3",
            "'slice-3': no such part of 2 slices (slice-1, slice-2, controllers, slurm-1, slurm-2)",
        ),
        # Clamped to the compute nodes: the names are those of the slices there are.
        (
            9,
            False,
            "slice-6",
            "'slice-6': no such part of 5 slices (slice-1, slice-2, slice-3, slice-4, "
            "slice-5, controllers, slurm-1, slurm-2, slurm-3, slurm-4, slurm-5)",
        ),
        # A dry run has no Slurm state check.
        (
            2,
            True,
            "slurm-1",
            "'slurm-1': no such part of 2 slices (slice-1, slice-2, controllers)",
        ),
        (
            2,
            False,
            "",
            "'': no such part of 2 slices (slice-1, slice-2, controllers, slurm-1, slurm-2)",
        ),
    ],
)
def test_an_unknown_part_is_refused_naming_the_parts_there_are(spec, slices, check, name, message):
    result = plan(RunRequest(playbook="site.yml", inventory=spec, check=check), slices)
    with pytest.raises(InputError) as caught:
        result.part(name)
    assert caught.value.message == message


def test_the_first_provision_is_read_from_the_shared_fact_cache(
    spec, state_dir, monkeypatch, tmp_path
):
    """Another control machine's part: its own state directory, the shared fact cache."""
    shared = tmp_path / "shared"
    provisioned(shared)  # ctl1's facts in shared/facts, as the first provision left them
    (state_dir / "facts" / "s1_ctl1").unlink()
    request = RunRequest(playbook="site.yml", inventory=spec)
    with pytest.raises(InputError) as caught:
        plan(request, 2)
    assert caught.value.message.startswith("ctl1 has no cached facts")
    monkeypatch.setenv("KILN_FACT_CACHE", str(shared / "facts"))
    assert plan(request, 2).part("slice-1").hosts == ["gpu1", "gpu2", "gpu3"]


def test_merge_sums_counts_and_keeps_every_failure():
    slice_1 = RunSummary(
        run="r",
        playbook="site.yml",
        status="failed",
        hosts={"gpu1": HostCounts(ok=10, changed=2), "gpu2": HostCounts(ok=3, failed=1)},
        failures=[Failure("gpu2", "base : Install", "disk full")],
        notes={"gpu1": ["no GPU"]},
    )
    slice_2 = RunSummary(
        run="r",
        playbook="site.yml",
        status="successful",
        hosts={"gpu3": HostCounts(unreachable=1)},
        failures=[Failure("gpu3", "Gathering", "no route", unreachable=True)],
    )
    controllers = RunSummary(
        run="r",
        playbook="site.yml",
        status="successful",
        hosts={"ctl1": HostCounts(ok=40, changed=1)},
        reboots={"gpu1": "driver 550"},
    )
    state = RunSummary(
        run="r",
        playbook="slurm_state.yml",
        status="successful",
        hosts={"gpu1": HostCounts(ok=2), "gpu2": HostCounts(ok=2)},
        notes={"gpu1": ["no GPU", "reboot pending"]},
    )
    merged = merge(
        "r",
        "site.yml",
        [
            ("slice-1", slice_1),
            ("slice-2", slice_2),
            ("controllers", controllers),
            ("slurm-1", state),
        ],
    )
    assert merged == RunSummary(
        run="r",
        playbook="site.yml",
        status="failed",
        hosts={
            "gpu1": HostCounts(ok=12, changed=2),
            "gpu2": HostCounts(ok=5, failed=1),
            "gpu3": HostCounts(unreachable=1),
            "ctl1": HostCounts(ok=40, changed=1),
        },
        failures=[
            Failure("gpu2", "base : Install", "disk full"),
            Failure("gpu3", "Gathering", "no route", unreachable=True),
        ],
        notes={"gpu1": ["no GPU", "reboot pending"]},
        reboots={"gpu1": "driver 550"},
    )
    assert int(merged.exit_code) == 4


def test_merge_names_the_part_of_an_error_and_the_worst_status():
    good = RunSummary(run="r", playbook="site.yml", status="successful")
    broken = RunSummary(run="r", playbook="site.yml", status="failed", error="no such role")
    canceled = RunSummary(run="r", playbook="site.yml", status="canceled")
    merged = merge("r", "site.yml", [("slice-1", good), ("controllers", broken)])
    assert (merged.status, merged.error, int(merged.exit_code)) == (
        "failed",
        "controllers: no such role",
        1,
    )
    assert merge("r", "site.yml", [("slice-1", broken), ("slice-2", canceled)]).status == "canceled"
