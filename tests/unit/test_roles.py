"""kiln.roles: one entry per role, agreeing with roles/, the playbooks and the argument
specs; the inventory checks take each role's checks from it."""

import re
import sys
import types

import pytest
import yaml

from kiln import argspec, paths, roles, schedules, setting_kinds
from kiln.inventory import checks, reader
from tests.conftest import REPO, cluster_inventory


def test_every_role_directory_has_an_entry_and_every_entry_a_directory():
    assert sorted(roles.ROLES) == sorted(p.name for p in paths.roles_dir().iterdir() if p.is_dir())


PREFLIGHT_ENTRIES = {"preflight", "variables", "values"}


def applied_roles(play: dict) -> set[str]:
    """The roles a play applies: its `roles:`, and those its tasks include or import
    (but a role's pre-flight tasks, which the Pre-flight play runs on every node, and its
    variables alone, which that play imports to check them, and base's values check)."""
    found = {r if isinstance(r, str) else r["role"] for r in play.get("roles") or []}
    for task in [*(play.get("pre_tasks") or []), *(play.get("tasks") or [])]:
        for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if action in task and task[action].get("tasks_from") not in PREFLIGHT_ENTRIES:
                found.add(task[action]["name"])
    return found


def groups_of(pattern: str) -> set[str]:
    """slurm_controller[0]:slurm_compute -> {slurm_controller, slurm_compute}."""
    return {re.sub(r"\[.*\]$", "", part) for part in pattern.split(":")}


# `kiln image build`'s playbook: its one host is a build container, not a node of the
# cluster (test_the_image_applies_only_roles_of_compute_nodes).
IMAGE = "image.yml"


def playbook_groups() -> dict[str, set[str]]:
    """Each role's groups, read from the plays of every playbook that apply it."""
    found: dict[str, set[str]] = {}
    for playbook in sorted(paths.playbooks_dir().glob("*.yml")):
        if playbook.name == IMAGE:
            continue
        for play in yaml.safe_load(playbook.read_text()):
            for role in applied_roles(play) if "hosts" in play else ():
                found.setdefault(role, set()).update(groups_of(play["hosts"]))
    return found


def test_each_roles_groups_are_those_its_plays_run_on():
    """The health role's active check runs on the first controller, validate's controller
    steps too: the checks judge every controller, any of which may come first. The
    node_library role has none: no play applies it, only other roles."""
    applied = {name: set(role.groups) for name, role in roles.ROLES.items() if role.groups}
    assert applied == playbook_groups()
    assert [name for name, role in roles.ROLES.items() if not role.groups] == ["node_library"]


def test_the_image_applies_only_roles_of_compute_nodes():
    [play] = yaml.safe_load((paths.playbooks_dir() / IMAGE).read_text())
    assert play["hosts"] == "slurm_compute"
    assert play["vars"]["kiln_image"] is True
    outside = {
        role
        for role in applied_roles(play)
        if not {"all", "slurm_compute"} & set(roles.ROLES[role].groups)
    }
    assert outside == set()


def test_the_playbooks_are_read_for_roles_and_their_hosts():
    health = yaml.safe_load((paths.playbooks_dir() / "health.yml").read_text())
    assert [applied_roles(play) for play in health] == [{"health"}, {"health"}]
    assert [groups_of(play["hosts"]) for play in health] == [
        {"slurm_compute"},
        {"slurm_controller"},
    ]
    preflight = yaml.safe_load((paths.playbooks_dir() / "preflight.yml").read_text())
    assert applied_roles(preflight[0]) == set()


def test_every_variable_a_role_declares_begins_with_its_prefix():
    """Or is one of the cluster-wide settings, declared by the role named for it."""
    catalogue = argspec.load_catalogue(paths.roles_dir())
    unprefixed = {
        n: v.role for n, v in catalogue.items() if not n.startswith(roles.ROLES[v.role].prefix)
    }
    assert unprefixed == roles.CLUSTER_WIDE == {"rollout_max_unavailable": "nvidia_driver"}
    assert roles.ROLES["nvidia_driver"].prefix == "nvidia_driver_"


def test_each_roles_module_and_checks():
    found = {
        name: (
            getattr(role.logic(), "__name__", None),
            getattr(role.settings_check(), "__module__", None),
            sorted(role.value_checks()),
        )
        for name, role in roles.ROLES.items()
    }
    assert found == {
        "base": (
            "kiln.roles.base",
            None,
            [
                "ansible_host",
                "base_apt_proxy",
                "base_limits",
                "base_ntp_allow",
                "base_ntp_servers",
                "base_sysctl",
                "base_systemd_limits",
                "kiln_address",
            ],
        ),
        "node_library": ("kiln.roles.node_library", None, []),
        "nvidia_driver": (
            "kiln.roles.nvidia_driver",
            "kiln.roles.nvidia_driver.settings",
            ["rollout_max_unavailable"],
        ),
        "glusterfs_server": (None, None, []),
        "autofs": ("kiln.roles.autofs", None, ["autofs_default_options", "autofs_mounts"]),
        "health": ("kiln.roles.health", "kiln.roles.health", []),
        "munge": ("kiln.roles.munge", None, ["munge_key_b64"]),
        "slurm": (
            "kiln.roles.slurm",
            None,
            [
                "slurm_cgroup_conf",
                "slurm_conf_defaults",
                "slurm_conf_overrides",
                "slurm_dbd_password",
                "slurm_epilog_extra",
                "slurm_health_node_state",
                "slurm_node_shape",
                "slurm_partitions",
                "slurm_prolog_extra",
            ],
        ),
        "repair": ("kiln.roles.repair", "kiln.roles.repair", ["bmc_address"]),
        "mpi": ("kiln.roles.mpi", None, ["mpi_module_path"]),
        "hpcx": ("kiln.roles.hpcx", "kiln.roles.hpcx", []),
        "nccl_env": ("kiln.roles.nccl_env", None, ["nccl_env_overrides"]),
        "nccl_tests": ("kiln.roles.nccl_tests", "kiln.roles.nccl_tests", []),
        "enroot": ("kiln.roles.enroot", "kiln.roles.enroot", []),
        "pyxis": ("kiln.roles.pyxis", "kiln.roles.pyxis", []),
        "monitoring": (
            "kiln.roles.monitoring",
            "kiln.roles.monitoring.settings",
            ["monitoring_dcgm_exporter_hosts", "monitoring_scrape_hosts", "monitoring_servers"],
        ),
        "validate": ("kiln.roles.validate", None, ["validate_profile"]),
    }


def test_the_value_checks_are_the_kinds_the_roles_and_the_scheduled_validates():
    """A role's value check names one of its own variables (base also owns the hosts'
    addresses, repair the hosts' BMCs); kiln.setting_kinds judges others by their kind,
    each variable in one place; kiln.schedules adds the one no role runs."""
    owners = {name: role.name for role in roles.ROLES.values() for name in role.value_checks()}
    assert {name: owner for name, owner in owners.items() if not name.startswith(owner + "_")} == {
        "ansible_host": "base",
        "kiln_address": "base",
        "bmc_address": "repair",
        **roles.CLUSTER_WIDE,
    }
    assert set(owners).isdisjoint(setting_kinds.KINDS)
    assert sorted(checks.VALUE_CHECKS) == sorted(
        [*owners, *setting_kinds.KINDS, schedules.VARIABLE]
    )


def test_every_kind_names_a_variable_a_role_declares_and_its_default_fits():
    """A typo in the table would check nothing; a default the table refuses would stop
    every provision (a Jinja default is the role's pre-flight's to judge, resolved)."""
    catalogue = argspec.load_catalogue(paths.roles_dir())
    assert [name for name in setting_kinds.KINDS if name not in catalogue] == []
    refused = {
        name: checks.value_problems(name, default, {})
        for role in roles.ROLES
        for name, default in roles.defaults(role).items()
        if name in setting_kinds.KINDS and not argspec.is_template(default)
    }
    assert {name: problems for name, problems in refused.items() if problems} == {}


def test_every_role_with_checked_values_checks_them_first():
    """Each role's first task is the values check, imported by name (base's
    tasks_from: values; base imports its own file), or the pre-flight file that begins
    with it, in every entry point its plays apply; the check reads the variables
    kiln_checked_variables names."""
    by_name = {"name": "kiln.cluster.base", "tasks_from": "values"}
    entries = {"health": ["main.yml", "active.yml"], "repair": ["main.yml", "controller.yml"]}
    missing = []
    for name in roles.ROLES:
        if not checks.role_variables(name):
            continue
        for entry in entries.get(name, ["main.yml"]):
            tasks = yaml.safe_load((paths.roles_dir() / name / "tasks" / entry).read_text())
            if tasks[0].get("ansible.builtin.import_tasks") == "preflight.yml":
                preflight = paths.roles_dir() / name / "tasks" / "preflight.yml"
                tasks = yaml.safe_load(preflight.read_text())
            first = tasks[0].get("ansible.builtin.import_role", tasks[0])
            if name == "base":
                first = tasks[0].get("ansible.builtin.import_tasks")
            if first != ("values.yml" if name == "base" else by_name):
                missing.append(f"{name}/{entry}")
    assert missing == []


def test_no_role_reaches_into_another_by_a_relative_path():
    """Roles use one another by name (import_role, include_role, meta dependencies),
    never by a path such as ../../base/tasks/values.yml."""
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted(paths.roles_dir().glob("*/**/*.yml"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "../" in line and not line.lstrip().startswith("#")
    ]
    assert found == []


def test_a_role_on_all_runs_on_every_host_once_in_its_groups_order():
    groups = {"slurm_controller": ["ctl1"], "slurm_compute": ["gpu1", "ctl1"]}
    assert roles.ROLES["pyxis"].hosts(groups, ["x"]) == ["ctl1", "gpu1"]
    assert roles.ROLES["health"].hosts(groups, ["x"]) == ["gpu1", "ctl1"]
    assert roles.ROLES["base"].hosts(groups, ["ctl1", "gpu1", "st1"]) == ["ctl1", "gpu1", "st1"]
    assert roles.ROLES["validate"].hosts({}, ["ctl1"]) == []


def test_defaults_are_read_as_written(tmp_path):
    """A Jinja expression stays its text; a role without defaults/main.yml has none."""
    role = tmp_path / "thing" / "defaults"
    role.mkdir(parents=True)
    (role / "main.yml").write_text(
        '---\nthing_dir: "{{ kiln_cache_dir }}/thing"\nthing_sizes: [1, 2]\nthing_on: true\n'
    )
    assert roles.defaults("thing", tmp_path) == {
        "thing_dir": "{{ kiln_cache_dir }}/thing",
        "thing_sizes": [1, 2],
        "thing_on": True,
    }
    assert roles.defaults("other", tmp_path) == {}
    enroot = roles.ROLES["enroot"].defaults()
    assert enroot["enroot_runtime_path"] == "{{ enroot_path }}/runtime/user-$(id -u)"


def test_each_roles_logic_is_the_module_named_after_it():
    """No translation from a role to its module: every role's logic is kiln.roles.<role>,
    and its filter plugin is plugins/filter/kiln_<role>.py; glusterfs_server has none."""
    found = {n: getattr(r.logic(), "__name__", None) for n, r in roles.ROLES.items()}
    assert {n: m for n, m in found.items() if m != f"kiln.roles.{n}"} == {"glusterfs_server": None}
    filters = {p.stem for p in (REPO / "plugins" / "filter").glob("kiln_*.py")}
    assert sorted(n for n in roles.ROLES if f"kiln_{n}" not in filters) == [
        "base",
        "glusterfs_server",
        "munge",
        "node_library",
        "repair",  # its settings are checked through the registry; no template needs it
    ]


def test_a_role_without_logic_is_one_without_its_module(monkeypatch):
    """A missing kiln.roles.<role> means no logic; a module that is there but fails to
    import is an error, not a role without logic."""
    assert roles.Role("glusterfs_server", ()).logic() is None
    assert roles.ROLES["health"].logic().__name__ == "kiln.roles.health"

    def broken(name):
        raise ModuleNotFoundError("No module named 'thing_dependency'", name="thing_dependency")

    monkeypatch.setattr(roles.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="thing_dependency"):
        roles.Role("thing", ()).logic()


def test_a_new_role_is_checked_on_its_hosts_by_its_entry_alone(write_inventory, monkeypatch):
    """One entry wires a role's module into `kiln inventory check`: its settings_problems
    is given each host's settings without the prefix, on the hosts of its groups only,
    and each problem names the hosts it applies to."""
    module = types.ModuleType("kiln.roles.thing")

    def settings_problems(settings):
        size = settings.get("size", 1)
        return [] if isinstance(size, int) else [f"thing_size {size!r}: expected a number"]

    module.settings_problems = settings_problems
    monkeypatch.setitem(sys.modules, "kiln.roles.thing", module)
    entry = roles.Role("thing", ("slurm_compute",))
    monkeypatch.setattr(roles, "ROLES", {"thing": entry})
    path = write_inventory(
        cluster_inventory(compute=("gpu001", "gpu002", "gpu003")),
        {
            "group_vars/all.yml": {"thing_size": "big"},
            "host_vars/gpu002.yml": {"thing_size": 4},
        },
    )
    spec, definitions = reader.read(path)
    assert checks.run(spec, definitions) == ["gpu[001,003]: thing_size 'big': expected a number"]


def test_every_role_has_a_generated_variables_table():
    """`make docs` writes each role's table where a doc marks it: its README, or the
    docs/ page of its subject."""
    docs = [*paths.content_root().glob("docs/*.md"), *paths.roles_dir().glob("*/README.md")]
    marked = "".join(doc.read_text() for doc in docs)
    assert [n for n in roles.ROLES if f"<!-- kiln:variables {n} -->" not in marked] == []


def test_the_driver_role_delegates_only_to_a_host_that_exists_without_a_controller():
    """The nvidia_driver role runs before Slurm exists (its Molecule scenario has no
    slurm_controller): delegate_to is templated before `when`, so it must name a host
    even then."""
    bare = "delegate_to: \"{{ groups['slurm_controller'][0] }}\""
    found = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "roles" / "nvidia_driver" / "tasks").glob("*.yml"))
        for number, text in enumerate(path.read_text().splitlines(), 1)
        if bare in text
    ]
    assert found == []


def test_the_site_preflight_has_every_checked_roles_variables_in_scope():
    """site.yml's pre-flight play checks the values of every role site.yml applies
    (roles/base/tasks/values.yml with `_values_roles`): each such role is imported in the
    play, which brings its defaults and vars wherever the import stands; a `variables`
    entry point has no step."""
    play = yaml.safe_load((paths.playbooks_dir() / "preflight.yml").read_text())[0]
    imports = [
        t["ansible.builtin.import_role"]
        for t in play["tasks"]
        if "ansible.builtin.import_role" in t
    ]
    wanted = {name for name in roles.ROLES if name != "validate" and checks.role_variables(name)}
    assert wanted - {i["name"] for i in imports} == set()
    variables = [i["name"] for i in imports if i.get("tasks_from") == "variables"]
    assert [
        name
        for name in variables
        if yaml.safe_load((paths.roles_dir() / name / "tasks" / "variables.yml").read_text())
    ] == []
    assert sorted(
        p.parent.parent.name for p in paths.roles_dir().glob("*/tasks/variables.yml")
    ) == sorted(variables)


def test_site_applies_each_role_to_the_hosts_of_its_groups():
    groups = {
        "all": ["ctl1", "gpu1", "st1"],
        "slurm_controller": ["ctl1"],
        "slurm_compute": ["gpu1"],
        "storage": ["st1"],
    }
    assert roles.applied_to("st1", groups) == ["base", "glusterfs_server", "autofs", "monitoring"]
    assert roles.applied_to("ctl1", groups) == [
        "base",
        "autofs",
        "health",
        "munge",
        "slurm",
        "repair",
        "pyxis",
        "monitoring",
    ]
    assert "validate" not in roles.applied_to("gpu1", groups)


def test_site_applies_every_role_at_its_site_entry_and_checks_their_specs_first():
    """site.yml hands its playbooks kiln_role_entry: site, each role's main steps without
    the argument spec check Ansible adds at `main`; its pre-flight play checks every
    role's spec at once (kiln_argument_spec), so each role it applies needs a `site`
    entry point that is main's steps, and no spec of its own for `site`."""
    applied = {name for name in roles.ROLES if name != "validate" and roles.ROLES[name].groups}
    entry = {"ansible.builtin.import_tasks": "main.yml", "name": "The role's steps"}
    assert {
        name: yaml.safe_load((paths.roles_dir() / name / "tasks" / "site.yml").read_text())
        for name in applied
    } == {name: [entry] for name in applied}
    for name in applied:
        spec = yaml.safe_load(
            (paths.roles_dir() / name / "meta" / "argument_specs.yml").read_text()
        )
        assert "site" not in spec["argument_specs"], name
    site = yaml.safe_load((paths.playbooks_dir() / "site.yml").read_text())
    assert [p.get("vars") for p in site if "ansible.builtin.import_playbook" in p][1:] == [
        {"kiln_role_entry": "site"}
    ] * (len([p for p in site if "ansible.builtin.import_playbook" in p]) - 1)
    preflight = yaml.safe_load((paths.playbooks_dir() / "preflight.yml").read_text())[0]
    assert [
        t["name"] for t in preflight["tasks"] if "ansible.builtin.validate_argument_spec" in t
    ] == ["Pre-flight: check each role's variables against its argument spec"]
