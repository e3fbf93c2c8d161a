"""The apt_present action plugin: which commands it runs on the node for each state, and
when it hands the task to ansible.builtin.apt (with which arguments). The node answers
with recorded dpkg-query and apt-cache output; apt's answer is a recorded one, returned
whole. Real apt behind it: tests/cli/test_runner_local.py and the report of issue 44."""

import shlex
from types import SimpleNamespace

import pytest

from kiln import packages
from tests.collection import collection_plugin

apt_present = collection_plugin("action", "apt_present")

DPKG = shlex.join(packages.query_argv(["x"]))[: -len(" x")]
POLICY = "env LC_ALL=C apt-cache policy"
AGE = shlex.join(packages.cache_age_argv())
LISTS = shlex.join(packages.lists_index_argv())
INDEX = "/var/lib/apt/lists/deb.debian.org_debian_dists_trixie_main_binary-amd64_Packages\n"

# What dpkg-query prints: one installed, one removed with its configuration kept, one it
# knows as not installed; the names it never saw go to stderr (exit 1).
STATUS = {
    "lmod": "lmod\t8.7.58-1\tinstalled\n",
    "environment-modules": "environment-modules\t5.2.0-1\tconfig-files\n",
    "tcl": "tcl\t8.6.14\tnot-installed\n",
    "nvidia-driver": "nvidia-driver\t575.57.08-1\tinstalled\n",
    "nvidia-kernel-open-dkms": "nvidia-kernel-open-dkms\t575.57.08-1\tinstalled\n",
}
# apt-cache policy with the driver pinned one version down from what is installed.
POLICY_OUT = {
    "nvidia-driver": (
        "nvidia-driver:\n  Installed: 575.57.08-1\n  Candidate: 575.57.08-1\n  Version table:\n"
        " *** 575.57.08-1 1001\n        500 https://developer.download.nvidia.com/compute/"
        "cuda/repos/debian12/x86_64  Packages\n        100 /var/lib/dpkg/status\n"
    ),
    "nvidia-kernel-open-dkms": (
        "nvidia-kernel-open-dkms:\n  Installed: 575.57.08-1\n  Candidate: 570.172.08-1\n"
        "  Version table:\n *** 575.57.08-1 100\n        100 /var/lib/dpkg/status\n"
        "     570.172.08-1 1001\n        500 https://developer.download.nvidia.com/compute/"
        "cuda/repos/debian12/x86_64  Packages\n"
    ),
}
# ansible.builtin.apt's answer to a purge in check mode with --diff (from a container).
APT_PURGE = {
    "changed": True,
    "diff": {
        "prepared": "Reading package lists...\nBuilding dependency tree...\nThe following "
        "packages will be REMOVED:\n  lmod*\n0 upgraded, 0 newly installed, 1 to remove and "
        "0 not upgraded."
    },
    "stdout": "Purg lmod [8.7.58-1]\n",
}


class Node:
    """Answers the plugin's commands as a node would, and keeps what it was asked."""

    def __init__(self, lists_age: int = 60, apt: dict | None = None, lists: str = INDEX):
        self.lists_age = lists_age
        self.lists = lists
        self.apt = apt or {"changed": True}
        self.commands: list[str] = []
        self.apt_args: list[dict] = []

    def command(self, cmd: str, **_: object) -> dict:
        self.commands.append(cmd)
        if cmd == AGE:
            return {"rc": 0, "stdout": f"{self.lists_age}\n"}
        if cmd == LISTS:
            return {"rc": 0, "stdout": self.lists}
        names = cmd.split(" -- ")[-1].split() if cmd.startswith(DPKG) else cmd.split()[4:]
        table = STATUS if cmd.startswith(DPKG) else POLICY_OUT
        known = [n for n in names if n in table]
        rc = 0 if len(known) == len(names) or not cmd.startswith(DPKG) else 1
        return {"rc": rc, "stdout": "".join(table[n] for n in known)}

    def module(self, module_name: str, module_args: dict, task_vars: dict) -> dict:
        assert module_name == "ansible.builtin.apt"
        self.apt_args.append(module_args)
        return dict(self.apt)


def run(args: dict, node: Node, check_mode: bool = False) -> dict:
    task = SimpleNamespace(
        args=args, async_val=0, check_mode=check_mode, action="kiln.cluster.apt_present"
    )
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp/kiln"))
    plugin = apt_present.ActionModule(task, connection, None, None, None, None)
    plugin._low_level_execute_command = node.command
    plugin._execute_module = node.module
    return plugin.run(task_vars={})


def dpkg(*names: str) -> str:
    return shlex.join(packages.query_argv(list(names)))


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("purge", [False, True])
def test_absent_with_nothing_installed_asks_dpkg_only(purge, check_mode):
    node = Node()
    names = ["tcl", "kiln-no-such-package"] + ([] if purge else ["environment-modules"])
    result = run({"name": names, "state": "absent", "purge": purge}, node, check_mode)
    done = "not installed (purged): " if purge else "not installed: "
    assert result == {"changed": False, "msg": done + ", ".join(names)}
    assert node.commands == [dpkg(*names)]
    assert node.apt_args == []


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_purge_asks_apt_for_what_is_still_there_and_returns_its_answer(check_mode):
    """config-files counts for a purge; apt's answer (its check mode, its diff) is whole."""
    node = Node(apt=APT_PURGE)
    names = ["lmod", "environment-modules", "tcl", "kiln-no-such-package"]
    args = {"name": names, "state": "absent", "purge": True}
    assert run(args, node, check_mode) == APT_PURGE
    assert node.commands == [dpkg(*names)]
    assert node.apt_args == [
        {"state": "absent", "purge": True, "name": ["lmod", "environment-modules"]}
    ]


def test_a_remove_leaves_the_configuration_of_one_removed_alone():
    node = Node()
    args = {"pkg": ["environment-modules", "lmod"], "state": "absent"}
    assert run(args, node) == {"changed": True}
    assert node.apt_args == [{"state": "absent", "name": ["lmod"]}]


DRIVER = {
    "state": "latest",
    "install_recommends": False,
    "allow_downgrade": True,
    "allow_change_held_packages": True,
}


def test_latest_at_the_candidate_asks_apt_cache_policy_and_dpkg_only():
    node = Node()
    result = run({**DRIVER, "name": ["nvidia-driver"]}, node, check_mode=True)
    assert result == {"changed": False, "msg": "at apt's candidate version: nvidia-driver"}
    assert node.commands == [f"{POLICY} nvidia-driver", dpkg("nvidia-driver")]
    assert node.apt_args == []


@pytest.mark.parametrize(
    "names",
    [
        ["nvidia-driver", "nvidia-kernel-open-dkms"],  # pinned down: the candidate differs
        ["nvidia-driver", "tcl"],  # not installed
        ["nvidia-driver", "kiln-no-such-package"],  # unknown to dpkg and apt
    ],
)
def test_latest_off_the_candidate_runs_apt_with_the_task_as_given(names):
    node = Node()
    assert run({**DRIVER, "name": names}, node) == {"changed": True}
    assert node.commands == [f"{POLICY} {' '.join(names)}", dpkg(*names)]
    assert node.apt_args == [{**DRIVER, "name": names}]


CACHE = {"name": ["lmod"], "state": "present", "update_cache": True, "cache_valid_time": 3600}


@pytest.mark.parametrize("age", [0, 3600, 3601, 30 * 86400])
@pytest.mark.parametrize("args", [CACHE, {"name": ["lmod"], "state": "present"}])
def test_installed_packages_are_answered_by_dpkg_whatever_the_lists_age(age, args):
    """A re-run a day later sends no node to its mirror for packages it has."""
    node = Node(lists_age=age)
    assert run(args, node) == {"changed": False, "msg": "installed: lmod"}
    assert node.commands == [dpkg("lmod")]
    assert node.apt_args == []


@pytest.mark.parametrize(("lists", "update"), [(INDEX, {}), ("", {"update_cache": True})])
@pytest.mark.parametrize(
    ("args", "valid"),
    [
        (CACHE, 3600),
        ({"name": ["lmod"], "state": "present"}, 3600),
        ({**CACHE, "cache_valid_time": 600}, 600),
    ],
)
def test_an_install_runs_on_lists_no_older_than_asked_updated_where_emptied(
    lists, update, args, valid
):
    """An install gets lists no older than the task's cache_valid_time, an hour where it
    names none (apt judges their age). An image's build emptied the lists: their
    directory reads as recent, and apt alone would skip the update and find no package."""
    node = Node(lists_age=60, lists=lists)
    args = {**args, "name": ["tcl"]}
    assert run(args, node) == {"changed": True}
    assert node.commands == [dpkg("tcl"), LISTS]
    expected = args | {"update_cache": True, "cache_valid_time": valid}
    if update:
        expected = {k: v for k, v in expected.items() if k != "cache_valid_time"} | update
    assert node.apt_args == [expected]


def test_latest_on_lists_older_than_asked_goes_to_apt_to_update_them():
    """latest compares with apt's candidate: lists past cache_valid_time are updated first."""
    node = Node(lists_age=3601)
    args = {**DRIVER, "name": ["nvidia-driver"], "update_cache": True, "cache_valid_time": 3600}
    assert run(args, node) == {"changed": True}
    assert node.commands == [AGE]
    assert node.apt_args == [args]


@pytest.mark.parametrize(
    ("args", "commands"),
    [
        ({**CACHE, "cache_valid_time": 0}, []),  # update_cache alone: always
        ({**CACHE, "cache_valid_time": "soon"}, []),
        ({"name": ["lmod"], "state": "absent", "autoremove": True}, []),
        ({"name": ["lmod=8.7.58-1"], "state": "absent"}, []),  # a version: apt's to judge
        ({"name": ["lmod=8.7.58-1"], "state": "latest"}, []),
        ({"name": ["nvidia-*"], "state": "absent"}, []),
        ({"name": [], "state": "absent"}, []),
    ],
)
def test_what_dpkg_cannot_answer_goes_to_apt_unchanged(args, commands):
    node = Node(lists_age=3601)
    assert run(args, node) == {"changed": True}
    assert node.commands == commands
    assert node.apt_args == [args]
