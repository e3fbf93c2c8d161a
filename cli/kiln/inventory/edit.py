"""Set variables in an inventory's group_vars files the way an operator would by hand:
where a group's file already sets the variable, that line is replaced; where a file
holds it commented out (as `kiln inventory new` writes every setting), the comment
becomes the setting; else it is added to a file of Kiln's choosing. Every other line,
comments included, stays as it was.

`kiln inventory discover --write` and `kiln inventory pins --write` write through here;
`apply` checks the whole inventory afterwards and puts every file back when it no
longer passes, so nothing is half-written.
"""

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kiln import yaml_input
from kiln.errors import InputError


@dataclass(frozen=True)
class Change:
    group: str  # the group_vars group: all, slurm_compute
    name: str
    value: Any
    comment: str = ""  # why, written above the line where it is new


# Lines an operator's yamllint takes (Kiln's own .yamllint allows 120).
WIDTH = 100


def line(name: str, value: Any) -> str:
    """`name: value` on one line, the value in YAML's flow style."""
    text = yaml.dump(
        value, Dumper=yaml_input.Dumper, default_flow_style=True, width=1 << 20, sort_keys=False
    )
    return f"{name}: {text.removesuffix('...' + chr(10)).strip()}"


def lines(name: str, value: Any) -> list[str]:
    """The setting as a file holds it: one line where it fits in WIDTH, else a block (a
    list one item a line, each item in flow style)."""
    one = line(name, value)
    if len(one) <= WIDTH or not isinstance(value, list | dict):
        return [one]
    flow = None if isinstance(value, list) else False  # a mapping: a key a line
    text = yaml.dump(
        {name: value},
        Dumper=yaml_input.Dumper,
        default_flow_style=flow,
        width=WIDTH,
        sort_keys=False,
    )
    return text.rstrip("\n").splitlines()


def group_files(inventory: Path, group: str) -> list[Path]:
    """A group's variable files as Ansible reads them: group_vars/GROUP.yml (or .yaml),
    then the files of group_vars/GROUP/, in name order."""
    base = inventory / "group_vars"
    found = [
        base / f"{group}{ext}" for ext in (".yml", ".yaml") if (base / f"{group}{ext}").is_file()
    ]
    folder = base / group
    if folder.is_dir():
        found += sorted(
            p for p in folder.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file()
        )
    return found


def _block(held: list[str], start: int, commented: bool) -> int:
    """The end (exclusive) of the top-level entry that starts at `start`: the lines below
    it that are indented, a block sequence's items, or blank lines between those (in a
    commented entry, the same lines behind '# ')."""
    end = start + 1
    scan = end
    while scan < len(held):
        text = held[scan].removeprefix("# ") if commented else held[scan]
        if commented and not held[scan].startswith("# "):
            break
        if text.strip() == "" and not commented:
            scan += 1
            continue
        if text[:1] in (" ", "\t") or text.startswith("- "):
            scan += 1
            end = scan
            continue
        break
    return end


def _find(lines: list[str], name: str, commented: bool) -> int | None:
    pattern = re.compile(
        rf"^#\s?{re.escape(name)}:(\s|$)" if commented else rf"^{re.escape(name)}:(\s|$)"
    )
    return next((i for i, text in enumerate(lines) if pattern.match(text)), None)


def plan(inventory: Path, changes: list[Change], new_file: str) -> dict[Path, str]:
    """The new text of each file the changes touch ({path: text}); a change lands where
    its group sets the variable, else where a file holds it commented out, else in
    group_vars/GROUP/NEW_FILE."""
    texts: dict[Path, list[str]] = {}

    def lines_of(path: Path) -> list[str]:
        if path not in texts:
            texts[path] = path.read_text().splitlines() if path.exists() else []
        return texts[path]

    for change in changes:
        files = group_files(inventory, change.group)
        new_lines = lines(change.name, change.value)
        for commented in (False, True):
            target = next(
                (p for p in files if _find(lines_of(p), change.name, commented) is not None),
                None,
            )
            if target is not None:
                held = lines_of(target)
                start = _find(held, change.name, commented)
                assert start is not None
                end = _block(held, start, commented)
                held[start:end] = new_lines
                break
        else:
            target = inventory / "group_vars" / change.group / new_file
            if target.parent.with_suffix(".yml").is_file() and not target.parent.is_dir():
                target = target.parent.with_suffix(".yml")
            held = lines_of(target)
            if not held:
                held.append("---")
            if change.comment:
                held.append(f"# {change.comment}")
            held.extend(new_lines)
    return {path: "\n".join(lines) + "\n" for path, lines in texts.items()}


def apply(texts: dict[Path, str], check: Callable[[], object]) -> list[Path]:
    """Write each file that changes (atomically, keeping its mode), then `check()` the
    inventory; when the check raises, every file is put back as it was and the error
    goes on. The paths written."""
    before = {p: (p.read_text() if p.exists() else None) for p in texts}
    written = [p for p, text in texts.items() if before[p] != text]
    try:
        for path in written:
            _write(path, texts[path])
        check()
    except BaseException:
        for path in written:
            if before[path] is None:
                path.unlink(missing_ok=True)
            else:
                _write(path, before[path])
        raise
    return written


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror}") from None
