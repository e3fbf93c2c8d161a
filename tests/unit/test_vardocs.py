"""The variable tables in the docs are the roles' argument specs, not a copy that drifts."""

from kiln import paths, vardocs

DOCS = sorted(paths.content_root().glob("docs/*.md")) + sorted(
    paths.roles_dir().glob("*/README.md")
)


def test_every_role_has_a_generated_table_somewhere():
    marked = "".join(doc.read_text() for doc in DOCS)
    for role in ("base", "munge", "slurm", "autofs", "glusterfs_server"):
        assert f"<!-- kiln:variables {role} -->" in marked, role


def test_the_tables_are_up_to_date():
    stale = [
        str(d) for d in DOCS if vardocs.refresh(d.read_text(), paths.roles_dir()) != d.read_text()
    ]
    assert not stale, "run `make docs`"


def test_a_row_says_type_choices_default_and_meaning():
    table = vardocs.table(paths.roles_dir(), "slurm")
    row = next(line for line in table.splitlines() if line.startswith("| `slurm_topology_missing`"))
    assert row.startswith("| `slurm_topology_missing` | str: `fail`, `catch-all` | `fail` | ")


def test_refresh_replaces_only_the_marked_block():
    text = "intro\n<!-- kiln:variables munge -->\nold\n<!-- /kiln:variables -->\noutro\n"
    fresh = vardocs.refresh(text, paths.roles_dir())
    assert fresh.startswith("intro\n<!-- kiln:variables munge -->\n| variable |")
    assert fresh.endswith("<!-- /kiln:variables -->\noutro\n")
    assert "old" not in fresh and "`munge_key_b64`" in fresh
