"""`--limit` and `--tags` checked before a run: a pattern that matches no host, or a
tag that no task has, is a typo. Ansible would run nothing and report success (tags),
or fail after starting (limit); Kiln stops first, with exit 2.

Ansible itself answers (`ansible-playbook --list-hosts --list-tags`), so host patterns
(groups, wildcards, `~regex`, `!` and `&`) and the plays' own host patterns mean exactly
what they mean in the run.
"""

import os
import re
import subprocess
from pathlib import Path

from kiln.errors import InputError
from kiln.inventory import ClusterSpec
from kiln.run import skips

# Tags every play accepts (Ansible's special tags).
SPECIAL_TAGS = {"all", "always", "never", "tagged", "untagged"}
_TASK_TAGS = re.compile(r"^\s*TASK TAGS: \[(.*)\]\s*$", re.MULTILINE)
_HOSTS = re.compile(r"^\s*hosts \((\d+)\):", re.MULTILINE)
NO_HOSTS = "leaves us with no hosts to target"


def check(
    playbook: Path,
    spec: ClusterSpec,
    limit: str | None,
    tags: str | None,
    skip_tags: str | None,
) -> None:
    if not (limit or tags or skip_tags):
        return
    for option, value in (("--tags", tags), ("--skip-tags", skip_tags)):
        if value is not None and not _split(value):  # "," would mean every task
            raise InputError(f"{option} {value!r}: names no tag")
    from kiln.run.execute import ansible_env

    argv = ["ansible-playbook", "--list-tags", "-i", str(spec.source), str(playbook)]
    if limit:
        argv += ["--list-hosts", "--limit", limit]
    try:
        done = subprocess.run(
            argv,
            env={**os.environ, **ansible_env()},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return  # the run itself will say what is wrong with Ansible
    if limit and (NO_HOSTS in done.stdout + done.stderr or _no_play_hosts(done.stdout)):
        raise InputError(
            f"host pattern {limit!r} matches no host that {playbook.name} targets in {spec.source}"
        )
    if done.returncode != 0:
        return  # a playbook Ansible cannot read: the run reports Ansible's own error
    known = {t for found in _TASK_TAGS.findall(done.stdout) for t in _split(found)}
    for what, value in (("tags to run", tags), ("tags to skip", skip_tags)):
        unknown = [t for t in _split(value or "") if t not in known | SPECIAL_TAGS]
        if unknown:
            raise InputError(
                f"{what} {','.join(unknown)}: no task of {playbook.name} has this tag"
                f" (its tags: {', '.join(sorted(known - {'always', *skips.OWN})) or 'none'})"
            )


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _no_play_hosts(listing: str) -> bool:
    """Every play lists zero hosts: the limit matched only hosts no play targets."""
    counts = [int(n) for n in _HOSTS.findall(listing)]
    return bool(counts) and not any(counts)
