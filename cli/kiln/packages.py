"""Which of the packages an apt task asks for are not installed as asked: read from one
`dpkg-query` on the node, so a task whose packages are all there need not open apt's
cache (a second of CPU per node and task) to find that out.

Only what dpkg can answer alone: plain names and `name=version` pins (apt's `*` at the
end of a version included). Anything else (version ranges, name patterns, .deb files)
is left to apt.

Also: the dependencies apt says it cannot satisfy, from its output, so a failed install
is reported as one line naming them (kiln.enroot)."""

import fnmatch
import re

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


def query_argv(names: list[str]) -> list[str]:
    return ["dpkg-query", "-W", f"-f={QUERY_FORMAT}", "--", *[_split(n)[0] for n in names]]


def missing(names: list[str], dpkg_output: str) -> list[str]:
    """The entries of names not installed as asked, given query_argv's output (dpkg-query
    prints nothing for a name it has never seen)."""
    installed: dict[str, str] = {}
    for line in dpkg_output.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[2] == "installed":
            package, version = fields[0], fields[1]
            installed[package] = version
            # dpkg names a package of the native architecture without :arch.
            installed.setdefault(package.split(":")[0], version)
    absent = []
    for wanted in names:
        name, version = _split(wanted)
        have = installed.get(name)
        if have is None or (version is not None and not fnmatch.fnmatchcase(have, version)):
            absent.append(wanted)
    return absent


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
