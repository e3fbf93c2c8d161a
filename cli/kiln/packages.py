"""What an apt task has left to do on a node, read from one `dpkg-query` (and, for
state=latest, one `apt-cache policy`), so a task with nothing to do need not open apt's
whole cache (a second of CPU per node and task) to find that out:
- present: the packages not installed as asked;
- absent: the packages still installed (or, for a purge, with their configuration kept);
- latest: the packages not installed at apt's candidate version.

Only what these can answer alone: plain names, and for present `name=version` pins (apt's
`*` at the end of a version included). Anything else (version ranges, name patterns,
.deb files) is left to apt. So is the cache update, which only an install (or, for
latest, lists older than the task's cache_valid_time: cache_age_argv reads their age the
way ansible.builtin.apt does) needs.

Also: the dependencies apt says it cannot satisfy, from its output, so a failed install
is reported as one line naming them (kiln.roles.enroot)."""

import fnmatch
import re
from collections.abc import Callable

# Package names as Debian allows them, with an optional :architecture.
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*(:[a-z0-9-]+)?")
# The format query_argv's output is read with: package, version, status, tab-separated.
QUERY_FORMAT = "${binary:Package}\\t${Version}\\t${db:Status-Status}\\n"


def _split(wanted: str) -> tuple[str, str | None]:
    name, pinned, version = wanted.partition("=")
    return name, version if pinned else None


def understood(names: list[str]) -> bool:
    """Whether dpkg alone can say if these are installed as asked."""
    for wanted in names:
        name, version = _split(wanted)
        if not _NAME.fullmatch(name) or version == "":
            return False
        if version is not None and any(c in version for c in "<>?[]"):
            return False
    return bool(names)


def unpinned(names: list[str]) -> bool:
    """Whether these are plain names (no version), which absent and latest need."""
    return understood(names) and not any("=" in n for n in names)


def query_argv(names: list[str]) -> list[str]:
    return ["dpkg-query", "-W", f"-f={QUERY_FORMAT}", "--", *[_split(n)[0] for n in names]]


def _versions(dpkg_output: str, statuses: Callable[[str], bool]) -> dict[str, str]:
    """package -> version from query_argv's output, of the lines whose status passes
    (dpkg-query prints nothing for a name it has never seen)."""
    found: dict[str, str] = {}
    for line in dpkg_output.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and statuses(fields[2]):
            found[fields[0]] = fields[1]
            # dpkg names a package of the native architecture without :arch.
            found.setdefault(fields[0].split(":")[0], fields[1])
    return found


def _installed(status: str) -> bool:
    return status == "installed"


def missing(names: list[str], dpkg_output: str) -> list[str]:
    """The entries of names not installed as asked, given query_argv's output."""
    installed = _versions(dpkg_output, _installed)
    absent = []
    for wanted in names:
        name, version = _split(wanted)
        have = installed.get(name)
        if have is None or (version is not None and not fnmatch.fnmatchcase(have, version)):
            absent.append(wanted)
    return absent


def present(names: list[str], dpkg_output: str, purge: bool) -> list[str]:
    """The names apt has to remove, given query_argv's output: every one dpkg knows in
    another state than not-installed (half-installed too); one removed with its
    configuration kept only for a purge."""
    gone = {"not-installed"} if purge else {"not-installed", "config-files"}
    found = _versions(dpkg_output, lambda status: status not in gone)
    return [n for n in names if n in found]


def policy_argv(names: list[str]) -> list[str]:
    # apt-cache translates "Installed:" and "Candidate:".
    return ["env", "LC_ALL=C", "apt-cache", "policy", *names]


def _policy(policy_output: str) -> dict[str, tuple[str, str]]:
    """package -> (installed, candidate) from policy_argv's output ("(none)" for none)."""
    found: dict[str, tuple[str, str]] = {}
    package, installed = "", ""
    for line in policy_output.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            package, installed = line[:-1], ""
        elif line.startswith("  Installed: "):
            installed = line.removeprefix("  Installed: ")
        elif line.startswith("  Candidate: ") and package:
            found[package] = (installed, line.removeprefix("  Candidate: "))
    return found


def outdated(names: list[str], dpkg_output: str, policy_output: str) -> list[str]:
    """The names not installed at apt's candidate version (what state=latest installs,
    up or down with a pin), given query_argv's and policy_argv's output."""
    installed = _versions(dpkg_output, _installed)
    policy = _policy(policy_output)
    return [n for n in names if n not in installed or policy.get(n) != (installed[n], installed[n])]


# The age in seconds of apt's lists as ansible.builtin.apt reads it for cache_valid_time:
# the mtime of the stamp apt's periodic update writes, else of the lists' directory; none
# of them (stat fails) reads as never updated.
_CACHE_AGE = (
    "f=/var/lib/apt/periodic/update-success-stamp; [ -e $f ] || f=/var/lib/apt/lists; "
    "echo $(( $(date +%s) - $(stat -c %Y $f 2>/dev/null || echo 0) ))"
)


def cache_age_argv() -> list[str]:
    return ["sh", "-c", _CACHE_AGE]


def lists_index_argv() -> list[str]:
    """Names one package index in apt's lists (nothing where there is none: lists emptied
    when an image was built, whose directory still reads as recently updated)."""
    index = ["-name", "*_Packages*", "-print", "-quit"]
    return ["find", "/var/lib/apt/lists", "-maxdepth", "1", *index]


# apt's account of what it cannot install, under "The following packages have unmet
# dependencies:": " enroot : Depends: bsdmainutils but it is not installable", further
# relations of the same package on lines of their own below it.
_UNMET_HEAD = "The following packages have unmet dependencies:"
_UNMET = re.compile(
    r"^ (?:(?P<package>\S+) +: )? *(?P<relation>[A-Z][A-Za-z-]+): (?P<what>.+?)"
    r"(?: but (?P<reason>.+))?$"
)


def unmet(apt_output: str) -> list[tuple[str, str, str, str]]:
    """(package, relation, dependency, apt's reason) for each unmet dependency apt
    names in its output ("enroot", "Depends", "bsdmainutils", "it is not installable")."""
    found: list[tuple[str, str, str, str]] = []
    lines = apt_output.splitlines()
    if _UNMET_HEAD not in lines:
        return found
    joined: list[str] = []
    for line in lines[lines.index(_UNMET_HEAD) + 1 :]:
        if joined and joined[-1].endswith(" or"):  # an alternative, on a line of its own
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    package = ""
    for line in joined:
        match = _UNMET.match(line)
        if not match:
            break
        package = match["package"] or package
        found.append((package, match["relation"], match["what"], match["reason"] or ""))
    return found
