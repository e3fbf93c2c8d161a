"""Checks of a read inventory, each returning one line per problem: names that reach
shells, the Slurm groups, every variable a role declares (its argument spec), each
role's own pre-flights (kiln.roles: its module's `INVENTORY_CHECKS`, one value at a
time, and `settings_problems`, its settings taken together on each host it runs on),
and the topology the slurm role would write."""

import difflib
from collections.abc import Callable
from typing import Any

from kiln import argspec, formats, hostlist, paths, redact, roles, schedules, setting_kinds
from kiln.errors import InputError
from kiln.inventory.spec import ClusterSpec, Definition
from kiln.topology import for_slurm
from kiln.topology.sources import LABEL_VARIABLE

# Variables whose value must be the name of a host in the inventory.
HOST_REFERENCES = ("base_ntp_server_host", "munge_key_host", "slurm_dbd_host")
# Variables a playbook reads with a default, which no role declares.
PLAYBOOK_VARIABLES = ("health_program",)  # playbooks/health_check.yml: the check to run
# Variables that name things Kiln writes into shell commands and Slurm's files.
NAME_VARIABLES = ("slurm_cluster_name",)


Check = Callable[[ClusterSpec, list[Definition]], list[str]]
CHECKS: list[Check] = []


def check(function: Check) -> Check:
    """Register a check: every registered check runs on every inventory, in order."""
    CHECKS.append(function)
    return function


def run(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """Every problem, one line each. The topology is built only from an inventory that
    passes the rest (it needs the groups and the settings to be right)."""
    problems = [problem for each in CHECKS for problem in each(spec, definitions)]
    # A value a check quotes (a mirror's URL) shows no credentials (kiln.redact).
    return [redact.text(p) for p in problems or _check_topology(spec)]


@check
def _check_names(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """Host and cluster names reach shells, Slurm's files and reports: only the
    characters every one of them takes."""
    problems = [
        f"host {name!r}: names {formats.NAME_RULE}"
        for name in spec.hosts
        if not formats.is_name(name)
    ]
    for definition in definitions:
        value = definition.value
        if argspec.is_template(value) or argspec.is_opaque(value):
            continue  # Ansible resolves it; the role's quoting still applies
        if definition.name in NAME_VARIABLES and not formats.is_name(value):
            problems.append(
                f"{definition.source}: {definition.name} "
                f"{redact.shown(definition.name, definition.value)} {formats.NAME_RULE}"
            )
    return problems


@check
def _check_structure(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    problems = []
    controllers = spec.groups.get("slurm_controller")
    if controllers is None:
        problems.append("inventory: no slurm_controller group (expected 1 host, or 2 for a backup)")
    elif len(controllers) not in (1, 2):
        problems.append(
            f"inventory: slurm_controller has {len(controllers)} hosts"
            f" ({', '.join(controllers)}); expected 1, or 2 for a backup controller"
        )
    compute = spec.groups.get("slurm_compute")
    if compute is None:
        problems.append("inventory: no slurm_compute group (expected at least 1 host)")
    elif not compute:
        problems.append("inventory: slurm_compute is empty (expected at least 1 host)")
    return problems


@check
def _check_variables(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    catalogue = argspec.load_catalogue(paths.roles_dir())
    known = {*catalogue, *VALUE_CHECKS, *roles.CLUSTER_WIDE, *PLAYBOOK_VARIABLES}
    declaring = {variable.role for variable in catalogue.values()}
    problems = []
    for definition in definitions:
        if (unknown := _unknown_setting(definition.name, known, declaring)) is not None:
            problems.append(f"{definition.source}: {unknown}")
            continue
        declared = catalogue.get(definition.name)
        if declared is not None:
            wrong_type = [
                f"{definition.source}: {message} (role {declared.role})"
                for message in argspec.check_value(definition.name, definition.value, declared.spec)
            ]
            if wrong_type:  # one message per mistake: the value checks would repeat it
                problems.extend(wrong_type)
                continue
        problems.extend(f"{definition.source}: {p}" for p in _value_problems(definition, spec))
        if _names_unknown_host(definition, spec):
            problems.append(
                f"{definition.source}: {definition.name} names "
                f"{redact.shown(definition.name, definition.value)},"
                " which is not a host in the inventory"
            )
    return problems


def _unknown_setting(name: str, known: set[str], declaring: set[str]) -> str | None:
    """A variable with the prefix of a Kiln role that declares its settings, which no
    role declares, is a typo (Ansible would ignore it and the role use its default):
    the message says what was meant."""
    owner = max(
        (
            role
            for role in roles.ROLES.values()
            if name.startswith(role.prefix) and role.name in declaring
        ),
        key=lambda role: len(role.prefix),
        default=None,
    )
    if owner is None or name in known:
        return None
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else f"; see roles/{owner.name}/README.md"
    return f"{name} is not a setting of role {owner.name}{hint}"


@check
def _check_role_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """Each role's settings that only make sense together (a driver version and the
    fabric manager, a release and its sha256, the health check's time limits), as each
    host it runs on resolves them (kiln.roles: its groups, its module's
    settings_problems)."""
    return [
        problem
        for role in roles.ROLES.values()
        if (problems_of := role.settings_check()) is not None
        for problem in _settings_problems(
            spec, role.hosts(spec.groups, spec.hosts), role.prefix, problems_of
        )
    ]


def _settings_problems(
    spec: ClusterSpec,
    hosts: list[str],
    prefix: str,
    problems_of: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """A role's settings taken together, host by host (its variables without `prefix`):
    one line per problem, naming the hosts it applies to."""
    hosts_by_problem: dict[str, list[str]] = {}
    # Hosts of the same groups share one dict of variables (kiln.inventory.reader):
    # each dict is judged once, so a 1,000,000-host range costs one judgement per rack.
    judged: dict[int, list[str]] = {}
    for host in hosts:
        variables = spec.hosts[host].vars
        if id(variables) not in judged:
            settings = {
                name.removeprefix(prefix): value
                for name, value in variables.items()
                if name.startswith(prefix)
            }
            opaque = any(argspec.is_template(v) or argspec.is_opaque(v) for v in settings.values())
            # A value Ansible resolves (a template, a vault) is the role's to check again.
            judged[id(variables)] = [] if opaque else problems_of(settings)
        for problem in judged[id(variables)]:
            hosts_by_problem.setdefault(problem, []).append(host)
    return [f"{hostlist.compress(hosts)}: {problem}" for problem, hosts in hosts_by_problem.items()]


TOPOLOGY_PREFIX = "slurm_topology_"


def _check_topology(spec: ClusterSpec) -> list[str]:
    """The topology the slurm role would write, built now where its input is here."""

    controller = spec.group("slurm_controller")[0]
    settings = {
        name.removeprefix(TOPOLOGY_PREFIX): value
        for name, value in spec.hosts[controller].vars.items()
        if name.startswith(TOPOLOGY_PREFIX)
    }
    if any(argspec.is_template(v) or argspec.is_opaque(v) for v in settings.values()):
        return []
    compute = spec.group("slurm_compute")
    labels = {h: spec.hosts[h].vars.get(LABEL_VARIABLE) for h in compute}
    try:
        for_slurm.preflight(settings, labels, compute, str(spec.path))
    except InputError as exc:  # a TopologyError, or a file that cannot be read
        return [f"slurm_topology_source {settings['source']}: {exc}"]
    return []


def _names_unknown_host(definition: Definition, spec: ClusterSpec) -> bool:
    value = definition.value
    if definition.name not in HOST_REFERENCES or argspec.is_template(value):
        return False
    return value not in (None, "") and value not in spec.hosts


# How each variable is checked: by its kind, where a kind says it all
# (kiln.setting_kinds); else by the module that owns it: each role's module
# (kiln.roles), and kiln.schedules for the scheduled `kiln validate`, which no role runs.
VALUE_CHECKS: dict[str, roles.ValueCheck] = {
    **setting_kinds.INVENTORY_CHECKS,
    **{
        name: value_check
        for role in roles.ROLES.values()
        for name, value_check in role.value_checks().items()
    },
    **schedules.INVENTORY_CHECKS,
}


def role_variables(role: str) -> list[str]:
    """The variables of `role` (its defaults) VALUE_CHECKS checks: those its pre-flight
    hands to value_problems (roles/base/tasks/values.yml)."""
    return sorted(name for name in roles.ROLES[role].defaults() if name in VALUE_CHECKS)


def _holds_opaque(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_opaque(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_opaque(v) for v in value)
    return argspec.is_opaque(value)


def _value_problems(definition: Definition, spec: ClusterSpec) -> list[str]:
    """Checks that need more than a type: munge keys, Slurm partitions and shapes,
    storage mounts, values that land in config files. A value holding a Jinja expression
    anywhere is Ansible's to resolve; the role checks what it resolved to."""
    if definition.name not in VALUE_CHECKS or _holds_opaque(definition.value):
        return []
    return value_problems(definition.name, definition.value, spec.groups)


def value_problems(name: str, value: Any, groups: dict[str, list[str]]) -> list[str]:
    """VALUE_CHECKS' check of one variable's value: a line naming the variable, or none.
    The roles' pre-flights call it (filter kiln_value_problems) on the values Ansible
    resolved, so a role refuses exactly what `kiln inventory check` refuses."""
    kind, check = VALUE_CHECKS[name]
    if value in (None, "", [], {}) or not isinstance(value, kind):
        return []  # the argument spec reports the type
    try:
        check(value, groups)
    except ValueError as exc:
        message = str(exc)
        # A value a check quotes (a proxy's URL) shows no credentials (kiln.redact).
        return [redact.text(message if message.startswith(name) else f"{name}: {message}")]
    return []
