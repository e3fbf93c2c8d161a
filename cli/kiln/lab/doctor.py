"""Check that this host can run the lab, and say exactly how to fix what is missing."""

import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kiln import files
from kiln.errors import InputError, PrerequisiteError
from kiln.roles import autofs

CONTAINERS_CONF = Path("/etc/containers/containers.conf")
PROC_FILESYSTEMS = Path("/proc/filesystems")
MODULES_DIR = Path("/lib/modules")
APT_CACHE_PORT = 3142
SETUP_HINT = "or run `make prereqs` (scripts/setup-host.sh) once as root"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _tool(name: str, package: str) -> Check:
    path = shutil.which(name)
    if path:
        return Check(name, True, path)
    return Check(
        name, False, f"{name} is not installed", f"apt-get install -y {package} ({SETUP_HINT})"
    )


def _hybrid_cgroups() -> bool:
    # cgroup v1 controllers at /sys/fs/cgroup plus a v2 hierarchy under unified/
    return Path("/sys/fs/cgroup/unified").is_dir()


def _conf_text() -> str:
    try:
        return files.read_text(CONTAINERS_CONF)
    except InputError:  # none (podman's defaults), or unreadable
        return ""


def _runtime_check() -> Check:
    configured = re.search(r'^\s*runtime\s*=\s*"([^"]+)"', _conf_text(), re.MULTILINE)
    runtime = configured.group(1) if configured else "crun (podman's default)"
    if runtime == "runc" or not _hybrid_cgroups():
        return Check("runtime", True, runtime)
    return Check(
        "runtime",
        False,
        f"runtime is {runtime}, which refuses this host's hybrid cgroups",
        f'set runtime = "runc" under [engine] in {CONTAINERS_CONF} ({SETUP_HINT})',
    )


def _hard_nofile() -> int:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return hard if hard != resource.RLIM_INFINITY else 1 << 30


def _ulimit_check() -> Check:
    hard = _hard_nofile()
    match = re.search(r"nofile=(\d+):(\d+)", _conf_text())
    fix = (
        f'set default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"] under [containers]'
        f" in {CONTAINERS_CONF} ({SETUP_HINT})"
    )
    if not match:
        return Check(
            "ulimits",
            False,
            f"no nofile default for containers; podman's exceeds this host's hard limit "
            f"({hard}) and runc fails with setrlimit",
            fix,
        )
    wanted = max(int(match.group(1)), int(match.group(2)))
    if wanted > hard:
        return Check(
            "ulimits", False, f"containers ask for nofile={wanted} > host hard limit {hard}", fix
        )
    return Check("ulimits", True, f"nofile={wanted} (host hard limit {hard})")


def _root_check() -> Check:
    if os.geteuid() == 0:
        return Check("root", True, "running as root")
    return Check(
        "root",
        False,
        "the lab runs privileged systemd containers, which need root",
        "run kiln lab commands as root (sudo -E kiln lab up)",
    )


def apt_cache_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", APT_CACHE_PORT), timeout=1):
            return True
    except OSError:
        return False


def _apt_cache_check() -> Check:
    if apt_cache_available():
        return Check("apt cache", True, f"apt-cacher-ng on port {APT_CACHE_PORT}", required=False)
    return Check(
        "apt cache",
        False,
        "no apt-cacher-ng: every node downloads its packages",
        f"apt-get install -y apt-cacher-ng ({SETUP_HINT})",
        required=False,
    )


def _podman_works() -> Check:
    result = subprocess.run(
        ["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 0:
        return Check("podman info", True, f"OCI runtime {result.stdout.strip()}")
    detail = " ".join(result.stderr.split())[:200]
    return Check("podman info", False, f"podman does not work: {detail}", SETUP_HINT)


def _kernel_filesystems() -> set[str]:
    try:
        return autofs.kernel_filesystems(PROC_FILESYSTEMS.read_text())
    except OSError:
        return set()


def automounts() -> bool:
    """Whether the lab's nodes can automount: they are containers on this host's kernel,
    which has autofs loaded or as a module (a node cannot load one into it). Where it
    cannot, the lab mounts its storage at boot (`autofs_automount: false`)."""
    if "autofs" in _kernel_filesystems():
        return True
    return any((MODULES_DIR / os.uname().release).glob("**/autofs4.ko*"))


def _autofs_check() -> Check:
    if "autofs" in _kernel_filesystems():
        return Check("autofs", True, "in this host's kernel", required=False)
    release = os.uname().release
    if automounts():
        return Check(
            "autofs",
            False,
            "this host's kernel has not loaded autofs, which the lab's mounts need",
            "modprobe autofs4 (on this host, as root)",
            required=False,
        )
    return Check(
        "autofs",
        False,
        f"this host's kernel ({release}) has no autofs: the lab mounts its shared storage "
        "at boot (systemd mount units, autofs_automount: false), not on access",
        "use a host whose kernel has autofs for the lab's automounts",
        required=False,
    )


def run_checks() -> list[Check]:
    checks = [
        _root_check(),
        _tool("podman", "podman"),
        _tool("runc", "runc"),
        _tool("debootstrap", "debootstrap"),
        _tool("ssh", "openssh-client"),
        _tool("ssh-keygen", "openssh-client"),
        _runtime_check(),
        _ulimit_check(),
        _apt_cache_check(),
        _autofs_check(),
    ]
    if checks[1].ok:
        checks.append(_podman_works())
    return checks


def require() -> list[Check]:
    """Raise, with the first failing check's message and fix, unless the host is ready.
    Returns the failed checks the lab can do without (warnings)."""
    checks = run_checks()
    for check in checks:
        if check.required and not check.ok:
            raise PrerequisiteError(f"{check.detail}: {check.fix}")
    return [check for check in checks if not check.ok]
