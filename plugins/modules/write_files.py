"""Write a set of small text files in one step: one module call per node, where a loop of
ansible.builtin.copy makes one (stat, transfer, copy) per file. Kiln's node library is
fourteen files; copied one by one through Molecule's podman connection they cost about
a minute per scenario of three nodes (docs/performance.md). A role's run of consecutive
copy and file tasks becomes one step the same way: each step costs ansible-playbook's
main process a worker per host, even when skipped (docs/performance.md)."""

import errno
import grp
import os
import pwd
import shutil
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = """
module: write_files
short_description: Write several text files in one module call
description:
  - Writes each file in O(files), in the order given, where its content, owner, group or
    mode differs; the others are left untouched. Each is written to a temporary file in
    its own directory and renamed over the old one, so a reader never sees half a file.
  - An entry with C(state=directory) makes a directory (and its parents) or sets its
    owner and mode; one with C(state=absent) removes a file or a directory tree.
  - Missing parent directories are created with O(directory_mode), owned by O(owner) and
    O(group).
  - With O(prune), removes the files it wrote earlier that the entries no longer
    declare (each carries a mark), and leaves the rest of the directory alone.
  - Supports check mode; its diff names each path that would be written, and why, or,
    for an entry with C(diff=true), shows its text before and after as copy's does.
options:
  files:
    description:
      - The entries, each C(path) (absolute); C(state) C(file) (the default), C(directory)
        or C(absent); C(content) (text, written as UTF-8; required for a file); C(mode)
        (octal, the file's or directory's own, else O(mode) or O(directory_mode)); C(diff)
        (show the text in a diff; for files that are not secret and not large).
    type: list
    elements: dict
    required: true
  owner:
    description: Owner of the files and of the directories created.
    type: str
    default: root
  group:
    description: Group of the files and of the directories created.
    type: str
    default: root
  mode:
    description: Mode of the files, in octal.
    type: str
    default: "0644"
  directory_mode:
    description: Mode of the directories created, in octal.
    type: str
    default: "0755"
  prune:
    description:
      - Directories whose files the role no longer declares go, each C(path) (absolute)
        with the C(mark) its files carry. A regular file directly in C(path) whose text
        holds C(mark) and that is no entry of O(files) is removed, after the entries, as
        an entry with C(state=absent) would be. Other files there are the site's, and
        stay; a C(path) that does not exist has nothing to remove.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = """
- name: Install Kiln's node library
  kiln.cluster.write_files:
    files:
      - {path: /usr/local/lib/kiln/kiln/__init__.py, content: ""}
      - {path: /usr/local/lib/kiln/MANIFEST, content: "..."}
"""

RETURN = """
written:
  description: The paths written, made or removed (or, in check mode, that would be), in order.
  type: list
  elements: str
  returned: always
"""


def _read(path):
    """The file's bytes and stat, or (None, None) where there is no regular file."""
    try:
        with open(path, "rb") as handle:
            return handle.read(), os.fstat(handle.fileno())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, None


def _make_parents(path, uid, gid, mode):
    missing = []
    parent = os.path.dirname(path)
    while parent and not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(directory)
        os.chown(directory, uid, gid)
        os.chmod(directory, mode)  # not umask's


def _write(path, data, uid, gid, mode):
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".kiln-write-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            os.fchown(out.fileno(), uid, gid)
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _ids(module):
    try:
        return pwd.getpwnam(module.params["owner"]).pw_uid, grp.getgrnam(
            module.params["group"]
        ).gr_gid
    except KeyError as missing:
        _fail(module, msg=f"no such user or group on the node: {missing}")


def _mode(module, name, value=None):
    value = module.params[name] if value is None else value
    try:
        return int(value, 8)
    except ValueError:
        _fail(module, msg=f"{name} is not an octal mode: {value!r}")


def _changed_file(path, data, uid, gid, mode):
    """Why the file at path must be written, or None where it is as asked."""
    before, info = _read(path)
    if before is None:
        return "new", ""
    if before != data:
        return "content differs", before
    if (info.st_uid, info.st_gid) != (uid, gid) or stat.S_IMODE(info.st_mode) != mode:
        return "owner or mode differs", before
    return None, before


def _changed_directory(path, uid, gid, mode):
    if not os.path.lexists(path):
        return "new"
    if not os.path.isdir(path) or os.path.islink(path):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    info = os.stat(path)
    if (info.st_uid, info.st_gid) != (uid, gid) or stat.S_IMODE(info.st_mode) != mode:
        return "owner or mode differs"
    return None


def _pruned(module):
    """Absent entries for the files of each prune directory that hold its mark and that
    no entry of files declares, in name order."""
    declared = {os.path.normpath(item["path"]) for item in module.params["files"]}
    entries = []
    for rule in module.params["prune"]:
        where, mark = rule["path"], rule["mark"].encode()
        if not os.path.isabs(where):
            _fail(module, msg=f"not an absolute path: {where}")
        try:
            names = sorted(os.listdir(where))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            path = os.path.normpath(os.path.join(where, name))  # as declared is
            if path in declared or os.path.islink(path) or not os.path.isfile(path):
                continue
            if mark in (_read(path)[0] or b""):
                entries.append({"path": path, "state": "absent", "mode": None, "diff": True})
    return entries


def _invocation(module):
    """The invocation as results show it, each content as its size: a library's code is
    no reader's log."""
    files = [
        {**item, "content": f"({len(item['content'])} characters)"}
        if item.get("content") is not None
        else item
        for item in module.params["files"]
    ]
    return {"module_args": {**module.params, "files": files}}


def _fail(module, msg, **result):
    module.fail_json(invocation=_invocation(module), msg=msg, **result)


def _text(data):
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _entry(module, item, uid, gid, defaults):
    """(why, diff or None, apply) for one entry: why is None where it is as asked."""
    path, state = item["path"], item["state"]
    if not os.path.isabs(path):
        _fail(module, msg=f"not an absolute path: {path}")
    mode = _mode(module, "mode", item["mode"]) if item["mode"] else defaults[state]
    if state == "absent":
        if not os.path.lexists(path):
            return None, None, None
        gone = os.path.isdir(path) and not os.path.islink(path)
        before = "" if gone else _text(_read(path)[0] or b"")
        return (
            "removed",
            {
                "before_header": path,
                "after_header": f"{path} (removed)",
                "before": before,
                "after": "",
            },
            lambda: shutil.rmtree(path) if gone else os.unlink(path),
        )
    if state == "directory":
        why = _changed_directory(path, uid, gid, mode)

        def make():
            _make_parents(os.path.join(path, "x"), uid, gid, defaults["directory"])
            os.chown(path, uid, gid)
            os.chmod(path, mode)

        return why, None, make
    if item["content"] is None:
        _fail(module, msg=f"{path}: a file needs content")
    data = item["content"].encode()
    why, before = _changed_file(path, data, uid, gid, mode)

    def write():
        _make_parents(path, uid, gid, defaults["directory"])
        _write(path, data, uid, gid, mode)

    diff = {"before_header": path, "after_header": path, "before": _text(before)}
    return why, {**diff, "after": item["content"]}, write


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "state": {
                        "type": "str",
                        "default": "file",
                        "choices": ["file", "directory", "absent"],
                    },
                    # The text of node programs and settings, never a secret: kept out of
                    # the logged invocation only for its size (_invocation), not no_log,
                    # which would mask it in the diffs asked for too.
                    "content": {"type": "str"},
                    "mode": {"type": "str"},
                    "diff": {"type": "bool", "default": False},
                },
            },
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
            "mode": {"type": "str", "default": "0644"},
            "directory_mode": {"type": "str", "default": "0755"},
            "prune": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "mark": {"type": "str", "required": True},
                },
            },
        },
        supports_check_mode=True,
        # Not to the node's journal: AnsibleModule logs every invocation's arguments
        # there, and these are whole files (the node library's code, settings).
        no_log=True,
    )
    uid, gid = _ids(module)
    defaults = {
        "file": _mode(module, "mode"),
        "directory": _mode(module, "directory_mode"),
        "absent": None,
    }
    written, changes, diffs = [], [], []
    for item in module.params["files"] + _pruned(module):
        path = item["path"]
        try:
            why, diff, apply = _entry(module, item, uid, gid, defaults)
        except OSError as error:
            _fail(module, msg=f"{path}: {error.strerror}", written=written)
        if why is None:
            continue
        written.append(path)
        if item["diff"] and diff is not None:
            diffs.append(diff)
        else:
            changes.append(f"{path}: {why}")
        if not module.check_mode:
            try:
                apply()
            except OSError as error:
                _fail(module, msg=f"{path}: {error.strerror}", written=written[:-1])
    result = {"changed": bool(written), "written": written}
    if (changes or diffs) and module._diff:
        # What would be written, not the text, unless an entry asks for it (settings, as
        # copy shows them): a library's code is no reader's diff.
        prepared = [{"prepared": "\n".join(changes) + "\n"}] if changes else []
        result["diff"] = prepared + diffs if diffs else prepared[0]
    module.exit_json(invocation=_invocation(module), **result)


if __name__ == "__main__":
    main()
