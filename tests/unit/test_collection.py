"""The collection kiln.cluster: built from this tree with ansible-galaxy, installed into a
collections path, run by plain ansible-playbook (no kiln CLI, no Kiln ansible.cfg), and
the execution environment definition that packs it for AWX and ansible-navigator."""

import ast
import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import kiln
from kiln import paths
from kiln.lab import image
from kiln.run import execute
from tests.collection import build_collection, install_collection, plain_ansible
from tests.conftest import REPO

VERSION = kiln.__version__


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    tarball = build_collection(tmp_path_factory.mktemp("dist"))
    assert tarball.name == f"kiln-cluster-{VERSION}.tar.gz"
    return tarball


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    return install_collection(built, tmp_path_factory.mktemp("collections"))


def test_the_collection_and_the_kiln_package_share_one_version():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"], galaxy["version"]) == ("kiln", "cluster", VERSION)
    requirements = (REPO / "meta/requirements.txt").read_text().split("\n")
    assert [line for line in requirements if line and not line.startswith("#")] == [
        f"kiln=={VERSION}"
    ]
    ee_collections = yaml.safe_load((REPO / "execution-environment/requirements.yml").read_text())
    assert ee_collections == {
        "collections": [{"name": f"/dist/kiln-cluster-{VERSION}.tar.gz", "type": "file"}]
    }
    assert f"## {VERSION}" in (REPO / "CHANGELOG.md").read_text()


def test_the_collection_holds_the_roles_playbooks_and_plugins_and_nothing_else(built):
    """And the AWX workflow of a sliced provision (docs/ansible.md)."""
    with tarfile.open(built) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("MANIFEST.json").read())
    top = {n.split("/")[0] for n in names}
    assert top == {
        "CHANGELOG.md",
        "FILES.json",
        "MANIFEST.json",
        "README.md",
        "extensions",
        "meta",
        "playbooks",
        "plugins",
        "roles",
    }
    # The same files as the tree `kiln` runs: one source, not a copy.
    for folder in ("roles", "playbooks", "plugins"):
        files = {
            str(p.relative_to(REPO))
            for p in (REPO / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
        assert {n for n in names if n.startswith(f"{folder}/") and n in files} == files
    assert {n for n in names if n.startswith("extensions/")} == {
        "extensions/awx",
        "extensions/awx/kiln-workflow.json",
    }
    assert {n for n in names if n.startswith("meta/")} == {
        "meta/execution-environment.yml",
        "meta/requirements.txt",
        "meta/runtime.yml",
    }
    assert manifest["collection_info"]["version"] == VERSION


def test_plain_ansible_playbook_runs_the_collections_roles_and_plugins(installed, tmp_path):
    """The base role's defaults through its lookup, and a filter, with only the
    collection installed: what an AWX or ansible-navigator run finds."""
    playbook = tmp_path / "probe.yml"
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  roles: [kiln.cluster.base]\n"
        "  post_tasks:\n"
        "    - ansible.builtin.debug:\n"
        '        msg: "{{ base_kiln_version }}'
        " {{ 'Port=6817' | kiln.cluster.kiln_conf_value('Port') }}\"\n"
        "      tags: [show]\n"
    )
    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(installed),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
    }
    # --tags show: the role's tasks are skipped; its defaults and plugins still load.
    done = plain_ansible(
        "ansible-playbook",
        *("-i", "localhost,", "-c", "local", str(playbook), "--tags", "show"),
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [shown] = [
        task["hosts"]["localhost"]["msg"]
        for task in json.loads(done.stdout)["plays"][0]["tasks"]
        if task["task"]["name"] == "ansible.builtin.debug"
    ]
    assert shown == f"{VERSION} 6817"
    # The collection's playbooks by name, their roles found in the collection.
    listed = plain_ansible(
        "ansible-playbook",
        *("-i", "localhost,", "kiln.cluster.site", "--list-tasks"),
        cwd=tmp_path,
        env={"ANSIBLE_COLLECTIONS_PATH": str(installed)},
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    roles = {line.split(" : ")[0].strip() for line in listed.stdout.splitlines() if " : " in line}
    assert {"kiln.cluster.base", "kiln.cluster.slurm", "kiln.cluster.munge"} <= roles
    assert all(role.startswith("kiln.cluster.") for role in roles), roles


def test_the_execution_environment_definition_makes_a_build_context(built, installed, tmp_path):
    """ansible-builder checks the definition's schema and lays out the build (the image
    is built by hand: bench/execution_environment.py). The build starts from Kiln's
    Debian base, installs with its apt wrapper and Debian's pip (no ensurepip, a RHEL
    step), and introspection finds the collection's Python requirement."""
    for name in ("execution-environment.yml", "execution-environment"):
        source = REPO / name
        target = tmp_path / name
        if source.is_dir():
            target.mkdir()
            for f in source.iterdir():
                (target / f.name).write_text(f.read_text())
        else:
            target.write_text(source.read_text())
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / built.name).write_bytes(built.read_bytes())
    context = tmp_path / "context"
    done = plain_ansible(
        "ansible-builder",
        *("create", "-f", "execution-environment.yml", "--context", str(context)),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (context / "_build/dist" / built.name).is_file()
    containerfile = (context / "Containerfile").read_text()
    for line in (
        f'ARG EE_BASE_IMAGE="{image.image_name("trixie", image.EE_BASE)}"',
        'ARG PYCMD="/usr/bin/python3"',
        f'ARG PKGMGR="{image.EE_APT}"',
        'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.19,<2.20 ansible-runner>=2.4"',
        "COPY _build/dist/ /dist/",
    ):
        assert line in containerfile
    assert "pip_install" not in containerfile
    # PyPI's unrelated "kiln": the builder and final stages install Kiln's wheel by path
    # before ansible-builder's pip installs of the collection's requirements.
    wheel = "RUN $PYCMD -m pip install --no-cache-dir --no-deps /dist/kiln-*.whl"
    stages = containerfile.split("\nFROM ")
    for stage, step in (
        ("builder", "RUN /output/scripts/assemble"),
        ("final", "RUN /output/scripts/install-from-bindep"),
    ):
        [text] = [s for s in stages if s.startswith(f"base AS {stage}")]
        assert text.index(wheel) < text.index(step)
    introspect = context / "_build/scripts/introspect.py"
    found = subprocess.run(
        [
            *(sys.executable, str(introspect), "introspect"),
            *("--user-pip", str(context / "_build/requirements.txt"), str(installed)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    python = yaml.safe_load(found.stdout)["python"]
    assert python == [
        f"kiln=={VERSION}  # from collection kiln.cluster",
        "ansible>=12,<13  # from collection user",
    ]


def test_the_roles_name_their_plugins_as_the_collections():
    """Inside a collection, Ansible finds a role's filters and lookups only by their full
    name: a bare one works from a checkout and breaks in the collection."""
    bare = re.compile(r"\|\s*kiln_\w+|lookup\(\s*['\"]kiln_")
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for folder in ("roles", "playbooks")
        for path in (REPO / folder).rglob("*")
        if path.suffix in (".yml", ".j2")
        for match in bare.finditer(path.read_text())
    ]
    assert found == []


def test_kiln_reaches_its_own_content_as_the_collection(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path))
    root = paths.content_root().resolve()
    ours = tmp_path / "collections" / hashlib.sha256(str(root).encode()).hexdigest()[:12]
    link = ours / "ansible_collections/kiln/cluster"
    assert paths.collections_dir() == ours
    assert link.resolve() == root
    # A link broken or changed by hand is pointed at this content again.
    link.unlink()
    link.symlink_to(tmp_path)
    paths.collections_dir()
    assert link.resolve() == root
    assert sorted(p.name for p in link.parent.iterdir()) == ["cluster"]
    # Another checkout or install sharing the state directory gets a link of its own.
    other = tmp_path / "other-checkout"
    (other / "playbooks").mkdir(parents=True)
    monkeypatch.setattr(paths, "content_root", lambda: other)
    theirs = paths.collections_dir()
    assert theirs.parent == ours.parent and theirs != ours
    assert (theirs / "ansible_collections/kiln/cluster").resolve() == other
    assert link.resolve() == root


# ansible-test's sanity tests that need nothing from the network. The others (pep8,
# pylint, import, yamllint, validate-modules, ansible-doc, runtime-metadata) first
# bootstrap pip from ci-files.testing.ansible.com, which Kiln's CI cannot reach; shebang
# rejects the node scripts' `#!/usr/bin/env python3` (Debian nodes have no `python`).
OFFLINE_SANITY = [
    "action-plugin-docs",
    "changelog",
    "compile",
    "empty-init",
    "ignores",
    "line-endings",
    "no-assert",
    "no-get-exception",
    "no-illegal-filenames",
    "no-smart-quotes",
    "pslint",
    "replace-urlopen",
    "shellcheck",
    "symlinks",
    "use-argspec-type-path",
    "use-compat-six",
]


def test_ansible_test_sanity_passes_what_runs_offline(installed):
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    tests = [arg for name in OFFLINE_SANITY for arg in ("--test", name)]
    done = plain_ansible(
        "ansible-test",
        *("sanity", "--python", python, *tests),
        cwd=installed / "ansible_collections/kiln/cluster",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = set(re.findall(r'Running sanity test "([^"]+)"', done.stdout + done.stderr))
    assert ran == set(OFFLINE_SANITY)


def test_kilns_own_collection_comes_before_the_operators(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    ours = str(paths.collections_dir())
    assert ours.startswith(f"{tmp_path}/collections/")
    found = execute.ansible_env()["ANSIBLE_COLLECTIONS_PATH"]
    assert found == f"{ours}:~/.ansible/collections:/usr/share/ansible/collections"
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", "/opt/site-collections")
    assert execute.ansible_env()["ANSIBLE_COLLECTIONS_PATH"] == f"{ours}:/opt/site-collections"


def test_kiln_enables_its_filter_preload_after_the_operators_callbacks(monkeypatch):
    monkeypatch.delenv("ANSIBLE_CALLBACKS_ENABLED", raising=False)
    assert execute.ansible_env()["ANSIBLE_CALLBACKS_ENABLED"] == "kiln.cluster.preload_filters"
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.profile_tasks,timer")
    assert execute.ansible_env()["ANSIBLE_CALLBACKS_ENABLED"] == (
        "ansible.posix.profile_tasks,timer,kiln.cluster.preload_filters"
    )


PRELOAD = """
import sys
from ansible.plugins.loader import callback_loader, init_plugin_loader
init_plugin_loader(sys.argv[1].split(":"))
callback_loader.get("kiln.cluster.preload_filters")
prefix = "ansible_collections.kiln.cluster.plugins.filter."
print(" ".join(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix))))
"""


def test_the_preload_callback_loads_every_filter_file_of_the_collection():
    """Loaded in ansible-playbook's own process, every worker it forks has them."""
    done = subprocess.run(
        [sys.executable, "-c", PRELOAD, execute.collections_path()],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == sorted(p.stem for p in REPO.glob("plugins/filter/*.py"))


@pytest.mark.parametrize(
    "module", sorted((REPO / "plugins/modules").glob("*.py")), ids=lambda p: p.name
)
def test_each_modules_documentation_is_yaml_ansible_doc_can_read(module):
    """ansible-doc and ansible-lint read DOCUMENTATION, EXAMPLES and RETURN as YAML (a
    line with ': ' in a plain list item is a mapping there); ansible-lint only logs one it
    cannot parse, and ansible-test's validate-modules is not offline (above)."""
    found = {
        node.targets[0].id: node.value.value
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.targets[0], ast.Name)
    }
    assert {"DOCUMENTATION", "EXAMPLES", "RETURN"} <= set(found)
    documentation = yaml.safe_load(found["DOCUMENTATION"])
    assert documentation["module"] == module.stem
    assert all(isinstance(line, str) for line in documentation["description"])
    assert isinstance(yaml.safe_load(found["EXAMPLES"]), list)
    yaml.safe_load(found["RETURN"])
