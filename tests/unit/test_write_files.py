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


def _run(text, playbook, root):
    """The playbook text run as this user: the report and each task's result, as far as
    the module's own keys go."""
    owner = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    playbook.write_text(text.format(root=root, owner=owner, group=group))
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
    return report, results


def test_write_files_writes_what_differs_only(tmp_path):
    _, results = _run(PLAYBOOK, tmp_path / "write.yml", tmp_path)
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


ENTRIES = """
- hosts: localhost
  gather_facts: false
  vars:
    entries:
      - {{path: "{root}/etc/facts.d", state: directory}}
      - {{path: "{root}/etc/facts.d/kiln.fact", content: "{{}}\\n", diff: true}}
      - {{path: "{root}/sbin/probe", content: "#!/bin/sh\\n", mode: "0755"}}
      - {{path: "{root}/etc/old.fact", state: absent, diff: true}}
      - {{path: "{root}/etc/old.d", state: absent}}
  module_defaults:
    kiln.cluster.write_files: {{owner: {owner}, group: {group}}}
  tasks:
    - name: Check first
      kiln.cluster.write_files: {{files: "{{{{ entries }}}}"}}
      check_mode: true
      diff: true
    - name: First
      kiln.cluster.write_files: {{files: "{{{{ entries }}}}"}}
      diff: true
    - name: Again
      kiln.cluster.write_files: {{files: "{{{{ entries }}}}"}}
      diff: true
    - name: A directory's mode changed by hand
      ansible.builtin.file: {{path: "{root}/etc/facts.d", mode: "0700"}}
    - name: New fact
      kiln.cluster.write_files:
        files:
          - {{path: "{root}/etc/facts.d", state: directory}}
          - {{path: "{root}/etc/facts.d/kiln.fact", content: "[]\\n", diff: true}}
          - {{path: "{root}/sbin/probe", content: "#!/bin/sh\\n", mode: "0755"}}
      diff: true
    - name: A file where a directory goes
      kiln.cluster.write_files: {{files: [{{path: "{root}/sbin/probe", state: directory}}]}}
      ignore_errors: true
    - name: A file without content
      kiln.cluster.write_files: {{files: [{{path: "{root}/sbin/x"}}]}}
      ignore_errors: true
    - name: A mode that is not octal
      kiln.cluster.write_files: {{files: [{{path: "{root}/sbin/x", content: "", mode: "rwx"}}]}}
      ignore_errors: true
"""


def test_write_files_makes_directories_removes_and_shows_diffs(tmp_path):
    """Directories, removals, a mode per entry and copy-style diffs for the entries that
    ask: what a role's run of copy and file tasks did, in one call."""
    root = tmp_path / "root"
    (root / "etc/old.d").mkdir(parents=True)
    for old_file in (root / "etc/old.fact", root / "etc/old.d/one"):
        old_file.write_text("old\n")
    report, results = _run(ENTRIES, tmp_path / "entries.yml", root)
    del results["A directory's mode changed by hand"]
    facts, fact, probe = (
        f"{root}/etc/facts.d",
        f"{root}/etc/facts.d/kiln.fact",
        f"{root}/sbin/probe",
    )
    old, old_d = f"{root}/etc/old.fact", f"{root}/etc/old.d"
    first = {
        "changed": True,
        "written": [facts, fact, probe, old, old_d],
        "diff": [
            {"prepared": f"{facts}: new\n{probe}: new\n{old_d}: removed\n"},
            {"before_header": fact, "after_header": fact, "before": "", "after": "{}\n"},
            {
                "before_header": old,
                "after_header": f"{old} (removed)",
                "before": "old\n",
                "after": "",
            },
        ],
    }
    assert results == {
        "Check first": first,
        "First": first,
        "Again": {"changed": False, "written": []},
        "New fact": {
            "changed": True,
            "written": [facts, fact],
            "diff": [
                {"prepared": f"{facts}: owner or mode differs\n"},
                {"before_header": fact, "after_header": fact, "before": "{}\n", "after": "[]\n"},
            ],
        },
        "A file where a directory goes": {
            "changed": False,
            "failed": True,
            "written": [],
            "msg": f"{probe}: Not a directory",
        },
        "A file without content": {
            "changed": False,
            "failed": True,
            "msg": f"{root}/sbin/x: a file needs content",
        },
        "A mode that is not octal": {
            "changed": False,
            "failed": True,
            "msg": "mode is not an octal mode: 'rwx'",
        },
    }
    # The invocation as logged holds each content's size, not the text.
    first_run = report["plays"][0]["tasks"][1]["hosts"]["localhost"]
    assert first_run["invocation"]["module_args"]["files"][2] == {
        "path": probe,
        "state": "file",
        "content": "(10 characters)",
        "mode": "0755",
        "diff": False,
    }
    assert {
        str(p.relative_to(root)): oct(stat.S_IMODE(p.stat().st_mode)) for p in root.rglob("*")
    } == {
        "etc": "0o755",
        "etc/facts.d": "0o755",
        "etc/facts.d/kiln.fact": "0o644",
        "sbin": "0o755",
        "sbin/probe": "0o755",
    }


def test_the_files_never_go_to_the_nodes_journal(tmp_path, monkeypatch, capsys):
    """AnsibleModule logs each invocation's arguments to the node's journal unless the
    module says no_log: here they are whole files, so nothing is logged."""
    import contextlib
    import importlib.util
    import json

    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    from tests.conftest import REPO

    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "_log_invocation", lambda self: logged.append(1))
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, *a, **k: logged.append(a))
    owner = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    args = {
        "files": [{"path": str(tmp_path / "settings"), "content": "a = 1\n"}],
        "owner": owner,
        "group": group,
        "_ansible_check_mode": False,
    }
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy")
    spec = importlib.util.spec_from_file_location(
        "write_files", REPO / "plugins/modules/write_files.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with contextlib.suppress(SystemExit):  # exit_json exits
        module.main()
    result = json.loads(capsys.readouterr().out)
    assert (result["changed"], result["written"], logged) == (
        True,
        [str(tmp_path / "settings")],
        [],
    )
    assert (tmp_path / "settings").read_text() == "a = 1\n"


PRUNE = """
- hosts: localhost
  gather_facts: false
  vars:
    mark: "## Written by Kiln (role mpi)"
    kept: {{path: "{root}/mpi/openmpi", content: "## Written by Kiln (role mpi): openmpi\\n"}}
  module_defaults:
    kiln.cluster.write_files: {{owner: {owner}, group: {group}}}
  tasks:
    - name: Check first
      kiln.cluster.write_files:
        files: ["{{{{ kept }}}}"]
        prune: [{{path: "{root}/mpi", mark: "{{{{ mark }}}}"}}, {{path: "{root}/none", mark: x}}]
      check_mode: true
      diff: true
    - name: Prune
      kiln.cluster.write_files:
        files: ["{{{{ kept }}}}"]
        prune: [{{path: "{root}/mpi", mark: "{{{{ mark }}}}"}}, {{path: "{root}/none", mark: x}}]
      diff: true
    - name: Again
      kiln.cluster.write_files:
        files: ["{{{{ kept }}}}"]
        prune: [{{path: "{root}//mpi/", mark: "{{{{ mark }}}}"}}]
    - name: Relative
      kiln.cluster.write_files: {{files: [], prune: [{{path: mpi, mark: x}}]}}
      ignore_errors: true
"""


def test_write_files_prunes_the_marked_files_no_entry_declares(tmp_path):
    """prune: the files of the directory that carry the mark and that no entry declares
    go (a module of an MPI no longer installed); the site's own files, a link and a
    subdirectory stay, and a directory that is not there has nothing to remove. A path
    spelt otherwise (a trailing slash) never removes a file just written."""
    root = tmp_path / "root"
    mpi = root / "mpi"
    (mpi / "sub").mkdir(parents=True)
    (mpi / "openmpi").write_text("## Written by Kiln (role mpi): old\n")
    (mpi / ".retired").write_text("#%Module\n## Written by Kiln (role mpi): retired\n")
    (mpi / "site").write_text("#%Module\n## the site's own\n")
    (mpi / "sub" / "deep").write_text("## Written by Kiln (role mpi)\n")
    (mpi / "link").symlink_to(mpi / ".retired")
    _, results = _run(PRUNE, tmp_path / "prune.yml", root)
    openmpi, retired = f"{mpi}/openmpi", f"{mpi}/.retired"
    first = {
        "changed": True,
        "written": [openmpi, retired],
        "diff": [
            {"prepared": f"{openmpi}: content differs\n"},
            {
                "before_header": retired,
                "after_header": f"{retired} (removed)",
                "before": "#%Module\n## Written by Kiln (role mpi): retired\n",
                "after": "",
            },
        ],
    }
    assert results == {
        "Check first": first,
        "Prune": first,
        "Again": {"changed": False, "written": []},
        "Relative": {"changed": False, "failed": True, "msg": "not an absolute path: mpi"},
    }
    assert sorted(str(p.relative_to(mpi)) for p in mpi.rglob("*")) == [
        "link",
        "openmpi",
        "site",
        "sub",
        "sub/deep",
    ]
    assert (mpi / "openmpi").read_text() == "## Written by Kiln (role mpi): openmpi\n"
