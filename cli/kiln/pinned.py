"""Software Kiln downloads from outside the distribution (HPC-X, enroot, pyxis): a
release pinned together with the sha256 of what is downloaded, fetched once to the
control node or by each node from a mirror. The checks every such role shares."""

import re
from typing import Any

FETCH_MODES = ("control", "node")  # the <role>_fetch choices
RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
SHA256 = re.compile(r"[0-9a-f]{64}")


# A sha256 has 16 hex digits to choose from at each of 64 places: one written with four
# or fewer different digits (all zeros, 1234...) is a placeholder, never a real digest.
_PLACEHOLDER_DIGITS = 4
PINS_HINT = "`kiln inventory pins -i INVENTORY --write` fetches it and fills it in"


def is_sha256(value: Any) -> bool:
    return isinstance(value, str) and sha256_problem("", value, "") == ""


def sha256_problem(variable: str, value: Any, what: str, needed_by: str = "") -> str:
    """Why VALUE is no sha256 of WHAT ("" when it is one), one line naming VARIABLE and
    the command that fills it in. A YAML number (64 unquoted zeros read as 0) or a
    placeholder gets its own words: the setting is there, but is no digest."""
    if value is None or value == "":
        needer = needed_by or "the version"
        return f"{needer} needs {variable}: {what} sha256 (64 hex digits); {PINS_HINT}"
    if isinstance(value, bool) or not isinstance(value, str):
        return (
            f"{variable} is {type(value).__name__} {value!r}, not a sha256: YAML reads unquoted "
            f"digits as a number; quote it, or {PINS_HINT}"
        )
    if not SHA256.fullmatch(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return f"{variable} {shown!r} is not a sha256 (64 hex digits, lower case); {PINS_HINT}"
    if len(set(value)) <= _PLACEHOLDER_DIGITS:
        return f"{variable} {value[:12]}... is a placeholder, not {what} sha256; {PINS_HINT}"
    return ""


def named(version: str, release: re.Pattern[str] = RELEASE) -> str:
    """The version as messages name it: quoted where it is no release (a line break in
    it would start another line of the message)."""
    return version if release.fullmatch(version) else repr(version)


def problems(
    role: str,
    settings: dict[str, Any],
    example: str,
    artifact: str,
    release: re.Pattern[str] = RELEASE,
) -> list[str]:
    """The <role>_version's form, its <role>_sha256 and <role>_fetch, one line each
    (settings without the prefix); `artifact` names what the sha256 is of."""
    version = str(settings.get("version") or "")
    found = []
    shown = named(version, release)
    if not release.fullmatch(version):
        found.append(f"{role}_version {version!r}: expected a release such as {example}")
    if wrong := sha256_problem(
        f"{role}_sha256", settings.get("sha256"), artifact, f"{role}_version {shown}"
    ):
        found.append(wrong)
    fetch = settings.get("fetch", "control")
    if fetch not in FETCH_MODES:
        found.append(f"{role}_fetch {fetch!r}: expected one of {', '.join(FETCH_MODES)}")
    return found


def tag_archive(project: str, version: str, sha256: str, base_url: str) -> dict[str, str]:
    """A release's source tarball: GitHub's tag archive (v<version>.tar.gz, unpacking to
    <project>-<version>/), or a mirror kept in that layout."""
    return {
        "url": f"{base_url.rstrip('/')}/v{version}.tar.gz",
        "file": f"{project}-{version}.tar.gz",
        "top": f"{project}-{version}",
        "sha256": sha256,
    }


# The releases `kiln inventory new` pins (each role's README names the same).
DEFAULT_VERSIONS = {"nccl_tests": "2.19.6", "pyxis": "0.24.0", "enroot": "4.1.2", "hpcx": "2.22.1"}
# The sha256 of releases Kiln documents (docs/inventory.md, "Pinned releases", where each
# comes from): GitHub's tag archives are `git archive --prefix=<project>-<version>/` of
# the tag through `gzip -n`, which gives Spack's published digests of nccl-tests byte
# for byte. `kiln inventory pins` checks any other against the download itself.
KNOWN_SHA256 = {
    ("nccl_tests", "2.19.6"): "adbd3d27ba6c00bd7b7cf98cc8811c6ad860427ecd5de59527466b21472c0d93",
    ("pyxis", "0.24.0"): "9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4",
}
