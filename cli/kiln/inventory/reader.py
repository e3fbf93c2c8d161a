"""Read an inventory as Ansible reads it: every file of the directory, merged, with
group_vars/ and host_vars/. What it finds is a ClusterSpec and the list of every
variable as written (for messages that name the file); kiln.inventory.checks judges them.
"""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln import hostlist, paths, yaml_input
from kiln.errors import InputError
from kiln.files import read_text
from kiln.inventory.spec import ClusterSpec, Definition, Host

# Ansible reads every file of an inventory directory, in name order, except these
# (ansible-core's defaults: INVENTORY_IGNORE_EXTS and the names it always skips; a unit
# test keeps the two in step). Kiln checks exactly those files, so it refuses any it
# cannot read as a YAML inventory rather than pass what Ansible would see differently.
IGNORED_NAMES = re.compile(r"^\.|^host_vars$|^group_vars$|^vars_plugins$")
IGNORED_SUFFIXES = (
    *(".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst"),
    *(".orig", ".cfg", ".retry"),
)
YAML_SUFFIXES = ("", ".yml", ".yaml", ".json")
_RANGE = re.compile(r"\[([0-9]+):([0-9]+)\]")


@dataclass
class _Group:
    name: str
    hosts: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Loaded:
    groups: dict[str, _Group]
    host_vars: dict[str, dict[str, Any]]
    definitions: list[Definition]
    warnings: list[str]
    unchecked: list[str] = field(default_factory=list)


def _find_sources(path: Path) -> tuple[Path, list[Path]]:
    """The inventory as Ansible is given it (absolute) and the files it reads there."""
    if not path.exists():
        raise InputError(f"inventory not found: {path}")
    # Absolute from here on: ansible-runner takes a relative string that names no file
    # in its own working directory as inline inventory content (one host named so).
    named, path = path, path.absolute()
    if not path.is_dir():  # a file; the reader refuses what is not a regular one
        return path, [path]
    sources = _sources_in(path, path)
    if not sources:
        hint = " (for the lab, run `kiln lab up` first)"
        raise InputError(
            f"{named}: no hosts.yml in this inventory directory"
            + (hint if path == paths.default_inventory().absolute() else "")
        )
    return path, sources


def _sources_in(directory: Path, top: Path) -> list[Path]:
    """As Ansible walks an inventory directory: every entry in name order, into
    subdirectories, skipping the names and extensions it ignores."""
    sources = []
    for entry in sorted(directory.iterdir()):
        if IGNORED_NAMES.search(entry.name) or entry.name.endswith(IGNORED_SUFFIXES):
            if entry.is_dir() and directory != top and entry.name in ("group_vars", "host_vars"):
                raise InputError(
                    f"{entry}: variables beside inventory files in a subdirectory are not "
                    "checked by Kiln; keep group_vars/ and host_vars/ at the top"
                )
            continue
        if entry.is_dir():
            sources += _sources_in(entry, top)
        elif entry.suffix not in YAML_SUFFIXES or (entry.stat().st_mode & 0o111):
            raise InputError(
                f"{entry}: Ansible reads every file in an inventory directory as inventory, "
                "and Kiln checks YAML inventories only; convert it to YAML, or move it out "
                "(or give it an extension Ansible skips: .txt, .md, .cfg, .bak, .orig)"
            )
        else:
            sources.append(entry)
    return sources


def _expand_host_pattern(name: str) -> list[str]:
    """Ansible's numeric ranges in host keys: gpu[001:004] -> gpu001..gpu004."""
    match = _RANGE.search(name)
    if not match:
        return [name]
    start, end = match.group(1), match.group(2)
    try:
        hostlist.check_range(int(start), int(end), name)
    except ValueError as exc:
        raise InputError(f"host {name}: {exc}") from None
    width = len(start) if start.startswith("0") else 0
    expanded = []
    for number in range(int(start), int(end) + 1):
        head = name[: match.start()] + str(number).zfill(width)
        expanded.extend(head + tail for tail in _expand_host_pattern(name[match.end() :]))
    return expanded


def _read(base: Path, sources: list[Path]) -> _Loaded:
    """Every source file as Ansible merges them, in order: a group in several files
    gathers their hosts, children and variables (the later file's value wins)."""
    groups: dict[str, _Group] = {}
    host_vars: dict[str, dict[str, Any]] = {}
    definitions: list[Definition] = []

    def walk(label: str, group_name: Any, body: Any) -> None:
        if not isinstance(group_name, str):
            raise InputError(f"{label}: group {group_name!r} is not a string; quote it")
        group = groups.setdefault(group_name, _Group(group_name))
        if body is None:
            return
        if not isinstance(body, dict):
            raise InputError(f"{label}: group {group_name} must be a mapping")
        unknown = set(body) - {"hosts", "children", "vars"}
        if unknown:
            keys = ", ".join(sorted(map(str, unknown)))
            raise InputError(
                f"{label}: group {group_name} has unknown keys {keys}"
                " (expected hosts, children, vars)"
            )
        for key in ("hosts", "children", "vars"):
            if body.get(key) is not None and not isinstance(body[key], dict):
                raise InputError(f"{label}: {group_name}.{key} must be a mapping")
        for pattern, hvars in (body.get("hosts") or {}).items():
            if not isinstance(pattern, str):
                raise InputError(f"{label}: host {pattern!r} is not a string; quote it")
            if hvars is not None and not isinstance(hvars, dict):
                raise InputError(f"{label}: host {pattern} must map to variables or nothing")
            _check_variable_names(f"{label}: host {pattern}", hvars or {})
            for host in _expand_host_pattern(pattern):
                group.hosts.add(host)
                host_vars.setdefault(host, {}).update(hvars or {})
                definitions.extend(
                    Definition(f"{label} (host {host})", k, v) for k, v in (hvars or {}).items()
                )
        _check_variable_names(f"{label}: group {group_name}", body.get("vars") or {})
        for key, value in (body.get("vars") or {}).items():
            group.vars[key] = value
            definitions.append(Definition(f"{label} (group {group_name})", key, value))
        for child, child_body in (body.get("children") or {}).items():
            walk(label, child, child_body)
            group.children.add(child)

    groups["all"] = _Group("all")
    for source in sources:
        label = str(source.relative_to(base)) if source.is_relative_to(base) else str(source)
        text = read_text(source, label)  # a file that cannot be read says so, INI or not
        try:
            data = yaml_input.parse(text, label)
        except InputError:
            if source.suffix:
                raise
            raise InputError(
                f"{source}: Ansible reads every file in an inventory directory as inventory, "
                "and this one is not YAML (INI?); Kiln checks YAML inventories only"
            ) from None
        if data is None:
            continue  # an empty file: Ansible reads nothing from it either
        if not isinstance(data, dict) or "plugin" in data:
            raise InputError(
                f"{label}: expected a YAML inventory (groups with hosts, children, vars); "
                "Kiln cannot check an inventory plugin's configuration or other content"
            )
        for name, body in data.items():
            walk(label, name, body)
            # Top-level groups other than 'all' are its children, as in Ansible.
            if name != "all":
                groups["all"].children.add(name)
    loaded = _Loaded(groups, host_vars, definitions, [])
    _read_vars_dirs(base, loaded)
    return loaded


def _vars_files(directory: Path, name: str) -> list[Path]:
    """group_vars/NAME.yml, NAME.yaml, NAME, or every YAML file under NAME/."""
    found = [directory / f"{name}{ext}" for ext in (".yml", ".yaml", "")]
    found = [p for p in found if p.exists() and not p.is_dir()]  # the reader refuses a FIFO
    if (directory / name).is_dir():
        found += sorted(p for p in (directory / name).rglob("*") if p.suffix in (".yml", ".yaml"))
    return found


VAULT_HEADER = "$ANSIBLE_VAULT;"
# Where ansible-playbook finds a vault password without being asked on a terminal.
VAULT_PASSWORD_SETTINGS = ("ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST")


def _read_vars_dirs(base: Path, loaded: _Loaded) -> None:
    for kind, targets in (("group_vars", loaded.groups), ("host_vars", loaded.host_vars)):
        directory = base / kind
        if not directory.is_dir():
            continue
        names = {p.name if p.is_dir() else p.stem for p in directory.iterdir()}
        for stray in sorted(names - set(targets)):
            what = "group" if kind == "group_vars" else "host"
            loaded.warnings.append(
                f"{kind}/{stray}: no {what} named {stray} in the inventory; ignored"
            )
        for name in sorted(names & set(targets)):
            for file in _vars_files(directory, name):
                rel = str(file.relative_to(base))
                text = read_text(file, rel)
                if text.startswith(VAULT_HEADER):
                    _encrypted(rel)
                    loaded.unchecked.append(rel)
                    continue
                data = yaml_input.parse(text, rel)
                if data is None:
                    continue
                if not isinstance(data, dict):
                    raise InputError(f"{rel}: expected a mapping of variables")
                _check_variable_names(rel, data)
                target = (
                    loaded.groups[name].vars if kind == "group_vars" else loaded.host_vars[name]
                )
                target.update(data)
                loaded.definitions.extend(Definition(rel, k, v) for k, v in data.items())


def _encrypted(rel: str) -> None:
    """A whole file encrypted with ansible-vault: Ansible reads it given a password;
    without one the run would stop at its first task, so stop now."""
    if not any(os.environ.get(setting) for setting in VAULT_PASSWORD_SETTINGS):
        raise InputError(
            f"{rel}: encrypted with ansible-vault, and no vault password is configured"
            " (set ANSIBLE_VAULT_PASSWORD_FILE)"
        )


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_variable_names(where: str, variables: dict) -> None:
    """Ansible's rule for variable names (it only warns today, and will refuse)."""
    for name in variables:
        if not isinstance(name, str) or not _VARIABLE_NAME.fullmatch(name):
            raise InputError(
                f"{where}: variable name {name!r} is not valid (letters, digits and '_',"
                " not starting with a digit)"
            )


def _ancestry(groups: dict[str, _Group]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Each group's depth below 'all' and each host's groups (with ancestors)."""
    depth: dict[str, int] = {"all": 0}
    host_groups: dict[str, set[str]] = {}

    def visit(name: str, level: int, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise InputError(f"group {name} contains itself through {' > '.join(trail)}")
        depth[name] = max(depth.get(name, 0), level)
        group = groups[name]
        for host in group.hosts:
            host_groups.setdefault(host, set()).update((*trail, name))
        for child in sorted(group.children):
            visit(child, level + 1, (*trail, name))

    visit("all", 0, ())
    return depth, host_groups


def _build_spec(source: Path, directory: Path, loaded: _Loaded) -> ClusterSpec:
    """Each host's variables merged as Ansible merges them (shallower groups first, then
    by name; host variables last), and each group's hosts. Each host is visited once and
    only its own groups with it: linear in hosts times the groups of each. Hosts of the
    same groups without variables of their own share one merged dict (a rack written as
    a host range: one dict, not one per host)."""
    depth, host_groups = _ancestry(loaded.groups)
    rank = {g: (depth.get(g, 0), g) for g in loaded.groups}
    hosts: dict[str, Host] = {}
    groups: dict[str, list[str]] = {name: [] for name in sorted(loaded.groups) if name != "all"}
    by_groups: dict[frozenset[str], dict[str, Any]] = {}
    for host in sorted(host_groups):  # so each group's list comes out sorted
        member = frozenset(host_groups[host])
        if member not in by_groups:
            by_groups[member] = {}
            for group in sorted(member, key=rank.__getitem__):
                by_groups[member].update(loaded.groups[group].vars)
        own = loaded.host_vars.get(host)
        merged = {**by_groups[member], **own} if own else by_groups[member]
        member_of = sorted(member - {"all"})
        for group in member_of:
            groups[group].append(host)
        hosts[host] = Host(name=host, groups=member_of, vars=merged)
    return ClusterSpec(
        path=directory,
        source=source,
        hosts=hosts,
        groups=groups,
        warnings=loaded.warnings,
        unchecked=loaded.unchecked,
    )


def read(path: Path | str | None = None) -> tuple[ClusterSpec, list[Definition]]:
    """The inventory at `path` (default: $KILN_INVENTORY, else the lab) as Ansible reads
    it, and every variable as written."""
    source, sources = _find_sources(Path(path) if path else paths.default_inventory())
    directory = source if source.is_dir() else source.parent
    loaded = _read(directory, sources)
    return _build_spec(source, directory, loaded), loaded.definitions
