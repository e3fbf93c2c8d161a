"""The steps Kiln leaves out of a run by tag, before Ansible starts any worker for them.

A step skipped by `when` still costs a worker per host and its share of the control
machine's CPU (docs/performance.md); a step skipped by tag costs nothing. Each tag below
marks steps whose `when` is false in every run that skips the tag, so leaving them out
changes no result but the count of skipped ones (tests/unit/test_run_skips.py holds the
roles and playbooks to that). A plain `ansible-playbook` run skips the same steps by
their `when`.
"""

from collections.abc import Iterable

# Steps only a dry run takes (`ansible_check_mode` in their condition): the guards that
# stop it where a package was never installed, the "would install" messages.
DRY_RUN = "kiln_dry_run"
# Steps a role takes when base has not run before it in the same run (`--tags ROLE`,
# Molecule): its own facts gather, the node library, the driver's reboot judgment.
ROLE_ALONE = "kiln_role_alone"
# Steps only an image build takes (`kiln_image`): the stops after the packages.
IMAGE = "kiln_image"

OWN = (DRY_RUN, ROLE_ALONE, IMAGE)

# The playbook whose every run has base, and the pre-flight play before it, on every
# host before the other roles: where no --tags or --skip-tags leaves base out.
SITE = "site.yml"
IMAGE_PLAYBOOK = "image.yml"


def kiln_skips(playbook: str, tags: str | None, skip_tags: str | None, check: bool) -> list[str]:
    """The tags Kiln skips in a run of PLAYBOOK (its file name) with the operator's
    --tags and --skip-tags, in check mode or not."""
    skipped = []
    if not check:
        skipped.append(DRY_RUN)
    if playbook == SITE and not tags and not skip_tags:
        skipped.append(ROLE_ALONE)
    if playbook != IMAGE_PLAYBOOK:
        skipped.append(IMAGE)
    return skipped


def joined(theirs: str | None, ours: Iterable[str]) -> str | None:
    """One --skip-tags value: the operator's tags, then Kiln's."""
    names = [t.strip() for t in (theirs or "").split(",") if t.strip()]
    names += [t for t in ours if t not in names]
    return ",".join(names) or None
