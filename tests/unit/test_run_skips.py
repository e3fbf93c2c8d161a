"""The steps Kiln leaves out by tag (kiln.run.skips): which runs skip which tags, and the
roles and playbooks held to the tags' promise: a step carries a tag exactly where its
`when` is false in every run that skips the tag."""

from pathlib import Path

import pytest
import yaml

from kiln.run import skips
from kiln.run.execute import RunRequest, _cmdline

ROOT = Path(__file__).resolve().parents[2]

ALONE_CONDITIONS = {
    "base_facts_gathered is not defined",
    "node_library_dir is not defined",
    "kiln_preflight_passed is not defined",
}
# Steps with a role-alone condition that a whole site.yml run does take: the node
# library's own install (base's import of it sets node_library_dir), and HPC-X's gather in
# the pre-flight play, which runs before base.
ALONE_UNTAGGED = {
    ("roles/node_library/tasks/main.yml", "Install Kiln's node library once per run"),
    ("roles/hpcx/tasks/preflight_plan.yml", "Pre-flight: read the node's OS"),
}
IMAGE_CONDITION = "kiln_image | default(false) | bool"


@pytest.mark.parametrize(
    ("playbook", "tags", "skip_tags", "check", "expected"),
    [
        ("site.yml", None, None, False, ["kiln_dry_run", "kiln_role_alone", "kiln_image"]),
        ("site.yml", None, None, True, ["kiln_role_alone", "kiln_image"]),
        # base is left out, or may be: each role takes its own steps again.
        ("site.yml", "slurm", None, False, ["kiln_dry_run", "kiln_image"]),
        ("site.yml", None, "base", False, ["kiln_dry_run", "kiln_image"]),
        ("slurm.yml", None, None, False, ["kiln_dry_run", "kiln_image"]),
        ("image.yml", None, None, False, ["kiln_dry_run"]),
        ("drift-check.yml", None, None, True, ["kiln_image"]),
    ],
)
def test_which_runs_skip_which_tags(playbook, tags, skip_tags, check, expected):
    assert skips.kiln_skips(playbook, tags, skip_tags, check) == expected


def test_the_operators_skips_come_first_and_none_twice():
    assert skips.joined(" base, slurm ", ["kiln_dry_run", "slurm"]) == "base,slurm,kiln_dry_run"
    assert skips.joined(None, ["kiln_image"]) == "kiln_image"
    assert skips.joined("", []) is None


def test_ansible_playbooks_command_line_carries_them(tmp_path):
    site = Path("/content/playbooks/site.yml")
    request = RunRequest(playbook="site", inventory=None, check=True, skip_tags="monitoring")
    assert _cmdline(request, site, None) == ("--check --skip-tags monitoring,kiln_image")
    request = RunRequest(playbook="site", inventory=None)
    extra = tmp_path / "their vars.json"
    assert _cmdline(request, site, extra) == (
        f"-e '@{extra}' --skip-tags kiln_dry_run,kiln_role_alone,kiln_image"
    )
    image = Path("/content/playbooks/image.yml")
    assert _cmdline(RunRequest(playbook="image", inventory=None), image, None) == (
        "--skip-tags kiln_dry_run"
    )


def _steps(tasks, path):
    """(file, task) for every task of a task list, blocks' included."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        yield path, task
        for part in ("block", "rescue", "always"):
            yield from _steps(task.get(part), path)


def _all_steps():
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/tasks/*.yml")]):
        yield from _steps(yaml.safe_load(path.read_text()), path)
    for path in sorted(ROOT.glob("playbooks/*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _steps(play.get(section), path)


def _conditions(task) -> list[str]:
    when = task.get("when", [])
    return [str(c).strip() for c in (when if isinstance(when, list) else [when])]


def _tags(task) -> set[str]:
    tags = task.get("tags", [])
    return set(tags if isinstance(tags, list) else [tags])


def _dry_run_only(conditions: list[str]) -> bool:
    return any(
        c == "ansible_check_mode" or c.startswith("ansible_check_mode and ") for c in conditions
    )


def test_each_tag_marks_exactly_the_steps_its_runs_never_take():
    wrong = []
    tagged = {tag: 0 for tag in skips.OWN}
    for path, task in _all_steps():
        where = (str(path.relative_to(ROOT)), task.get("name", ""))
        conditions, tags = _conditions(task), _tags(task)
        for tag in tags & set(skips.OWN):
            tagged[tag] += 1
        expected = set()
        if _dry_run_only(conditions):
            expected.add(skips.DRY_RUN)
        if ALONE_CONDITIONS & set(conditions) and where not in ALONE_UNTAGGED:
            expected.add(skips.ROLE_ALONE)
        if IMAGE_CONDITION in conditions:
            expected.add(skips.IMAGE)
        if tags & set(skips.OWN) != expected:
            wrong.append((*where, sorted(tags & set(skips.OWN)), sorted(expected)))
    assert wrong == []
    # The walk found the steps it judges (a walk that read nothing passes nothing).
    assert tagged == {"kiln_dry_run": 19, "kiln_role_alone": 36, "kiln_image": 5}


def test_the_untagged_exceptions_still_exist():
    found = {
        (str(path.relative_to(ROOT)), task.get("name", ""))
        for path, task in _all_steps()
        if ALONE_CONDITIONS & set(_conditions(task))
    }
    assert found >= ALONE_UNTAGGED
