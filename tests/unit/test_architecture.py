"""The shape of `cli/kiln`, read from its imports (ast): dependencies go one way. No
module imports itself back through others, and no library module imports a command
(commands parse options, call the library, print)."""

import ast
import re
import sys

from tests.conftest import REPO

PACKAGE = REPO / "cli" / "kiln"
# The entry points: they import the CLI, and only they may.
ENTRY_POINTS = {"kiln.__main__", "kiln.cli"}


def module_name(path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path, name: str, known: set[str], runtime: bool = False) -> set[str]:
    """Kiln modules `path` imports, at the top or inside functions; with `runtime`, not
    those imported only for type checkers (`if TYPE_CHECKING:`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    if runtime:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                node.body = [ast.Pass()]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            found |= {
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            }
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(paths)
    return {name: imports_of(path, name, known) for name, path in paths.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_whole():
    edges = graph()
    assert {"kiln.inventory", "kiln.inventory.reader", "kiln.campaigns.validate"} <= set(edges)
    assert "kiln.inventory.spec" in edges["kiln.inventory.reader"]
    assert "kiln.topology.for_slurm" in edges["kiln.inventory.checks"]


def test_no_import_circle():
    assert cycles(graph()) == []


def test_cycles_are_found_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_library_module_imports_a_command():
    edges = graph()
    wrong = {
        name: sorted(d for d in deps if d.startswith("kiln.commands") or d in ENTRY_POINTS)
        for name, deps in edges.items()
        if not name.startswith("kiln.commands") and name not in ENTRY_POINTS
    }
    assert {name: deps for name, deps in wrong.items() if deps} == {}


# A command-line option in a message: `--name`, not a word's hyphen.
OPTION = re.compile(r"(?<![\w-])--[a-z]")


def errors_naming_an_option(source: str) -> list[str]:
    """The text of each error made in `source` (a call of a name ending in Error, raised
    there or later) that names a command-line option, its parts joined as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if not name.endswith("Error"):
            continue
        text = "".join(
            part.value
            for part in ast.walk(node)
            if isinstance(part, ast.Constant) and isinstance(part.value, str)
        )
        if OPTION.search(text):
            found.append(text)
    return found


def test_library_errors_name_no_command_line_option():
    """A library error says what is wrong with a value; the command that took the value
    from an option adds the option's name (e.g. kiln.topology.policies.PolicyError)."""
    found = {
        str(path.relative_to(PACKAGE)): errors_naming_an_option(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "commands" not in path.parts and module_name(path) not in ENTRY_POINTS
    }
    assert {path: texts for path, texts in found.items() if texts} == {}


def test_an_option_is_found_anywhere_in_an_errors_message():
    source = """
raise InputError("--nodes: empty")
raise TopologyError(
    f"{n} nodes are not in the source: {hosts} (to place them: "
    "--missing catch-all)"
)
problem = SlurmConfigError("provision it once without --limit")
raise KilnError(f"{host}: run ldconfig on the node")
warnings.append("map the GUIDs with --node-name-map")
"""
    assert errors_naming_an_option(source) == [
        "--nodes: empty",
        " nodes are not in the source:  (to place them: --missing catch-all)",
        "provision it once without --limit",
    ]


# The judging floor: verdicts, profiles, the parsers of results, assess, burn-in judging,
# pairs, drain decisions and the result records. It runs no playbook and knows no
# report or command, so every campaign (validate, burn-in, a rollout's batches) and
# every role's filter judges with the same rules.
FLOOR = "kiln.validation"
# What the floor may build on: errors, hostlists and Slurm's files with what they
# need, reading files, the MPI check's name, and leaves that import nothing of Kiln's
# (paths, GPU model facts, the cloud); kiln_node, the standard-library node library,
# which holds the node programs' drain reason prefixes. Not kiln.health nor
# kiln.schedules: features built on the floor.
BELOW_FLOOR = {
    "kiln.errors",
    "kiln.hostlist",
    "kiln.roles.slurm",
    "kiln.formats",
    "kiln.files",
    "kiln.yaml_input",
    "kiln.paths",
    "kiln.roles.mpi",
    "kiln.gpu_models",  # standard library only, as are kiln.cloud and kiln_node
    "kiln.cloud",
}


def runtime_graph() -> dict[str, set[str]]:
    """The graph without imports made only for type checkers."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(paths)
    return {name: imports_of(path, name, known, runtime=True) for name, path in paths.items()}


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for other in edges[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    return seen


def test_the_judging_floor_builds_on_nothing_above_it():
    edges = runtime_graph()
    floor = {n for n in edges if n == FLOOR or n.startswith(FLOOR + ".")}
    assert {"kiln.validation.verdicts", "kiln.validation.drain", "kiln.validation.results"} <= floor
    allowed = floor | BELOW_FLOOR | {n for n in edges if n.startswith("kiln_node")}
    above = {name: sorted(reachable(edges, name) - allowed) for name in sorted(floor)}
    assert {name: found for name, found in above.items() if found} == {}


def test_the_floor_rule_sees_an_import_from_above():
    edges = {"kiln.validation.x": {"kiln.report.document"}, "kiln.report.document": set()}
    assert reachable(edges, "kiln.validation.x") - BELOW_FLOOR == {"kiln.report.document"}


def test_a_verdicts_exit_code_is_decided_in_one_place():
    """5 (a node failed) is only ever kiln.validation.verdicts.exit_code's answer: every
    command that judges exits by it, none compares verdicts to pick a code itself."""
    found = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "VALIDATION_FAILED" in path.read_text()
    ]
    assert sorted(found) == ["errors.py", "validation/verdicts.py"]


# Modules meant for node-side code to import as they are (Kiln's node library will ship
# them): the standard library only, nothing of Kiln's or a third party's.
STANDARD_LIBRARY_ONLY = ("kiln.cloud", "kiln.gpu_models")


def test_modules_meant_for_the_nodes_import_the_standard_library_only():
    found = {}
    for name in STANDARD_LIBRARY_ONLY:
        tree = ast.parse((PACKAGE.parent / f"{name.replace('.', '/')}.py").read_text())
        tops = {
            alias.name.split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.Import)
            for alias in n.names
        } | {
            (n.module or "").split(".")[0] if not n.level else "."
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
        }
        found[name] = sorted(tops - set(sys.stdlib_module_names) - {"__future__"})
    assert found == {name: [] for name in STANDARD_LIBRARY_ONLY}


def test_the_inventory_checks_reach_each_roles_module_through_the_registry():
    """kiln.roles names each role's module and imports it only when asked (a filter that
    reads a role's defaults loads no other role); kiln.inventory.checks takes every
    role's checks from it, so a new role is one entry there, not another import here."""
    from kiln import roles

    edges = runtime_graph()
    assert edges["kiln.roles"] == {"kiln.paths"}
    modules = {role.module for role in roles.ROLES.values() if role.module}
    assert sorted(edges["kiln.inventory.checks"] & modules) == []


# A campaign's steps: the flow (select, hold, conclude, act, report, exit code) and what
# it runs between (collect, pairs, the burn-in judging, the drain decisions). Only a
# campaign drives them, so a new flow (a rollout's batches) is another campaign, not a
# command or a report that strings the steps together again. Commands start campaigns,
# so they may import them. (assess, judgements into node verdicts, is the floor's, which
# every report uses: Report.judge_nodes.)
CAMPAIGN_STEPS = {
    "kiln.campaigns.campaign",
    "kiln.validation.collect",
    "kiln.validation.pairs",
    "kiln.validation.burn_in_judge",
    "kiln.validation.drain",
}
# The validate role's filter runs the hold's Slurm steps in the play: it reads the node
# states through kiln.validation.drain, as the campaign does.
FILTERS_RUNNING_A_STEP = {"kiln_validate.py": {"kiln.validation.drain"}}
# Modules of a campaign's own rounds outside kiln/campaigns/ (kiln.campaigns.rollout
# drives kiln.rollout.batch).
ROUNDS_OF_A_CAMPAIGN = ("kiln.rollout.batch", "kiln.rollout.summary")


def steps_imported(name: str, deps: set[str]) -> set[str]:
    """The steps `name` imports that are not its own to import: a command may import
    the campaign flow (it starts a campaign), nothing else of the steps."""
    # kiln.rollout's batch state machine and summary are the rollout campaign's rounds
    # and conclusion, kept beside its plan, record and waits; only it drives them.
    if name.startswith(("kiln.campaigns.", FLOOR + ".", *ROUNDS_OF_A_CAMPAIGN)):
        return set()
    if name == "kiln.campaigns":
        return set()
    if name == "kiln.commands" or name.startswith("kiln.commands."):
        return deps & CAMPAIGN_STEPS - {"kiln.campaigns.campaign"}
    return deps & CAMPAIGN_STEPS


def callers_of_steps(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Modules outside the campaigns and the judging floor that import a step."""
    return {
        name: sorted(found) for name, deps in edges.items() if (found := steps_imported(name, deps))
    }


def test_campaigns_are_the_only_callers_of_the_steps():
    edges = graph()
    assert set(edges) >= CAMPAIGN_STEPS
    assert callers_of_steps(edges) == {}
    known = set(edges)
    plugins = {
        path.name: sorted(imports_of(path, "filter", known) & CAMPAIGN_STEPS)
        for path in sorted((REPO / "plugins").rglob("*.py"))
    }
    assert {name: steps for name, steps in plugins.items() if steps} == {
        name: sorted(steps) for name, steps in FILTERS_RUNNING_A_STEP.items()
    }


def test_the_steps_rule_sees_a_command_that_runs_a_step():
    edges = {
        "kiln.commands.rollout": {"kiln.validation.drain", "kiln.errors"},
        "kiln.commands.validate": {"kiln.campaigns.campaign"},
        "kiln.campaigns.validate": {"kiln.campaigns.campaign"},
        "kiln.validation.collect": {"kiln.validation.drain"},
    }
    assert callers_of_steps(edges) == {"kiln.commands.rollout": ["kiln.validation.drain"]}


EXITS = {"exit", "SystemExit", "Exit"}  # sys.exit, ctx.exit, SystemExit, click's Exit


def literal_exit_codes(source: str) -> list[str]:
    """Each exit in `source` whose code is written as a number (`sys.exit(5)`), not
    named (`ExitCode.VALIDATION_FAILED`) nor derived (`exit_code(verdict)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in EXITS:
            continue
        numbers = [
            part
            for part in ast.walk(node.args[0])
            if isinstance(part, ast.Constant) and type(part.value) is int
        ]
        if numbers:
            found.append(ast.unparse(node))
    return found


def test_commands_decide_no_exit_code_by_a_literal_number():
    """Exit codes are ExitCode's (documented in docs/cli.md): a command exits with a
    named one or with what the library judged (verdicts.exit_code), never a bare int."""
    found = {
        str(path.relative_to(PACKAGE)): literal_exit_codes(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "commands" in path.parts or module_name(path) in ENTRY_POINTS
    }
    assert len(found) > 10
    assert {path: calls for path, calls in found.items() if calls} == {}


def test_a_literal_exit_code_is_found_however_it_exits():
    source = """
sys.exit(5)
ctx.exit(2)
raise SystemExit(1)
raise click.exceptions.Exit(3 if failed else 0)
sys.exit(int(ExitCode.FAILED))
sys.exit(int(exit_code(verdict)))
ctx.exit()
"""
    assert literal_exit_codes(source) == [
        "sys.exit(5)",
        "ctx.exit(2)",
        "SystemExit(1)",
        "click.exceptions.Exit(3 if failed else 0)",
    ]


# The node programs (roles/*/files, run by a node's own python3): the standard library
# and Kiln's node library only; the load generators also torch (validate_torch_python).
NODE_PROGRAM_EXTRAS = {"kiln-burn-stress": {"torch"}, "kiln-torch-bench": {"torch"}}


def test_node_programs_import_the_standard_library_and_kiln_node_only():
    programs = [
        path
        for path in sorted((REPO / "roles").glob("*/files/*"))
        if path.is_file()
        and path.read_bytes().startswith(b"#!")
        and b"python" in path.read_bytes()[:40]
    ]
    assert len(programs) >= 10
    found = {}
    for path in programs:
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
            n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
        }
        found[path.name] = sorted(
            name
            for name in names
            if name.split(".")[0] not in sys.stdlib_module_names
            and name != "kiln_node"
            and not name.startswith("kiln_node.")
            and name.split(".")[0] not in NODE_PROGRAM_EXTRAS.get(path.name, set())
        )
    assert found == {path.name: [] for path in programs}


# One name, one thing (docs/architecture.md, "Names"): a module's file name says what it
# holds, and no two files of Kiln's Python (cli/kiln, node_library/kiln_node, plugins)
# share one, but for the faces of one thing in parallel places:
# - X.py at the top of kiln, in kiln/commands, kiln/campaigns and kiln/roles: the
#   command `kiln X`, its flow, its library and the role X (drift, validate, health...);
# - settings.py in a role's package (kiln/roles/<role>/): that role's inventory
#   pre-flight, which kiln.roles reads from each;
# - plugins/action/X.py and plugins/modules/X.py: Ansible pairs an action with its
#   module by name.
PARALLEL = (
    re.compile(r"cli/kiln/(commands/|campaigns/|roles/)?\w+\.py"),
    re.compile(r"cli/kiln/roles/\w+/settings\.py"),
    re.compile(r"plugins/(action|modules)/\w+\.py"),
)


def repeated_names(paths: list[str]) -> dict[str, list[str]]:
    """File names (not __init__.py) given to more than one of `paths` (relative to the
    repository) where not every place is one of PARALLEL's, or the places differ in
    kind (a settings.py beside a command's module)."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        if name != "__init__.py":
            by_name.setdefault(name, []).append(path)
    wrong = {}
    for name, places in by_name.items():
        if len(places) < 2:
            continue
        kinds = {
            next((i for i, rule in enumerate(PARALLEL) if rule.fullmatch(p)), None) for p in places
        }
        if None in kinds or len(kinds) > 1:
            wrong[name] = sorted(places)
    return wrong


def test_no_file_name_is_given_to_two_things():
    paths = [
        str(path.relative_to(REPO))
        for top in ("cli/kiln", "node_library/kiln_node", "plugins")
        for path in (REPO / top).rglob("*.py")
    ]
    assert len(paths) > 150
    assert repeated_names(paths) == {}


def test_a_repeated_name_is_found_unless_it_is_one_things_faces():
    assert repeated_names(
        [
            "cli/kiln/drift.py",
            "cli/kiln/commands/drift.py",
            "cli/kiln/roles/validate.py",
            "cli/kiln/campaigns/validate.py",
            "cli/kiln/roles/monitoring/settings.py",
            "cli/kiln/roles/nvidia_driver/settings.py",
            "plugins/action/apt_present.py",
            "plugins/modules/apt_present.py",
            "cli/kiln/report/model.py",
            "cli/kiln/inventory/model.py",
            "cli/kiln/files.py",
            "node_library/kiln_node/files.py",
            "cli/kiln/settings.py",
            "cli/kiln/roles/slurm/settings.py",
            "cli/kiln/a/__init__.py",
            "cli/kiln/b/__init__.py",
        ]
    ) == {
        "model.py": ["cli/kiln/inventory/model.py", "cli/kiln/report/model.py"],
        "files.py": ["cli/kiln/files.py", "node_library/kiln_node/files.py"],
        # a settings.py that is no role's joins the roles' own: all are listed
        "settings.py": [
            "cli/kiln/roles/monitoring/settings.py",
            "cli/kiln/roles/nvidia_driver/settings.py",
            "cli/kiln/roles/slurm/settings.py",
            "cli/kiln/settings.py",
        ],
    }
