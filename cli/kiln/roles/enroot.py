"""enroot, NVIDIA's unprivileged container runtime that pyxis starts for Slurm jobs: its
release packages pinned by version and sha256, Kiln's settings (a drop-in of
/etc/enroot/enroot.conf.d), the directories it needs, and the mounts.d entries that bring
the site's shared storage and NCCL settings into every container.

enroot reads enroot.conf, then each enroot.conf.d/*.conf, as `NAME value` lines (the
first value set for a name wins) and expands the values in a shell, so a path may name
the user (`$(id -u)`); it creates the last directory of each path itself,
as the user, so Kiln makes the parents, world-writable with the sticky bit, on local
disk: a runtime path on a tmpfs (enroot's default, under XDG_RUNTIME_DIR) fills memory
with unpacked images.
"""

import base64
import json
import re
from typing import Any

from kiln import formats, pinned
from kiln import packages as dpkg
from kiln.roles import autofs

DEFAULT_BASE_URL = "https://github.com/NVIDIA/enroot/releases/download"
# The package's enroot.conf is a conffile, every setting in it commented out: Kiln leaves
# it to the package (so no upgrade or downgrade asks about it) and writes its settings in
# a drop-in of its own, which enroot (3.4 and later) reads after it.
PACKAGED_CONF = "/etc/enroot/enroot.conf"
CONF = "/etc/enroot/enroot.conf.d/50-kiln.conf"
MOUNTS_DIR = "/etc/enroot/mounts.d"
HOOKS_DIR = "/etc/enroot/hooks.d"
EXTRA_HOOKS_DIR = "/usr/share/enroot/hooks.d"  # hooks the package ships but does not enable
_HOOK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.sh")
_SETTING = re.compile(r"ENROOT_[A-Z0-9_]+")
# The settings enroot.conf takes from role variables, in the order written; the first
# four are paths.
SETTINGS = (
    ("ENROOT_RUNTIME_PATH", "runtime_path"),
    ("ENROOT_CACHE_PATH", "cache_path"),
    ("ENROOT_DATA_PATH", "data_path"),
    ("ENROOT_TEMP_PATH", "temp_path"),
    ("ENROOT_SQUASH_OPTIONS", "squash_options"),
    ("ENROOT_MOUNT_HOME", "mount_home"),
    ("ENROOT_REMAP_ROOT", "remap_root"),
    ("ENROOT_ROOTFS_WRITABLE", "rootfs_writable"),
)


class EnrootError(ValueError):
    """A setting that cannot be used; the message names the variable."""


def packages(version: str, sha256: str, caps: bool, caps_sha256: str, arch: str, base_url: str):
    """The release packages to install together: enroot, then enroot+caps (which
    gives enroot's helpers the capabilities to unpack images as the user)."""
    base = base_url.rstrip("/")
    chosen = zip(_names(caps), [sha256, caps_sha256], strict=False)
    return [
        {
            "package": name,
            "version": f"{version}-1",
            "file": f"{name}_{version}-1_{arch}.deb",
            # GitHub's release URLs (and a mirror kept in their layout) escape '+'.
            "url": f"{base}/v{version}/{name.replace('+', '%2B')}_{version}-1_{arch}.deb",
            "sha256": digest,
        }
        for name, digest in chosen
    ]


def _names(caps: bool) -> list[str]:
    return ["enroot"] + (["enroot+caps"] if caps else [])


def _wanted(chosen: list[dict[str, str]]) -> list[str]:
    return [f"{p['package']}={p['version']}" for p in chosen]


# What an earlier Kiln wrote over the package's enroot.conf begins with this line.
_OLD_CONF_MARK = "^# Written by Kiln"
_DPKG_SECTION = "dpkg-query:"


def node_read_argv(caps: bool, path: str, nccl_fact: str) -> list[str]:
    """One read of what the role needs from the node, on lines node_state parses: its
    architecture, the filesystem enroot_path sits on (its nearest existing parent's before
    the role makes it), whether an older Kiln's enroot.conf is there, the nccl_env role's
    record (base64) and dpkg-query's answer for the release packages, last."""
    script = (
        'arch="$(dpkg --print-architecture)" && [ -n "$arch" ] || exit 1; echo "arch $arch"; '
        'p="$1"; while [ ! -e "$p" ]; do p="$(dirname "$p")"; done; '
        'echo "fstype $(findmnt -n -o FSTYPE --target "$p")"; '
        f"if grep -qs '{_OLD_CONF_MARK}' {PACKAGED_CONF}; "
        'then echo "old_conf yes"; else echo "old_conf no"; fi; '
        'echo "nccl $(base64 -w0 "$2" 2>/dev/null)"; '
        # dpkg-query exits 1 for a name it has never seen: that package is missing.
        f'echo "{_DPKG_SECTION}"; shift 2; "$@" 2>/dev/null || [ $? -eq 1 ]'
    )
    query = dpkg.query_argv(_names(caps))
    return ["sh", "-c", script, "kiln-enroot-read", path, nccl_fact, *query]


def node_state(output: str) -> dict[str, Any]:
    """node_read_argv's output as {arch, fstype, old_conf, nccl (the nccl_env role's
    record, {} where there is none), dpkg (dpkg-query's answer)}."""
    head, _, answer = output.partition(f"{_DPKG_SECTION}\n")
    fields = dict(line.partition(" ")[::2] for line in head.splitlines())
    nccl = fields.get("nccl", "").strip()
    return {
        "arch": fields.get("arch", "").strip(),
        "fstype": fields.get("fstype", "").strip(),
        "old_conf": fields.get("old_conf", "").strip() == "yes",
        "nccl": json.loads(base64.b64decode(nccl)) if nccl else {},
        "dpkg": answer,
    }


def missing(chosen: list[dict[str, str]], dpkg_output: str) -> list[dict[str, str]]:
    """The packages not installed at the pinned version, from dpkg-query's answer (in
    node_read_argv's output): absent, at another version, or left half-installed by a
    failed run (unpacked, half-configured, removed with its configuration kept)."""
    absent = set(dpkg.missing(_wanted(chosen), dpkg_output))
    return [p for p in chosen if f"{p['package']}={p['version']}" in absent]


_VERBS = {"Depends": "depends on", "PreDepends": "pre-depends on", "Conflicts": "conflicts with"}


def install_failure(host: str, chosen: list[dict[str, str]], apt_output: str) -> str:
    """One line for an apt run that could not install the packages: what they depend on
    that apt cannot install on this host, as apt says, or apt's last error."""
    release = f"enroot {chosen[0]['version']}" if chosen else "enroot"
    unmet = [
        f"{package} {_VERBS.get(relation, relation.lower())} {what}"
        + (f", but {reason}" if reason else "")
        for package, relation, what, reason in dpkg.unmet(apt_output)
    ]
    if unmet:
        return f"{release} cannot be installed on {host}: " + "; ".join(unmet)
    errors = [line[3:].strip() for line in apt_output.splitlines() if line.startswith("E: ")]
    said = errors[0] if errors else (apt_output.strip().splitlines() or ["no output"])[-1]
    return f"{release} cannot be installed on {host}: apt: {said}"


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """What `kiln inventory check` finds wrong in one host's enroot_* settings (given
    without the prefix), before any node is touched."""
    version = str(settings.get("version") or "")
    if not version:
        return []
    problems = pinned.problems("enroot", settings, "4.1.2", "the enroot package's")
    if settings.get("caps", True) and (
        wrong := pinned.sha256_problem(
            "enroot_caps_sha256",
            settings.get("caps_sha256"),
            "the enroot+caps package's",
            f"enroot_version {pinned.named(version)} with enroot_caps",
        )
    ):
        problems.append(wrong)
    for hook in settings.get("extra_hooks") or []:
        if not isinstance(hook, str) or not _HOOK.fullmatch(hook):
            problems.append(f"enroot_extra_hooks: {hook!r} is not a hook file name (NAME.sh)")
    return problems + config_problems(settings)


def config_problems(settings: dict[str, Any]) -> list[str]:
    """The values enroot.conf cannot hold, one line each: enroot expands every value in
    a shell, so only plain characters and the expansions its documentation shows."""
    problems = []
    # enroot_path: where the four paths' defaults put their directories.
    for index, key in enumerate(["path", *(key for _, key in SETTINGS)]):
        if key in settings:
            check = formats.enroot_path if index < 5 else formats.enroot_value
            if why := check(settings[key]):
                problems.append(f"enroot_{key} {_value(settings[key])!r}: {why}")
    extra = settings.get("extra_config") or {}
    for name, value in sorted(extra.items(), key=lambda item: str(item[0])):
        if not isinstance(name, str) or not _SETTING.fullmatch(name):
            problems.append(f"enroot_extra_config: {name!r} is not an ENROOT_ setting")
        elif name in dict(SETTINGS):
            problems.append(f"enroot_extra_config: {name} has its own variable")
        elif why := formats.enroot_value(value):
            problems.append(f"enroot_extra_config: {name} {_value(value)!r}: {why}")
    return problems


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def config(settings: dict[str, Any]) -> str:
    """Kiln's drop-in (CONF): its settings, then the operator's extra ones. A setting in
    the package's enroot.conf, or in a drop-in named before this one, wins over it."""
    if problems := config_problems(settings):
        raise EnrootError(problems[0])
    lines = ["# Written by Kiln (role enroot): read after /etc/enroot/enroot.conf."]
    for name, key in SETTINGS:
        lines.append(f"{name} {_value(settings[key])}")
    for name, value in sorted((settings.get("extra_config") or {}).items()):
        lines.append(f"{name} {_value(value)}")
    return "\n".join(lines) + "\n"


def directories(settings: dict[str, Any]) -> list[str]:
    """The directories Kiln makes (mode 1777): where a path names the user or group
    (`.../user-$(id -u)`), the directory above that part, enroot making the rest; else
    the path itself."""
    found = []
    for _, key in SETTINGS[:4]:
        path = str(settings[key])
        if why := formats.enroot_path(path):
            raise EnrootError(f"enroot_{key} {path!r}: {why}")
        head, dollar, _ = path.partition("$")
        if not dollar:
            directory = path.rstrip("/")
        elif head.endswith("/"):
            directory = head.rstrip("/")
        else:
            directory = head.rsplit("/", 1)[0]
        if directory and directory not in found:
            found.append(directory)
    return found


def files(conf: str, directories_made: list[str], mounts: dict[str, str]) -> list[dict]:
    """Kiln's enroot files as kiln.cluster.write_files entries, written in one step: the
    directories (sticky, as /tmp), the settings' drop-in and each mounts.d file, removed
    where it has no line (nothing of that kind declared)."""
    entries: list[dict] = [
        {"path": d, "state": "directory", "mode": "1777"} for d in directories_made
    ]
    entries.append({"path": CONF, "content": conf, "diff": True})
    for name, text in mounts.items():
        path = f"{MOUNTS_DIR}/{name}"
        entries.append(
            {"path": path, "content": text, "diff": True}
            if text
            else {"path": path, "state": "absent"}
        )
    return entries


# Mounts in every container (fstab lines enroot reads from mounts.d): bound, created in
# the image where missing, and skipped quietly where the node lacks them.
def storage_mounts(autofs_mounts: Any, host_groups: list[str]) -> str:
    """The site's shared storage (the autofs role's mounts for this host), bound into
    containers at the same paths (rbind: an automount point brings its mounts along)."""
    lines = []
    for mount in autofs.for_host(autofs.parse(autofs_mounts or []), host_groups):
        point = mount.mount_point
        lines.append(f"{point} {point} none x-create=dir,rbind,nofail,silent")
    return "\n".join(lines) + "\n" if lines else ""


def nccl_mounts(files: list[str], directories: list[str] = ()) -> str:
    """NCCL's site file and any topology file it names, read-only: the site's settings
    reach the container as a file NCCL reads, so what a user exports still wins. Also
    a Google NCCL plugin's library directory (the job puts it on LD_LIBRARY_PATH)."""
    lines = [f"{f} {f} none x-create=file,bind,ro,nosuid,nodev,nofail,silent" for f in files]
    lines += [f"{d} {d} none x-create=dir,bind,ro,nosuid,nodev,nofail,silent" for d in directories]
    return "\n".join(lines) + "\n" if lines else ""
