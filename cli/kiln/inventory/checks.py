"""Checks of a read inventory, each returning one line per problem: names that reach
shells, the Slurm groups, every variable a role declares (its argument spec), and the
pre-flights of the modules that own a variable (`INVENTORY_CHECKS` in kiln.mpi,
kiln.munge, kiln.slurm and kiln.storage; the GPU nodes' driver settings and the MPI
nodes' HPC-X settings taken together, from kiln.gpu and kiln.hpcx; the topology the
slurm role would write)."""

from collections.abc import Callable
from typing import Any

from kiln import (
    argspec,
    base,
    enroot,
    formats,
    gpu,
    health,
    hostlist,
    hpcx,
    mpi,
    munge,
    nccl,
    nccl_tests,
    paths,
    pyxis,
    redact,
    schedules,
    slurm,
    storage,
)
from kiln.errors import InputError
from kiln.inventory.model import ClusterSpec, Definition
from kiln.topology import for_slurm
from kiln.topology.sources import LABEL_VARIABLE

# Variables whose value must be the name of a host in the inventory.
HOST_REFERENCES = ("base_ntp_server_host", "munge_key_host", "slurm_dbd_host")
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
    problems = []
    for definition in definitions:
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


DRIVER_PREFIX = "nvidia_driver_"


@check
def _check_driver_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """The nvidia_driver settings that only make sense together (a version and the
    fabric manager, a source and its key), as each compute node resolves them: one line
    per problem, naming the nodes it applies to."""
    return _settings_problems(spec, ("slurm_compute",), DRIVER_PREFIX, gpu.settings_problems)


def _settings_problems(
    spec: ClusterSpec,
    groups: tuple[str, ...],
    prefix: str,
    problems_of: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """A role's settings taken together, host by host (its variables without `prefix`):
    one line per problem, naming the hosts it applies to."""
    hosts_by_problem: dict[str, list[str]] = {}
    hosts = dict.fromkeys(host for group in groups for host in spec.group(group))
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


HPCX_PREFIX = "hpcx_"


@check
def _check_hpcx_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """The HPC-X settings pinned together (a version and its sha256, a URL naming both),
    as each MPI node resolves them; the URL against each node's OS is the pre-flight
    play's, which reads the nodes."""
    return _settings_problems(
        spec, ("slurm_compute", "slurm_login"), HPCX_PREFIX, hpcx.settings_problems
    )


ENROOT_PREFIX = "enroot_"


@check
def _check_enroot_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """enroot's release pinned together (a version and the sha256 of each package)."""
    return _settings_problems(
        spec, ("slurm_compute", "slurm_login"), ENROOT_PREFIX, enroot.settings_problems
    )


PYXIS_PREFIX = "pyxis_"


@check
def _check_pyxis_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """pyxis's release pinned together (a version and its tarball's sha256) and its
    options, on every node srun runs on."""
    return _settings_problems(
        spec,
        ("slurm_controller", "slurm_compute", "slurm_login"),
        PYXIS_PREFIX,
        pyxis.settings_problems,
    )


NCCL_TESTS_PREFIX = "nccl_tests_"


@check
def _check_nccl_tests_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """nccl-tests' release pinned together (a version and its tarball's sha256) and the
    GPU architectures, on the GPU nodes that build it."""
    return _settings_problems(
        spec, ("slurm_compute",), NCCL_TESTS_PREFIX, nccl_tests.settings_problems
    )


HEALTH_PREFIX = "health_"


@check
def _check_health_settings(spec: ClusterSpec, definitions: list[Definition]) -> list[str]:
    """The node check's time limits (under slurmd's 60 s) and the ports and paths it
    judges, on every compute node; the active check's schedule on the controllers."""
    groups = ("slurm_compute", "slurm_controller")
    return _settings_problems(spec, groups, HEALTH_PREFIX, health.settings_problems)


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


# Each module that owns a variable says how to check it.
VALUE_CHECKS: dict[str, tuple[type, Callable[[Any, dict[str, list[str]]], None]]] = {
    **base.INVENTORY_CHECKS,
    **mpi.INVENTORY_CHECKS,
    **munge.INVENTORY_CHECKS,
    **nccl.INVENTORY_CHECKS,
    **slurm.INVENTORY_CHECKS,
    **storage.INVENTORY_CHECKS,
    **schedules.INVENTORY_CHECKS,
}


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
