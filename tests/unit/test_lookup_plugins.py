"""The base role's kiln_version lookup, run by Ansible itself: plain ansible-playbook
records the same Kiln version in the node's fact as the CLI passes (no false drift
between the two)."""

import json
import os
import subprocess
import sys

import kiln
from kiln import paths
from tests.conftest import REPO


def test_kiln_version_lookup_is_the_packages_version(tmp_path):
    playbook = tmp_path / "version.yml"
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  roles: [base]\n"
        "  tasks: []\n"
        "  post_tasks:\n"
        "    - {ansible.builtin.debug: {var: base_kiln_version}, tags: [show]}\n"
    )
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": str(paths.collections_dir()),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
    }
    # --tags show: the role's tasks are skipped; its defaults and plugins still load.
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    command = [ansible_playbook, "-i", "localhost,", "-c", "local", str(playbook)]
    ran = subprocess.run(
        [*command, "--tags", "show"], capture_output=True, text=True, env=env, check=False
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [shown] = [
        task["hosts"]["localhost"]
        for task in json.loads(ran.stdout)["plays"][0]["tasks"]
        if task["task"]["name"] == "ansible.builtin.debug"
    ]
    assert shown["base_kiln_version"] == kiln.__version__
