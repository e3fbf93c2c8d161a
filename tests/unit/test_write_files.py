"""kiln.cluster.write_files, run by ansible-playbook on this machine: what it writes, what
it leaves alone, what check mode and diff report, and how it fails. The node library's
install through it (roles/base): tests/unit/test_node.py."""

import grp
import os
import pwd
import stat
import sys

from tests.collection import local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    files:
      - {{path: "{root}/lib/kiln/__init__.py", content: ""}}
      - {{path: "{root}/lib/kiln/node/files.py", content: "READ = 1\\n"}}
      - {{path: "{root}/lib/manifest", content: "e3b0  kiln/__init__.py\\n"}}
  module_defaults:
    kiln.cluster.write_files: {{owner: {owner}, group: {group}}}
  tasks:
    - name: First write
      kiln.cluster.write_files: {{files: "{{{{ files }}}}"}}
      diff: true
    - name: Again
      kiln.cluster.write_files: {{files: "{{{{ files }}}}"}}
    - name: A mode changed by hand
      ansible.builtin.file: {{path: "{root}/lib/kiln/node/files.py", mode: "0600"}}
    - name: Put back
      kiln.cluster.write_files: {{files: "{{{{ files }}}}"}}
      diff: true
    - name: New content in check mode
      kiln.cluster.write_files:
        files: [{{path: "{root}/lib/kiln/node/files.py", content: "READ = 2\\n"}}]
      check_mode: true
      diff: true
    - name: Under a file
      kiln.cluster.write_files:
        files: [{{path: "{root}/lib/manifest/x", content: ""}}]
      ignore_errors: true
    - name: Relative
      kiln.cluster.write_files: {{files: [{{path: lib/x, content: ""}}]}}
      ignore_errors: true
"""


def test_write_files_writes_what_differs_only(tmp_path):
    owner = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    playbook = tmp_path / "write.yml"
    playbook.write_text(PLAYBOOK.format(root=tmp_path, owner=owner, group=group))
    report = local_playbook(
        playbook, "-e", f"ansible_python_interpreter={sys.executable}", timeout=120
    )
    results = {
        t["task"]["name"]: {
            k: v
            for k, v in t["hosts"]["localhost"].items()
            if k in ("changed", "written", "diff", "msg", "failed")
        }
        for t in report["plays"][0]["tasks"]
    }
    lib = tmp_path / "lib"
    paths = [f"{lib}/kiln/__init__.py", f"{lib}/kiln/node/files.py", f"{lib}/manifest"]
    assert results == {
        "First write": {
            "changed": True,
            "written": paths,
            "diff": {"prepared": "".join(f"{p}: new\n" for p in paths)},
        },
        "Again": {"changed": False, "written": []},
        "A mode changed by hand": {"changed": True},
        "Put back": {
            "changed": True,
            "written": [paths[1]],
            "diff": {"prepared": f"{paths[1]}: owner or mode differs\n"},
        },
        "New content in check mode": {
            "changed": True,
            "written": [paths[1]],
            "diff": {"prepared": f"{paths[1]}: content differs\n"},
        },
        "Under a file": {
            "changed": False,
            "failed": True,
            "written": [],
            "msg": f"{lib}/manifest/x: Not a directory",
        },
        "Relative": {"changed": False, "failed": True, "msg": "not an absolute path: lib/x"},
    }
    # Check mode wrote nothing; every file and created directory has the modes asked.
    assert (lib / "kiln/node/files.py").read_text() == "READ = 1\n"
    assert {
        str(p.relative_to(lib)): oct(stat.S_IMODE(p.stat().st_mode)) for p in lib.rglob("*")
    } == {
        "kiln": "0o755",
        "kiln/__init__.py": "0o644",
        "kiln/node": "0o755",
        "kiln/node/files.py": "0o644",
        "manifest": "0o644",
    }
    assert not list(lib.rglob(".kiln-write-*"))
