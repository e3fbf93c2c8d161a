"""`kiln inventory diff A B`: what differs between two inventories in effect.

Made for a region migration: the operator writes the new site's layer and host list and
checks that only endpoints changed. Per group, each variable's value in effect on the
group's hosts (one value when they all agree, "per host" when they do not, as
ansible_host does) is compared; hosts added and removed are listed per group. Secrets
(kiln.redact: a role's `no_log` variables, Ansible's connection passwords, ansible-vault
values, URL credentials, anywhere in a value) are never shown: only whether they differ.
"""

from dataclasses import asdict, dataclass, field
from typing import Any

from kiln import argspec, hostlist, paths, redact
from kiln.inventory import _collector_paused
from kiln.inventory.spec import ClusterSpec

PER_HOST = "(per host)"


@dataclass
class Change:
    name: str
    before: Any  # None where the variable is not set on that side
    after: Any
    secret: bool = False

    def describe(self) -> str:
        if self.secret and None not in (self.before, self.after):
            return f"{self.name}: differs (secret, not shown)"
        if self.before is None:
            return f"{self.name}: added {_show(self.after)}"
        if self.after is None:
            return f"{self.name}: removed (was {_show(self.before)})"
        return f"{self.name}: {_show(self.before)} -> {_show(self.after)}"


@dataclass
class GroupDiff:
    group: str  # a group, or "host NAME" for the values set per host
    hosts_added: list[str] = field(default_factory=list)
    hosts_removed: list[str] = field(default_factory=list)
    variables: list[Change] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.hosts_added or self.hosts_removed or self.variables)


@dataclass
class InventoryDiff:
    before: str
    after: str
    groups: list[GroupDiff]

    @property
    def same(self) -> bool:
        return all(g.empty for g in self.groups)

    def to_dict(self) -> dict:
        return {
            "before": self.before,
            "after": self.after,
            "same": self.same,
            "groups": [asdict(g) for g in self.groups if not g.empty],
        }

    def lines(self) -> list[str]:
        out = [f"inventory diff: {self.before} -> {self.after}"]
        for group in self.groups:
            if group.empty:
                continue
            out.append(
                f"{group.group}:" if group.group.startswith("host ") else f"group {group.group}:"
            )
            if group.hosts_removed:
                out.append(f"  hosts removed: {hostlist.compress(group.hosts_removed)}")
            if group.hosts_added:
                out.append(f"  hosts added: {hostlist.compress(group.hosts_added)}")
            out.extend(f"  {change.describe()}" for change in group.variables)
        if self.same:
            out.append("no difference in effect")
        return out


def _show(value: Any) -> str:
    return value if value == PER_HOST else repr(value)


def _in_effect(spec: ClusterSpec, hosts: list[str]) -> dict[str, Any]:
    """Each variable set on any of HOSTS: its value where all agree, else PER_HOST.
    Hosts of one range share one dict of variables (kiln.inventory.reader): each dict
    is compared once, however many hosts hold it."""
    shared: dict[int, tuple[dict[str, Any], int]] = {}
    for host in hosts:
        variables = spec.hosts[host].vars
        held = shared.get(id(variables))
        shared[id(variables)] = (variables, held[1] + 1 if held else 1)
    first: dict[str, Any] = {}
    counts: dict[str, int] = {}
    varies: set[str] = set()
    for variables, count in shared.values():
        for name, value in variables.items():
            if name not in first:
                first[name], counts[name] = value, 0
            elif name not in varies and value != first[name]:
                varies.add(name)
            counts[name] += count
    return {
        name: PER_HOST if name in varies or counts[name] != len(hosts) else value
        for name, value in first.items()
    }


def _groups(spec: ClusterSpec) -> dict[str, list[str]]:
    return {"all": list(spec.hosts), **spec.groups}


def diff(before: ClusterSpec, after: ClusterSpec) -> InventoryDiff:
    # As in reading: a diff of 1,000,000 hosts makes millions of objects, none in a
    # cycle, and the cycle collector walking them took over half its time.
    with _collector_paused():
        return _diff(before, after)


def _diff(before: ClusterSpec, after: ClusterSpec) -> InventoryDiff:
    catalogue = argspec.load_catalogue(paths.roles_dir())  # which variables are no_log
    old_groups, new_groups = _groups(before), _groups(after)
    found: list[GroupDiff] = []
    everywhere: list[Change] = []
    in_all: list[dict[str, Any]] = []  # group all's values in effect, before and after
    for group in sorted(set(old_groups) | set(new_groups), key=lambda g: (g != "all", g)):
        old_hosts, new_hosts = old_groups.get(group, []), new_groups.get(group, [])
        result = GroupDiff(
            group,
            hosts_added=sorted(set(new_hosts) - set(old_hosts), key=hostlist.sort_key),
            hosts_removed=sorted(set(old_hosts) - set(new_hosts), key=hostlist.sort_key),
        )
        old_vars, new_vars = _in_effect(before, old_hosts), _in_effect(after, new_hosts)
        for name in sorted(set(old_vars) | set(new_vars)):
            old, new = old_vars.get(name), new_vars.get(name)
            if old == new:
                continue
            change = _change(name, old, new, catalogue)
            if group != "all" and change in everywhere:
                continue  # said once, for all hosts
            result.variables.append(change)
        if group == "all":
            everywhere, in_all = result.variables, [old_vars, new_vars]
        found.append(result)
    # Values that differ host by host (addresses, labels): compared on the hosts both keep.
    per_host = {n for values in in_all for n, c in values.items() if c == PER_HOST}
    said_for = {g.group: g.variables for g in found}  # not `found`, which grows per host
    names = sorted(per_host)
    # Work per host only where a value differs, and sort only those hosts: at 1,000,000
    # hosts, a step per host and variable is all the time there is.
    differing = {}
    for host in before.hosts.keys() & after.hosts.keys():
        old_vars, new_vars = before.hosts[host].vars, after.hosts[host].vars
        if old_vars is new_vars:
            continue
        if differ := [n for n in names if old_vars.get(n) != new_vars.get(n)]:
            differing[host] = differ
    for host in sorted(differing, key=hostlist.sort_key):
        old_vars, new_vars, differ = (
            before.hosts[host].vars,
            after.hosts[host].vars,
            differing[host],
        )
        result = GroupDiff(f"host {host}")
        member = {"all", *before.hosts[host].groups, *after.hosts[host].groups}
        said = [c for g in member for c in said_for.get(g, [])]
        for name in differ:
            change = _change(name, old_vars.get(name), new_vars.get(name), catalogue)
            if change not in said:  # not already said for a group of it
                result.variables.append(change)
        found.append(result)
    return InventoryDiff(str(before.path), str(after.path), found)


def _change(name: str, old: Any, new: Any, catalogue: dict[str, argspec.VariableSpec]) -> Change:
    """A change, with secrets replaced before they are kept anywhere: a secret variable
    whole; in any other, the secrets inside it, and whole when they are all that differs
    (a proxy's password)."""
    shown = [redact.hide(v) for v in (old, new)]
    declared = catalogue.get(name)
    secret = redact.secret_variable(name, declared.spec if declared else None)
    if not secret and (shown[0] != shown[1] or old == new):
        return Change(name, shown[0], shown[1])
    hidden = [None if v is None else redact.HIDDEN for v in (old, new)]
    return Change(name, hidden[0], hidden[1], secret=True)
