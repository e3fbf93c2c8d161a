"""The suite registry (kiln.validation.registry) against every other place that names
the suites or their parts: the validate role's argument spec, defaults, settings and
task files, the CLI's --suite, the campaigns, the result layout and the profiles. A
suite added, renamed or dropped in one place only fails here. And what runs on the
nodes for it: kiln_node.prerequisites, the one look the role registers."""

import json
import re
import shlex
import sys
from dataclasses import fields

import pytest
import yaml
from click.testing import CliRunner

from kiln.campaigns import burn_in, validate
from kiln.commands.validate import validate as validate_command
from kiln.validation import collect, profiles, registry, suites
from kiln.validation import results as layout
from kiln_node import prerequisites
from tests.conftest import REPO
from tests.unit.test_validate_suites import SETTINGS, VALIDATE

ROLE = REPO / "roles" / "validate"


def role_yaml(path: str):
    return yaml.safe_load((ROLE / path).read_text())


def test_the_role_offers_exactly_the_registered_suites_in_their_order():
    spec = role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert spec["validate_suites"]["choices"] == list(registry.NAMES)
    assert role_yaml("defaults/main.yml")["validate_suites"] == list(registry.NAMES)
    # Each suite's sizes reach the role as validate_<section>_params.
    sections = [s.section for s in registry.SUITES.values() if s.section]
    assert all(f"validate_{section}_params" in spec for section in sections)
    assert set(sections) <= set(profiles.SECTIONS)


def test_each_suite_has_its_task_file_and_the_controller_runs_them_in_order():
    for name in registry.NAMES:
        assert (ROLE / "tasks" / f"{name}.yml").is_file(), name
    controller = role_yaml("tasks/controller.yml")
    block = next(t for t in controller if "block" in t)["block"]
    (run,) = [t for t in block if t.get("loop") == "{{ validate_suites }}"]
    assert run["ansible.builtin.include_tasks"] == "{{ _validate_suite }}.yml"
    # A burn-in round runs its suites by name, under the stress.
    round_ = next(t for t in role_yaml("tasks/burn_in.yml") if t["name"].startswith("Load"))
    included = {
        t["ansible.builtin.include_tasks"]
        for t in round_["block"]
        if "validate_suites" in str(t.get("when", ""))
    }
    assert included == {f"{name}.yml" for name in registry.BURN_IN}


def test_the_cli_and_the_campaigns_take_their_suites_from_the_registry():
    assert validate.SUITES == registry.NAMES == ("slurm", "storage", "collectives")
    assert burn_in.SUITES == list(registry.BURN_IN) == ["storage", "collectives"]
    help_text = CliRunner().invoke(validate_command, ["--help"]).output
    assert " ".join(registry.help_text().split()) in " ".join(help_text.split())
    assert registry.help_text() == "Comma-separated: slurm, storage, collectives (default all)."
    # --suite keeps the registry's order whatever order it was asked in.
    assert [s.name for s in registry.chosen(["collectives", "slurm"])] == ["slurm", "collectives"]


def test_every_result_file_belongs_to_one_suite_or_to_the_run():
    run_files = {
        layout.SLURM_STATE,
        layout.PREREQUISITES,
        layout.PAIRS,
        layout.BURN_IN_STEPS,
        layout.HEALTH,
        "burn_stress",
    }
    owned = [record for suite in registry.SUITES.values() for record in suite.records]
    assert len(owned) == len(set(owned))
    named = {
        name
        for key, name in vars(layout).items()
        if key.isupper() and isinstance(name, str) and key != "NODE_ROOT"
    }
    assert set(owned) | run_files == named | set(layout.NODE_KINDS)
    assert not set(owned) & run_files


def test_each_collector_is_a_function_of_collect_and_runs_only_for_its_suite(tmp_path):
    for suite in registry.SUITES.values():
        assert callable(getattr(collect, suite.collector)), suite.name
    # A run that wrote nothing: each suite asked for fails the tested node its own way.
    (tmp_path / layout.SLURM_STATE).write_text(json.dumps({"plan": {"test": ["n1"]}}))
    tests = {
        name: sorted({c.test for c in collect.collect(tmp_path, ["n1"], [name]).checks})
        for name in registry.NAMES
    }
    assert tests == {
        "slurm": ["slurm.mpi", "slurm.munge", "slurm.srun"],
        "storage": ["storage.cold_import", "storage.run"],
        "collectives": ["collectives.nccl_tests", "collectives.run"],
    }


def test_every_profile_test_and_check_is_named_after_a_suite():
    prefixes = {name.split(".")[0] for name in [*profiles.TESTS, *profiles.CHECKS]}
    assert prefixes == set(registry.NAMES)


def test_the_roles_settings_are_the_typed_settings_fields():
    declared = role_yaml("vars/main.yml")["_validate_settings"]
    assert list(declared) == [f.name for f in fields(suites.Settings)]
    assert list(SETTINGS) == list(declared)
    typed = suites.Settings.from_role(SETTINGS)
    assert (typed.reservation, typed.collectives["ranks_per_node"]) == ("kiln_validate", 8)


def test_a_setting_on_one_side_only_is_refused_by_name():
    with pytest.raises(ValueError) as raised:
        suites.Settings.from_role({**SETTINGS, "extra": 1})
    assert str(raised.value) == (
        "validate settings: unknown ['extra'], missing [] (roles/validate/vars/main.yml"
        " and kiln.validation.suites.Settings differ)"
    )
    lacking = {k: v for k, v in SETTINGS.items() if k not in ("cuda_home", "paths")}
    with pytest.raises(ValueError, match=r"unknown \[\], missing \['cuda_home', 'paths'\]"):
        suites.Settings.from_role(lacking)


def test_the_role_registers_one_look_and_python_reads_only_it():
    main = role_yaml("tasks/main.yml")
    registered = [t["register"] for t in main if "register" in t]
    assert registered == [suites.FOUND]
    (look,) = [t for t in main if t.get("register") == suites.FOUND]
    assert look["ansible.builtin.command"]["argv"] == (
        "{{ _validate_settings | kiln.cluster.kiln_validate_look }}"
    )
    # No other registered variable of the role is read by name in Python.
    named = {
        (path.name, found)
        for path in (REPO / "cli" / "kiln").rglob("*.py")
        for found in re.findall(r"[\"'](_validate_\w+)[\"']", path.read_text())
    }
    assert named == {("suites.py", suites.FOUND)}


def test_the_look_asks_for_what_the_suites_asked_for_need():
    look = VALIDATE["kiln_validate_look"]
    base = ["python3", "-m", "kiln_node.prerequisites"]
    nccl = ["--nccl-tests-dir", "/opt/nccl-tests/build", "--cuda-home", "", "--nccl-home", ""]
    mpi = ["--mpi-check", "/usr/local/libexec/kiln/kiln-mpi-check"]
    assert look(SETTINGS) == [*base, "--torch-python", "python3", *nccl, *mpi]
    assert look({**SETTINGS, "suites": ["storage"]}) == base
    assert look({**SETTINGS, "suites": ["slurm"]}) == [*base, *mpi]
    # An image brings nccl-tests: not looked for. A burn-in's stress needs torch.
    imaged = {**SETTINGS, "suites": ["collectives"], "nccl_tests_image": "img"}
    assert look(imaged) == [*base, "--torch-python", "python3"]
    hold = {**SETTINGS, "suites": ["storage"], "burn_in_step": "hold"}
    assert look(hold) == [*base, "--torch-python", "python3"]


def test_the_node_look_finds_what_is_there_and_records_why_torch_is_not(tmp_path, capsys):
    bin_dir = tmp_path / "nccl-tests"
    bin_dir.mkdir()
    (bin_dir / "all_reduce_perf").write_text("")
    check = tmp_path / "kiln-mpi-check"
    check.write_text("")
    # Python without its site packages: torch is not importable (the look runs the
    # interpreter setting as an argv, arguments included).
    isolated = f"{shlex.quote(sys.executable)} -S -I"
    code = prerequisites.main(
        ["--torch-python", isolated, "--nccl-tests-dir", str(bin_dir), "--mpi-check", str(check)]
    )
    printed = json.loads(capsys.readouterr().out)
    torch = printed.pop("torch")
    assert (code, printed) == (0, {"mpi_check": True, "nccl_tests": True, "toolchain": None})
    assert (torch["rc"], torch["stdout"]) == (1, "")
    assert torch["stderr"].endswith("ModuleNotFoundError: No module named 'torch'")
    # Read back as the role hands it over, the node lacks torch only.
    hostvars = {"n1": {suites.FOUND: {"rc": 0, "stdout": json.dumps({**printed, "torch": torch})}}}
    found = {"n1": suites.Found.on(hostvars, "n1")}
    assert suites.lacking(found, ["n1"], "") == {
        "torch": ["n1"],
        "nccl_tests": [],
        "mpi_check": [],
    }


def test_the_node_look_reports_the_toolchain_where_nccl_tests_are_missing(tmp_path):
    cuda = tmp_path / "cuda"
    found = prerequisites.look(
        torch_python=str(tmp_path / "no-python"),
        nccl_tests_dir=str(tmp_path / "none"),
        mpi_check=str(tmp_path / "none" / "kiln-mpi-check"),
        cuda_home=str(cuda),
        nccl_home=str(tmp_path / "nccl"),
    )
    assert found["torch"]["rc"] == 127  # the interpreter is not there
    assert (found["nccl_tests"], found["mpi_check"]) == (False, False)
    assert found["toolchain"] == {"cuda": None, "nccl": None, "mpi": found["toolchain"]["mpi"]}
    # Nothing asked: nothing looked at, every answer null.
    assert prerequisites.look() == {
        "torch": None,
        "nccl_tests": None,
        "toolchain": None,
        "mpi_check": None,
    }


def test_a_look_that_did_not_run_or_printed_no_json_finds_nothing():
    for registered in ({"skipped": True}, {"rc": 1, "stdout": "Traceback"}, {"stdout": "{"}):
        assert suites.Found.on({"n1": {suites.FOUND: registered}}, "n1") == suites.Found()
    assert suites.Found.on({}, "n1") == suites.Found()


def tasks_of(path) -> list[dict]:
    """Every task in a task file, those inside blocks too."""
    found = []
    for task in yaml.safe_load(path.read_text()) or []:
        found.append(task)
        for part in ("block", "rescue", "always"):
            found += [t for t in task.get(part, []) if isinstance(t, dict)]
    return found


def test_no_task_writes_a_record_the_records_are_pythons():
    """Every record of a run is written by kiln_node.records on the host that makes it,
    then fetched: no task copies content to the control node."""
    copies = {
        (path.name, task["name"])
        for path in sorted((ROLE / "tasks").glob("*.yml"))
        for task in tasks_of(path)
        if "ansible.builtin.copy" in task or task.get("delegate_to") == "localhost"
    }
    # The programs installed on the nodes, and the metrics file node_exporter reads.
    assert copies == {
        ("main.yml", "Install the validation probe, its launcher and the benchmarks"),
        ("act.yml", "Write the run's verdicts and figures as metrics"),
    }
    fetched = {
        task["ansible.builtin.fetch"]["dest"]
        for path in (ROLE / "tasks").glob("*.yml")
        for task in tasks_of(path)
        if "ansible.builtin.fetch" in task
    }
    assert fetched == {
        "{{ _validate_paths.results }}/{{ item }}",
        "{{ _validate_paths.results }}/{{ item }}/{{ inventory_hostname }}.json",
    }
