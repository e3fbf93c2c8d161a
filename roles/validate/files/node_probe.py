#!/usr/bin/python3
"""Kiln's validation probe, the node worker: the storage work of `kiln validate` on
the cluster (the srun steps are probe_launcher.py's, on the controller).

The validate role copies this file to every node it tests (/usr/local/libexec/kiln/)
and runs it; it needs only Python 3, Kiln's node library and, for storage, fio. It
measures and records raw output as JSON; parsing and judging happen on the control
node (kiln.validation).

    tree        (on the controller) write the package tree for the cold-import test
    storage     (on each node, through srun) mount check, then fio and small files
    cold-import (on each node, through srun) all nodes import a package tree at once
    remove      (on the controller) remove this run's package tree
    record      (on the controller, or a node) write one of the run's records:
                kiln_node.records, whose arguments follow

Shared mounts may be writable by any user, and srun starts this probe as root. So every
directory it works in on a mount is made fresh for this run (`.kiln-validate-RUN-...`,
mode 0700); anything already there under that name is refused, never reused or
followed. The work in it (fio, small files, writing and importing the tree) runs as an
unprivileged account (`--user`, `nobody` by default), which owns the directory.
"""

import argparse
import json
import os
import pwd
import re
import shutil
import socket
import sys
import time
from pathlib import Path

# Kiln's node library: kiln_node.INSTALL_DIR, or another copy named by KILN_NODE_LIBRARY.
sys.path.insert(0, os.environ.get("KILN_NODE_LIBRARY") or "/usr/local/lib/kiln")
from kiln_node import commands, records

MOUNT_CHECK = "/usr/local/sbin/kiln-mount-check"
TREE_PACKAGE = "kiln_cold_import"
# This run's directories on a mount: PREFIX + run id + "-" + node name, or + "-tree".
WORK_PREFIX = ".kiln-validate-"
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


class ProbeError(Exception):
    """A directory the probe will not use; the message says why, in one line."""


class Account:
    """Who the unprivileged work runs as. Without root there is no one to switch to:
    the work runs as the current user."""

    def __init__(self, name: str):
        self.uid, self.gid = os.geteuid(), os.getegid()
        self.switch = False
        if name and os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                raise ProbeError(f"no user {name!r} on this node to run the probes as") from None
            self.uid, self.gid = entry.pw_uid, entry.pw_gid
            self.switch = entry.pw_uid != 0
            self.home = entry.pw_dir

    def options(self) -> dict:
        """subprocess.run arguments that start a command as this account."""
        if not self.switch:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {**os.environ, **extra}
        if self.switch:  # not root's home, where the account can read nothing
            env["HOME"] = self.home
            env.pop("XDG_RUNTIME_DIR", None)
        return env


def fresh_dir(parent: str, name: str, account: Account) -> Path:
    """Make `parent/name` for this run alone: mode 0700, owned by `account`. Whatever
    is already there (a directory, a file, a symlink) was not made by this run and is
    refused; mkdir never follows a symlink in the last component."""
    if not SAFE_NAME.fullmatch(name):
        raise ProbeError(f"unsafe directory name {name!r}")
    path = Path(parent) / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise ProbeError(f"{path} exists already, not made by this run: not used") from None
    except OSError as exc:
        raise ProbeError(f"cannot write in {parent}: {exc.strerror}") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise ProbeError(f"{path} was replaced while it was made: not used") from None
    try:
        # root_squash makes root's new directory the squashed account's
        if os.fstat(fd).st_uid not in (os.geteuid(), account.uid):
            raise ProbeError(f"{path} was replaced while it was made: not used")
        if account.switch:
            os.fchown(fd, account.uid, account.gid)
    finally:
        os.close(fd)
    return path


def check_private(path: Path, account: Account) -> None:
    """`path` is a real directory (no symlink) that only `account` or root can write."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ProbeError(f"{path}: {exc.strerror}") from None
    if not os.path.isdir(path) or os.path.islink(path):
        raise ProbeError(f"{path} is not a directory made by this run: not used")
    if info.st_uid not in (0, account.uid) or info.st_mode & 0o077:
        raise ProbeError(
            f"{path} is owned by uid {info.st_uid} with mode {info.st_mode & 0o777:o}, "
            "not made by this run: not used"
        )


def remove(path: Path) -> None:
    """Remove a directory this run made. shutil.rmtree never follows a symlink inside."""
    shutil.rmtree(path, ignore_errors=True)


def run(
    argv: list[str],
    timeout: float,
    stdin: str | None = None,
    account: Account | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    """A command's outcome as data: rc (None when it timed out), output, seconds."""
    options = account.options() if account else {}
    return commands.record(argv, timeout, stdin, env=env, **options)


# --- cold-import tree --------------------------------------------------------------------


def write_tree(root: Path, modules: int) -> None:
    """A package of `modules` small modules in subpackages of 100, which one import of
    `kiln_cold_import.all` loads: many small files, as in `import torch`."""
    package = root / TREE_PACKAGE
    package.mkdir()
    subpackages = []
    for first in range(0, modules, 100):
        name = f"sub{first // 100:04d}"
        sub = package / name
        sub.mkdir()
        count = min(100, modules - first)
        for index in range(count):
            (sub / f"m{index:03d}.py").write_text(
                f'"""Generated by Kiln for the cold-import test."""\nVALUE = {first + index}\n'
                f"def value():\n    return VALUE\n"
            )
        (sub / "__init__.py").write_text(
            "".join(f"from . import m{index:03d}\n" for index in range(count))
        )
        subpackages.append(name)
    (package / "__init__.py").write_text("")
    (package / "all.py").write_text("".join(f"from . import {s}\n" for s in subpackages))


def itself(account: Account, *argv: str, timeout: float) -> dict:
    """Run this probe again, as `account`, and read the JSON it prints."""
    done = run([sys.executable, os.path.abspath(__file__), *argv], timeout, account=account)
    try:
        return json.loads(done["stdout"])
    except ValueError:
        detail = done["stderr"].splitlines()[-1:] or [f"exit {done['rc']}"]
        return {"error": f"the probe as uid {account.uid} failed: {detail[0]}"}


def tree(args: argparse.Namespace) -> dict:
    """This run's package tree, freshly written under the mount by the probe account."""
    try:
        account = Account(args.user)
        root = fresh_dir(args.mount, f"{WORK_PREFIX}{args.run}-tree", account)
    except ProbeError as exc:
        return {"error": str(exc)}
    written = itself(
        account, "write-tree", "--root", str(root), "--modules", str(args.modules), timeout=600
    )
    if "error" in written:
        remove(root)
        return written
    return {"root": str(root), "modules": args.modules}


# --- storage -----------------------------------------------------------------------------


def fio(directory: Path, name: str, params: dict, extra: list[str]) -> dict:
    argv = [
        "fio",
        f"--name={name}",
        f"--directory={directory}",
        "--output-format=json",
        "--ioengine=psync",
        "--group_reporting",
        f"--numjobs={params['numjobs']}",
        f"--size={params['file_size_mib']}M",
        f"--direct={int(params['direct'])}",
        # the same files for every job below: written once, read twice, then removed
        "--filename_format=kiln.$jobnum.$filenum",
        *extra,
    ]
    result = run(argv, params["timeout_s"])
    return {"rc": result["rc"], "json": result["stdout"], "stderr": result["stderr"][-2000:]}


def small_files(directory: Path, count: int) -> dict:
    """Create, stat and delete `count` 4 KiB files in a two-level tree."""
    base = directory / "meta"
    payload = b"k" * 4096
    started = time.monotonic()
    paths = []
    for index in range(count):
        folder = base / f"d{index % 32:02d}"
        if index < 32:
            folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"f{index:06d}"
        path.write_bytes(payload)
        paths.append(path)
    for path in paths:
        path.stat()
    for path in paths:
        path.unlink()
    shutil.rmtree(base, ignore_errors=True)
    return {"files": count, "ops": 3 * count, "seconds": round(time.monotonic() - started, 3)}


def storage_work(directory: Path, params: dict) -> dict:
    """fio and small files in `directory` (run as the probe account)."""
    out: dict = {}
    block = f"--bs={params['block_size']}"
    try:
        # Checkpoint-like: large blocks, one file per job, flushed before the clock stops.
        out["seq_write"] = fio(
            directory, "seq_write", params, ["--rw=write", block, "--end_fsync=1"]
        )
        out["seq_read"] = fio(directory, "seq_read", params, ["--rw=read", block])
        out["rand_read"] = fio(
            directory,
            "rand_read",
            params,
            [
                "--rw=randread",
                "--bs=4k",
                "--time_based",
                f"--runtime={params['runtime_s']}",
                "--unlink=1",
            ],
        )
        out["metadata"] = small_files(directory, params["metadata_files"])
    except OSError as exc:
        out["error"] = f"I/O error in {directory}: {exc.strerror}"
    return out


def storage_target(path: str, config: dict, node: str) -> dict:
    params = config["params"]
    try:
        account = Account(config.get("user", ""))
        directory = fresh_dir(path, f"{WORK_PREFIX}{config['run']}-{node}", account)
    except ProbeError as exc:
        return {"path": path, "error": str(exc)}
    try:
        argv = ["storage-work", "--dir", str(directory), "--params", json.dumps(params)]
        found = itself(account, *argv, timeout=4 * params["timeout_s"] + 60)
    finally:
        remove(directory)
    return {"path": path, **found}


def mount_check(timeout: float) -> tuple[dict, set[str]]:
    """kiln-mount-check's verdict on the node's declared mounts, and the healthy paths."""
    check = run([MOUNT_CHECK, "--json", "--timeout", str(timeout)], timeout + 10)
    try:
        mounts = json.loads(check["stdout"])["mounts"]
    except (ValueError, KeyError, TypeError):
        mounts = []
    healthy = {m["path"] for m in mounts if m.get("status") == "OK" and not m.get("indirect")}
    return {**check, "mounts": mounts}, healthy


def storage(config: dict) -> dict:
    params = config["params"]
    check, healthy = mount_check(params["mount_timeout_s"])
    result: dict = {"node": socket.gethostname(), "mount_check": check, "targets": []}
    # Never benchmark a mount point whose filesystem is not there: that would fill the
    # root disk and measure it instead. Node-local scratch is declared, not automounted.
    paths = [m["path"] for m in check["mounts"] if m["path"] in healthy]
    paths += [p for p in config.get("scratch", []) if os.path.isdir(p)]
    for path in paths:
        result["targets"].append(storage_target(path, config, result["node"]))
    return result


def cold_import(config: dict) -> dict:
    """Wait for the common start time, then time a fresh interpreter importing the tree
    (or the configured module, e.g. torch). The many-nodes-at-once load is the test.
    The import runs as the probe account, from a tree only that account could write."""
    result: dict = {"node": socket.gethostname()}
    _, healthy = mount_check(config["mount_timeout_s"])
    if config.get("needs_mount") and config["needs_mount"] not in healthy:
        return {**result, "error": f"{config['needs_mount']} is not mounted"}
    try:
        account = Account(config.get("user", ""))
        if config.get("root"):
            check_private(Path(config["root"]), account)
    except ProbeError as exc:
        return {**result, "error": str(exc)}
    delay = config["start_at"] - time.time()
    if delay > 0:
        time.sleep(delay)
    extra = {"PYTHONDONTWRITEBYTECODE": "1"}
    if config.get("root"):
        extra["PYTHONPATH"] = config["root"]
    argv = [config.get("python") or sys.executable, "-B", "-c", f"import {config['module']}"]
    done = run(argv, config["timeout_s"], account=account, env=account.env(extra))
    if done["rc"] is None:
        return {**result, "error": f"import {config['module']} took over {config['timeout_s']}s"}
    if done["rc"] == 127 and not done["stdout"]:
        return {**result, "error": f"cannot run {argv[0]}: {done['stderr']}"}
    if done["rc"] != 0:
        lines = done["stderr"].splitlines() or [f"exit {done['rc']}"]
        return {**result, "error": f"import {config['module']} failed: {lines[-1]}"}
    return {**result, "module": config["module"], "seconds": done["seconds"]}


def remove_tree(args: argparse.Namespace) -> dict:
    """Remove this run's tree: only a directory this probe names, never a symlink."""
    path = Path(args.mount) / f"{WORK_PREFIX}{args.run}-tree"
    if path.is_symlink() or not path.is_dir():
        return {"removed": False}
    remove(path)
    return {"removed": True}


def main() -> int:
    if sys.argv[1:2] == ["record"]:
        return records.main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("tree", "remove"):
        p = sub.add_parser(name)
        p.add_argument("--mount", required=True, help="the shared mount that holds the tree")
        p.add_argument("--run", required=True, type=run_id, help="the validation run's id")
        if name == "tree":
            p.add_argument("--user", default="nobody", help="the account that writes it")
            p.add_argument("--modules", type=int, default=2000)
    for name in ("storage", "cold-import"):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True, help="the settings, as JSON text")
        p.add_argument("--out", required=True, help="write the result here (node-local)")
    # Run by the probe itself, as the unprivileged account, in a directory made for it.
    p = sub.add_parser("write-tree")
    p.add_argument("--root", required=True)
    p.add_argument("--modules", type=int, required=True)
    p = sub.add_parser("storage-work")
    p.add_argument("--dir", required=True)
    p.add_argument("--params", required=True)
    args = parser.parse_args()
    if args.command in ("tree", "remove"):
        print(json.dumps(tree(args) if args.command == "tree" else remove_tree(args)))
        return 0
    if args.command == "write-tree":
        write_tree(Path(args.root), args.modules)
        print(json.dumps({"written": True}))
        return 0
    if args.command == "storage-work":
        print(json.dumps(storage_work(Path(args.dir), json.loads(args.params))))
        return 0
    config = json.loads(args.config)
    if not SAFE_NAME.fullmatch(str(config.get("run", "-"))):
        parser.error(f"unsafe run id {config.get('run')!r}")
    result = storage(config) if args.command == "storage" else cold_import(config)
    records.write(args.out, result, merge=False)
    return 0


def run_id(text: str) -> str:
    if not SAFE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"unsafe run id {text!r}")
    return text


if __name__ == "__main__":
    sys.exit(main())
