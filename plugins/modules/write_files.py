"""Write a set of small text files in one step: one module call per node, where a loop of
ansible.builtin.copy makes one (stat, transfer, copy) per file. Kiln's node library is
fourteen files; copied one by one through Molecule's podman connection they cost about
a minute per scenario of three nodes (docs/performance.md)."""

import errno
import grp
import os
import pwd
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
  - Missing parent directories are created with O(directory_mode), owned by O(owner) and
    O(group).
  - Supports check mode; its diff names each file that would be written, and why.
options:
  files:
    description: The files, each C(path) (absolute) and C(content) (text, written as UTF-8).
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
  description: The paths written (or, in check mode, that would be), in order.
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
        module.fail_json(msg=f"no such user or group on the node: {missing}")


def _mode(module, name):
    try:
        return int(module.params[name], 8)
    except ValueError:
        module.fail_json(msg=f"{name} is not an octal mode: {module.params[name]!r}")


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    # The text of node programs and settings, never a secret: kept out of
                    # the logged invocation only for its size, as copy does its content.
                    "content": {"type": "str", "required": True, "no_log": True},
                },
            },
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
            "mode": {"type": "str", "default": "0644"},
            "directory_mode": {"type": "str", "default": "0755"},
        },
        supports_check_mode=True,
    )
    uid, gid = _ids(module)
    mode, directory_mode = _mode(module, "mode"), _mode(module, "directory_mode")
    written, changes = [], []
    for item in module.params["files"]:
        path, data = item["path"], item["content"].encode()
        if not os.path.isabs(path):
            module.fail_json(msg=f"not an absolute path: {path}")
        before, info = _read(path)
        if (
            before == data
            and (info.st_uid, info.st_gid) == (uid, gid)
            and stat.S_IMODE(info.st_mode) == mode
        ):
            continue
        written.append(path)
        if before is None:
            changes.append(f"{path}: new")
        elif before != data:
            changes.append(f"{path}: content differs")
        else:
            changes.append(f"{path}: owner or mode differs")
        if not module.check_mode:
            try:
                _make_parents(path, uid, gid, directory_mode)
                _write(path, data, uid, gid, mode)
            except OSError as error:
                module.fail_json(msg=f"{path}: {error.strerror}", written=written[:-1])
    result = {"changed": bool(written), "written": written}
    if changes and module._diff:
        # What would be written, not the text: the content is kept out of results (no_log,
        # which would mask it in a diff anyway), and a library's code is no reader's diff.
        result["diff"] = {"prepared": "\n".join(changes) + "\n"}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
