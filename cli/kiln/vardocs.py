"""Variable tables in the docs, generated from the roles' argument specs and defaults:
what the docs say about a variable is what the role declares.

A doc marks where a role's table goes; `python -m kiln.vardocs FILE...` (`make docs`)
rewrites the tables and `--check` fails when one is stale (a unit test runs it)::

    <!-- kiln:variables slurm -->
    <!-- /kiln:variables -->
"""

import re
import sys
from pathlib import Path
from typing import Any

from kiln import argspec, paths, roles
from kiln.errors import ExitCode

_BLOCK = re.compile(
    r"(?P<open><!-- kiln:variables (?P<role>[a-z_]+) -->\n).*?(?P<close><!-- /kiln:variables -->)",
    re.DOTALL,
)
_LONGEST_DEFAULT = 40


def _default(value: Any, role: str) -> str:
    if value in ([], {}):
        return f"`{value}`"
    if isinstance(value, str) and not value:
        return '`""`'
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(value, (dict, list)) or len(text) > _LONGEST_DEFAULT:
        return f"see `roles/{role}/defaults/main.yml`"
    return f"`{text}`"


def table(roles_dir: Path, role: str) -> str:
    catalogue = argspec.load_catalogue(roles_dir)
    defaults = roles.defaults(role, roles_dir)
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, variable in catalogue.items():
        if variable.role != role:
            continue
        spec = variable.spec
        kind = spec.get("type", "str")
        if kind == "list" and spec.get("elements"):
            kind = f"list of {spec['elements']}"
        if spec.get("choices"):
            kind += ": " + ", ".join(f"`{c}`" for c in spec["choices"])
        default = _default(defaults[name], role) if name in defaults else "(required)"
        meaning = str(spec.get("description", "")).replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | {default} | {meaning} |")
    return "\n".join(rows) + "\n"


def refresh(text: str, roles_dir: Path) -> str:
    return _BLOCK.sub(
        lambda m: m["open"] + table(roles_dir, m["role"]) + m["close"],
        text,
    )


def main(argv: list[str]) -> ExitCode:
    check = "--check" in argv
    stale = []
    for name in (a for a in argv if a != "--check"):
        path = Path(name)
        text = path.read_text()
        fresh = refresh(text, paths.roles_dir())
        if fresh != text:
            stale.append(name)
            if not check:
                path.write_text(fresh)
    if check and stale:
        print(f"variable tables out of date in {', '.join(stale)}: run `make docs`")
        return ExitCode.FAILED
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
