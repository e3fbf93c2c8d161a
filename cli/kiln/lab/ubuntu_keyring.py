"""Ubuntu's archive keyring for debootstrap on a Debian host, from the ubuntu-keyring
package of Ubuntu's own archive. The package comes over plain HTTP, so its keyring is
used only if it holds the archive's signing key by fingerprint (pinned here); debootstrap
then checks the release's signature with it."""

import gzip
import hashlib
import subprocess
import urllib.request
from pathlib import Path

from kiln.errors import ExitCode, KilnError

# Ubuntu Archive Automatic Signing Key (2018) <ftpmaster@ubuntu.com>: signs the Release
# files of 22.04 and 24.04.
ARCHIVE_KEY = "F6ECB3762474EDA9D21B7022871920D1991BC93C"
PACKAGE = "ubuntu-keyring"
KEYRING = "usr/share/keyrings/ubuntu-archive-keyring.gpg"
TIMEOUT_S = 60


def fingerprints(keyring: bytes) -> list[str]:
    """The v4 fingerprints of the primary keys in a binary OpenPGP keyring (RFC 4880:
    SHA-1 of 0x99, the key packet's two-byte length and its body)."""
    found = []
    at = 0
    while at < len(keyring):
        header = keyring[at]
        at += 1
        if not header & 0x80:
            raise ValueError(f"not an OpenPGP packet at byte {at - 1}")
        if header & 0x40:  # new format: tag in the low six bits, length after
            tag = header & 0x3F
            first = keyring[at]
            if first < 192:
                length, at = first, at + 1
            elif first < 224:
                length, at = ((first - 192) << 8) + keyring[at + 1] + 192, at + 2
            elif first == 255:
                length, at = int.from_bytes(keyring[at + 1 : at + 5], "big"), at + 5
            else:
                raise ValueError("partial-length packet in a keyring")
        else:  # old format: tag in bits 2-5, the length's size in bits 0-1
            tag = (header >> 2) & 0x0F
            size = {0: 1, 1: 2, 2: 4}.get(header & 0x03)
            if size is None:
                raise ValueError("indeterminate-length packet in a keyring")
            length, at = int.from_bytes(keyring[at : at + size], "big"), at + size
        body = keyring[at : at + length]
        at += length
        if tag == 6 and body[:1] == b"\x04":  # a version 4 public key
            framed = b"\x99" + len(body).to_bytes(2, "big") + body
            found.append(hashlib.sha1(framed, usedforsecurity=False).hexdigest().upper())
    return found


def package_entry(packages: str, name: str = PACKAGE) -> dict[str, str]:
    """The fields of NAME's stanza in an apt Packages index."""
    for stanza in packages.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Package") == name:
            return fields
    raise KeyError(name)


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return answer.read()
    except OSError as exc:
        raise KilnError(f"Ubuntu's archive did not answer: {url}: {exc}", ExitCode.FAILED) from exc


def fetch(mirror: str, codename: str, into: Path) -> Path:
    """Download CODENAME's ubuntu-keyring from MIRROR (the archive's root) into INTO and
    return its archive keyring, once it is known to hold ARCHIVE_KEY."""
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    index = f"{mirror}/dists/{codename}/main/binary-{arch}/Packages.gz"
    try:
        entry = package_entry(gzip.decompress(_get(index)).decode())
    except (KeyError, OSError, EOFError) as exc:
        raise KilnError(f"no {PACKAGE} in {index}: {exc}", ExitCode.FAILED) from exc
    deb = _get(f"{mirror}/{entry['Filename']}")
    if hashlib.sha256(deb).hexdigest() != entry.get("SHA256"):
        raise KilnError(f"{entry['Filename']}: sha256 differs from {index}'s", ExitCode.FAILED)
    into.mkdir(parents=True, exist_ok=True)
    (into / "keyring.deb").write_bytes(deb)
    subprocess.run(["dpkg-deb", "-x", str(into / "keyring.deb"), str(into / "tree")], check=True)
    keyring = into / "tree" / KEYRING
    try:
        keys = fingerprints(keyring.read_bytes())
    except (OSError, ValueError, IndexError) as exc:
        raise KilnError(f"{PACKAGE} {entry['Version']}: {KEYRING}: {exc}", ExitCode.FAILED) from exc
    if ARCHIVE_KEY not in keys:
        raise KilnError(
            f"{PACKAGE} {entry['Version']} from {mirror} lacks Ubuntu's archive key"
            f" {ARCHIVE_KEY} (it holds {', '.join(keys) or 'none'}): not used",
            ExitCode.FAILED,
        )
    return keyring
