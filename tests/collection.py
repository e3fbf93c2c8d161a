"""kiln.cluster built and installed as a user of plain Ansible has it: ansible-galaxy and
ansible-playbook from this environment, with none of the checkout's ansible.cfg and
none of the CLI's settings."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

BIN = Path(sys.executable).parent


def plain_ansible(
    *command: str, cwd: Path, env: dict | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Runs an Ansible command with only the caller's settings (env), from cwd: a
    directory of the caller's, away from the checkout's ansible.cfg."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "KILN_"))}
    return subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def build_collection(out: Path) -> Path:
    """The collection's tarball, built from this tree into out."""
    done = plain_ansible(
        "ansible-galaxy", "collection", "build", "--output-path", str(out), str(REPO), cwd=out
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (tarball,) = out.glob("kiln-cluster-*.tar.gz")
    return tarball


def install_collection(tarball: Path, where: Path) -> Path:
    """The tarball installed into the collections path where."""
    where.mkdir(parents=True, exist_ok=True)
    # --force: a kiln.cluster installed elsewhere (~/.ansible/collections) is no reason to
    # skip this path.
    done = plain_ansible(
        "ansible-galaxy",
        *("collection", "install", "--force", "-p", str(where), str(tarball)),
        cwd=where,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return where


def local_playbook(playbook: Path, *options: str, timeout: float | None = None) -> dict:
    """ansible-playbook on this machine (localhost, no SSH) with the checkout's
    collection, from the playbook's directory: the json callback's report, the run
    having passed."""
    from kiln.run import execute

    done = plain_ansible(
        "ansible-playbook",
        *("-i", "localhost,", "-c", "local", *options, str(playbook)),
        cwd=playbook.parent,
        env={
            "ANSIBLE_COLLECTIONS_PATH": execute.collections_path(),
            "ANSIBLE_STDOUT_CALLBACK": "json",
        },
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


# What a fresh interpreter runs to import one plugin of the checkout's kiln.cluster as
# Ansible does (argv: collections path, kind, name); the caller adds what to print.
IMPORT_PLUGIN = (
    "import importlib, sys\n"
    "from ansible.plugins.loader import init_plugin_loader\n"
    "init_plugin_loader([sys.argv[1]])\n"
    "importlib.import_module(f'ansible_collections.kiln.cluster.plugins.{sys.argv[2]}.{sys.argv[3]}')\n"
)


def collection_plugin(kind: str, name: str) -> ModuleType:
    """A plugin of the checkout's kiln.cluster (kind: filter, lookup, action) imported as
    Ansible imports it, through the collection loader: its import of the collection's
    plugin_utils resolves as in a run."""
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    from kiln import paths

    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader([str(paths.collections_dir())])
    return importlib.import_module(f"ansible_collections.kiln.cluster.plugins.{kind}.{name}")
