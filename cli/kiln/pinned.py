"""Software Kiln downloads from outside the distribution (HPC-X, enroot, pyxis): a
release pinned together with the sha256 of what is downloaded, fetched once to the
control node or by each node from a mirror. The checks every such role shares."""

import re
from typing import Any

FETCH_MODES = ("control", "node")  # the <role>_fetch choices
RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(value: Any) -> bool:
    return bool(SHA256.fullmatch(str(value or "")))


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
    if not is_sha256(settings.get("sha256")):
        found.append(
            f"{role}_version {shown} needs {role}_sha256: {artifact} sha256 "
            "(64 hex digits), pinned with the version"
        )
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
