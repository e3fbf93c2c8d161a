"""One naming style per kind of file, so a newcomer can guess a name: playbooks and task
files in underscores, as Ansible's role names and variables are; the programs the roles
install on the nodes as `kiln-<what>`, commands without a suffix; per-OS variables
named for the facts that choose them (vars/Debian-12.yml, default.yml the fallback)."""

import fnmatch
import re
import tomllib

from tests.conftest import REPO

SNAKE = re.compile(r"^[a-z0-9_]+\.yml$")
NODE_PROGRAM = re.compile(r"^kiln-[a-z0-9-]+$")
PER_OS = re.compile(r"^(main|default|[A-Z][a-z]+(-[0-9]+)?)\.yml$")


def names(*patterns: str) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for pattern in patterns for p in REPO.glob(pattern))


def test_playbooks_task_files_and_scenarios_are_named_in_underscores():
    yaml_files = names("playbooks/**/*.y*ml", "roles/*/*/*.y*ml", "molecule/**/*.y*ml")
    per_os = names("roles/*/vars/*.y*ml")
    odd = [p for p in yaml_files if p not in per_os and not SNAKE.match(p.rsplit("/", 1)[1])]
    assert (len(yaml_files) > 100, odd) == (True, [])


def test_per_os_variables_are_named_for_the_distribution_and_release():
    odd = [p for p in names("roles/*/vars/*") if not PER_OS.match(p.rsplit("/", 1)[1])]
    assert odd == []


def test_every_node_program_is_kiln_dash_what_without_a_suffix():
    """Programs are the executables under roles/*/files: a shebang. The MPI check's C
    source is built on the node into kiln-mpi-check; kiln.lib is the metrics' shell
    library, sourced, not run."""
    programs = {
        str(p.relative_to(REPO))
        for p in REPO.glob("roles/*/files/*")
        if p.is_file() and p.read_bytes().startswith(b"#!")
    }
    odd = sorted(p for p in programs if not NODE_PROGRAM.match(p.rsplit("/", 1)[1]))
    assert (len(programs) >= 11, odd) == (True, [])


def test_ruff_checks_every_python_node_program():
    """They have no `.py`, so ruff reads them only where pyproject names them."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["ruff"]["extend-include"]
    python = sorted(
        str(p.relative_to(REPO))
        for p in REPO.glob("roles/*/files/*")
        if p.is_file() and p.read_bytes().startswith(b"#!/usr/bin/python3")
    )
    unread = [p for p in python if not any(fnmatch.fnmatch(p, g) for g in globs)]
    assert (len(python), unread) == (15, [])
