"""`kiln inventory pins`: the sha256 of every artifact the inventory pins by version and
has no digest for yet, fetched once from the URL the role would use (NVIDIA's servers,
or the mirror the inventory names), checked to be what the version says, and proposed.

Each download is checked before its digest is trusted: a release's source archive
unpacks to `<project>-<version>/`; an enroot package's control fields name the package,
version and architecture; an HPC-X tarball unpacks to the directory its name says; a
repository's signing key is an OpenPGP public key with the publisher's fingerprint.
What is fetched is kept in Kiln's download cache, where the roles find it (a
provision does not download it again).
"""

import base64
import hashlib
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from kiln import paths, pinned, roles
from kiln.errors import InputError
from kiln.inventory.spec import ClusterSpec, Definition
from kiln.roles import enroot, hpcx

# The signing keys the repositories publish, by their OpenPGP v4 fingerprint: NVIDIA's
# CUDA repositories (3bf863cc.pub, since 2022; 8793F200.pub on the newest repositories)
# and Grafana's apt repository (gpg.key, since 2023-08-24). A mirror serves the same key.
KEY_FINGERPRINTS = {
    "cuda": {
        "EB693B3035CD5710E231E123A4B469963BF863CC": "NVIDIA CUDA repository key 3bf863cc",
        "02182E60104FCDC26EAE1B8597A5D4CB8793F200": "NVIDIA CUDA repository key 8793f200",
    },
    "grafana": {
        "B53AE77BADB630A683046005963FA27710458545": "Grafana's apt repository key",
    },
}
MAX_BYTES = 4 << 30  # the largest artifact Kiln pins (HPC-X) is well under 1 GiB
TIMEOUT_S = 60  # for each read: a mirror that stops answering ends the download


class PinError(InputError):
    """A download that failed or is not what the version says: nothing is written."""


@dataclass
class Wanted:
    """One digest to find: the variable it goes to and the file it is of."""

    variable: str
    url: str
    file: str  # the name in the download cache (<cache>/<role>/<file>)
    role: str
    # (why the file is not what it should be, or ""; what the check found, or "")
    verify: Callable[[Path], tuple[str, str]]
    sha256: str = ""
    note: str = ""  # what the check found (a key's fingerprint)
    documented: str = ""  # the sha256 Kiln documents for this release, if any
    warning: str = ""  # the download differs from the documented sha256


@dataclass
class Plan:
    wanted: list[Wanted] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # pins Kiln cannot fill here, and why


# --- what the inventory pins ---------------------------------------------------------------


def settings_of(spec: ClusterSpec, role: str, host: str | None = None) -> dict[str, Any] | None:
    """The role's settings without its prefix, as HOST (else the first host it runs on)
    resolves them: the inventory's values over the role's defaults, simple templates
    rendered."""
    entry = roles.ROLES[role]
    hosts = [host] if host else entry.hosts(spec.groups, spec.hosts)
    if not hosts:
        return None
    values = {**entry.defaults(), **spec.hosts[hosts[0]].vars}
    settings = {
        k.removeprefix(entry.prefix): v for k, v in values.items() if k.startswith(entry.prefix)
    }
    return {k: _render(v, values) for k, v in settings.items()}


def _render(value: Any, variables: dict[str, Any]) -> Any:
    """A setting whose default names another setting (`{{ monitoring_grafana_repository_url
    }}/gpg.key`): rendered from the inventory's values; anything it cannot resolve stays."""
    if not isinstance(value, str) or "{{" not in value:
        return value
    try:
        template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(value)
        return template.render(**variables)
    except jinja2.TemplateError:
        return value


def plan(spec: ClusterSpec, arch: str, flavour: hpcx.Flavour | None, cuda_distro: str) -> Plan:
    """Every pin whose version is set and whose digest is empty. `arch` is the compute
    nodes' (x86_64, aarch64); `flavour` and `cuda_distro` (debian12, ubuntu2404) come from
    a discovery of the nodes, None/"" where there was none."""
    found = Plan()
    deb_arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(arch, arch)
    for project, role in (("nccl-tests", "nccl_tests"), ("pyxis", "pyxis")):
        settings = settings_of(spec, role)
        if settings and _unpinned(settings, "version", "sha256"):
            version = str(settings["version"])
            archive = pinned.tag_archive(project, version, "", str(settings["base_url"]))
            found.wanted.append(
                Wanted(
                    f"{role}_sha256",
                    archive["url"],
                    archive["file"],
                    role,
                    _top_dir(archive["top"]),
                    documented=pinned.KNOWN_SHA256.get((role, version), ""),
                )
            )
    settings = settings_of(spec, "enroot")
    if settings and settings.get("version"):
        version = str(settings["version"])
        packages = enroot.packages(
            version, "", bool(settings.get("caps", True)), "", deb_arch, str(settings["base_url"])
        )
        for package, key in zip(packages, ("sha256", "caps_sha256"), strict=False):
            if _unpinned(settings, "version", key):
                found.wanted.append(
                    Wanted(
                        f"enroot_{key}",
                        package["url"],
                        package["file"],
                        "enroot",
                        _deb(package["package"], package["version"], deb_arch),
                    )
                )
    settings = settings_of(spec, "hpcx")
    if settings and _unpinned(settings, "version", "sha256"):
        version = str(settings["version"])
        url = str(settings.get("url") or "")
        if not url and flavour is None:
            found.skipped.append(
                "hpcx_sha256: HPC-X's tarball depends on the nodes' OS and RDMA stack: run "
                "`kiln inventory discover` first, or set hpcx_url"
            )
        else:
            url = url or hpcx.default_url(str(settings["base_url"]), version, flavour)
            name = hpcx.file_name(url)
            found.wanted.append(
                Wanted("hpcx_sha256", url, name, "hpcx", _top_dir(name.removesuffix(".tbz")))
            )
    settings = settings_of(spec, "nvidia_driver")
    if (
        settings
        and settings.get("source") == "cuda-repo"
        and not settings.get("cuda_repo_key_sha256")
    ):
        url = str(settings.get("cuda_repo_key_url") or "")
        if not url and settings.get("cuda_repo_url"):
            url = str(settings["cuda_repo_url"]).rstrip("/") + "/3bf863cc.pub"
        if not url and cuda_distro:
            repo_arch = "sbsa" if arch == "aarch64" else arch
            url = f"https://developer.download.nvidia.com/compute/cuda/repos/{cuda_distro}/{repo_arch}/3bf863cc.pub"
        if url:
            found.wanted.append(
                Wanted(
                    "nvidia_driver_cuda_repo_key_sha256",
                    url,
                    "cuda-repository-key.asc",
                    "nvidia_driver",
                    _key("cuda"),
                )
            )
        else:
            found.skipped.append(
                "nvidia_driver_cuda_repo_key_sha256: NVIDIA's repository is named for the "
                "nodes' OS: run `kiln inventory discover` first, or set "
                "nvidia_driver_cuda_repo_key_url"
            )
    settings = settings_of(spec, "monitoring")
    if (
        settings
        and settings.get("grafana") is True
        and not settings.get("grafana_repository_key_sha256")
    ):
        found.wanted.append(
            Wanted(
                "monitoring_grafana_repository_key_sha256",
                str(settings["grafana_repository_key_url"]),
                "grafana-repository-key.asc",
                "monitoring",
                _key("grafana"),
            )
        )
    return found


def _unpinned(settings: dict[str, Any], version: str, digest: str) -> bool:
    """A version is set and its digest is not one (empty, a number, a placeholder)."""
    return bool(settings.get(version)) and bool(pinned.sha256_problem("", settings.get(digest), ""))


@dataclass(frozen=True)
class Nodes:
    """What the last `kiln inventory discover` read of the compute nodes, as pins need
    it: their architecture, HPC-X flavour and NVIDIA's name for their OS."""

    arch: str = "x86_64"
    flavour: hpcx.Flavour | None = None
    cuda_distro: str = ""
    notes: tuple[str, ...] = ()


def nodes(spec: ClusterSpec) -> Nodes:
    from kiln.inventory import discover

    read = discover.last(spec)
    compute = [read[h] for h in spec.group("slurm_compute") if isinstance(read.get(h), dict)]
    if not compute:
        return Nodes(notes=("no discovery of the compute nodes: x86_64 assumed",))
    archs = sorted({str(n.get("architecture") or "x86_64") for n in compute})
    settings = settings_of(spec, "hpcx") or {}
    flavours, distros = set(), set()
    for node in compute:
        distribution, major = str(node.get("distribution", "")), str(node.get("major", ""))
        version = str(node.get("os", "")).rpartition(" ")[2]
        distros.add(
            f"debian{major}" if distribution == "Debian" else f"ubuntu{version.replace('.', '')}"
        )
        if settings.get("version"):
            try:
                flavours.add(
                    hpcx.node_flavour(
                        distribution,
                        major,
                        str(node.get("architecture", "")),
                        str(node.get("rdma_stack", "")),
                        str(settings.get("cuda", "12")),
                        str(settings["version"]),
                    )
                )
            except hpcx.HpcxError as exc:
                return Nodes(archs[0], None, "", (f"hpcx: {exc}",))
    notes = []
    if len(archs) > 1:
        notes.append(f"the compute nodes are of several architectures ({', '.join(archs)})")
    if len(flavours) > 1:
        notes.append("the compute nodes take different HPC-X builds: set hpcx_url per group")
    return Nodes(
        archs[0],
        flavours.pop() if len(flavours) == 1 else None,
        distros.pop() if len(distros) == 1 else "",
        tuple(notes),
    )


# --- fetching and checking -----------------------------------------------------------------


def fetch(wanted: Wanted, cache: Path | None = None) -> Wanted:
    """Download WANTED once into the cache (or take it from there), check it, and fill in
    its sha256. PinError names the URL and what was wrong; a file that fails its check
    is not kept."""
    directory = (cache or paths.state_dir() / "cache") / wanted.role
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / wanted.file
    where = shown(wanted.url)
    if not target.is_file():
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{wanted.file}.")
        try:
            with open(handle, "wb") as out:
                _download(wanted.url, out, f"{wanted.variable}: {where}")
            Path(temporary).replace(target)
        finally:
            Path(temporary).unlink(missing_ok=True)
    problem, wanted.note = wanted.verify(target)
    if problem:
        target.unlink(missing_ok=True)
        raise PinError(f"{wanted.variable}: {where} {problem}; nothing written")
    digest = hashlib.sha256()
    with target.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    wanted.sha256 = digest.hexdigest()
    if wanted.documented and wanted.sha256 != wanted.documented:
        # Not refused: a lab's stand-ins differ by design. A real mirror should not.
        wanted.warning = (
            f"{wanted.variable}: {where} is not the release Kiln documents (sha256 "
            f"{wanted.documented}): it unpacks as the version says, but its bytes differ; "
            "check your mirror before you pin it"
        )
    return wanted


def shown(url: str) -> str:
    """The URL as messages show it: without credentials (user:password@)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.IGNORECASE)


def _download(url: str, out: io.BufferedWriter, shown: str) -> None:
    if not re.match(r"(https?|file)://", url):
        raise PinError(f"{shown}: not an http(s):// or file:// URL; nothing written")
    total = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            for chunk in iter(lambda: answer.read(1 << 20), b""):
                total += len(chunk)
                if total > MAX_BYTES:
                    raise PinError(f"{shown}: larger than {MAX_BYTES >> 30} GiB; nothing written")
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        raise PinError(f"{shown}: HTTP {exc.code} {exc.reason}; nothing written") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise PinError(f"{shown}: cannot fetch it ({reason}); nothing written") from None


def _top_dir(top: str) -> Callable[[Path], tuple[str, str]]:
    """A tarball whose every member lies in TOP/ (GitHub's tag archives, HPC-X)."""

    def verify(path: Path) -> tuple[str, str]:
        try:
            with tarfile.open(path) as archive:
                names = {name.split("/", 1)[0] for name in archive.getnames()}
        except (tarfile.TarError, OSError, EOFError) as exc:
            return f"is not a tar archive ({exc})", ""
        if names != {top}:
            found = ", ".join(sorted(names)[:3]) or "nothing"
            return f"does not unpack to {top}/ (it holds {found}): another release?", ""
        return "", f"unpacks to {top}/"

    return verify


def _deb(package: str, version: str, arch: str) -> Callable[[Path], tuple[str, str]]:
    """A Debian package whose control fields name PACKAGE at VERSION for ARCH."""

    def verify(path: Path) -> tuple[str, str]:
        try:
            fields = deb_fields(path)
        except ValueError as exc:
            return f"is not a Debian package ({exc})", ""
        wanted = {"Package": package, "Version": version, "Architecture": arch}
        wrong = [f"{k} {fields.get(k, '(none)')}" for k, v in wanted.items() if fields.get(k) != v]
        if wrong:
            said = ", ".join(wrong)
            return f"is not {package} {version} for {arch}: its control says {said}", ""
        return "", f"{package} {version} {arch}"

    return verify


def deb_fields(path: Path) -> dict[str, str]:
    """The control fields of a .deb: dpkg-deb where the control node has it (every
    compression), else read from the ar archive here (gzip or xz)."""
    if shutil.which("dpkg-deb"):
        done = subprocess.run(
            ["dpkg-deb", "--field", str(path)], capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0:
            raise ValueError(
                done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "dpkg-deb failed"
            )
        return _control(done.stdout)
    data = path.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("no ar archive")
    offset = 8
    while offset + 60 <= len(data):
        name = data[offset : offset + 16].decode(errors="replace").strip().rstrip("/")
        size = int(data[offset + 48 : offset + 58].decode().strip() or 0)
        body = data[offset + 60 : offset + 60 + size]
        if name.startswith("control.tar"):
            try:
                with tarfile.open(fileobj=io.BytesIO(body)) as control:
                    member = next(
                        m for m in control.getmembers() if m.name.lstrip("./") == "control"
                    )
                    return _control(control.extractfile(member).read().decode())
            except (tarfile.TarError, StopIteration, AttributeError) as exc:
                raise ValueError(f"cannot read {name} here ({exc})") from None
        offset += 60 + size + (size % 2)
    raise ValueError("no control.tar member")


def _control(text: str) -> dict[str, str]:
    return {
        key: value.strip()
        for key, _, value in (
            line.partition(":") for line in text.splitlines() if line and not line[0].isspace()
        )
    }


def _key(publisher: str) -> Callable[[Path], tuple[str, str]]:
    """An ASCII-armored OpenPGP public key with one of PUBLISHER's fingerprints."""

    def verify(path: Path) -> tuple[str, str]:
        known = KEY_FINGERPRINTS[publisher]
        try:
            found = key_fingerprint(path.read_text(errors="replace"))
        except ValueError as exc:
            return f"is not an OpenPGP public key ({exc})", ""
        if found not in known:
            listed = ", ".join(known)
            return f"is a key with fingerprint {found}, not {publisher}'s ({listed})", ""
        return "", f"fingerprint {found}: {known[found]}"

    return verify


def key_fingerprint(armored: str) -> str:
    """The v4 fingerprint of the first public key packet of an ASCII-armored key: SHA-1
    over 0x99, the packet body's two-byte length and the body (RFC 4880, 12.2)."""
    begin, finish = "-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----END PGP PUBLIC KEY BLOCK-----"
    if begin not in armored or finish not in armored.split(begin, 1)[1]:
        raise ValueError("no armored public key block")
    block = armored.split(begin, 1)[1].split(finish, 1)[0]
    # Armor headers hold ':' (base64 never does); the last line, '=', is its checksum.
    lines = [
        line.strip()
        for line in block.splitlines()
        if line.strip() and ":" not in line and not line.strip().startswith("=")
    ]
    try:
        packets = base64.b64decode("".join(lines), validate=True)
    except ValueError:
        raise ValueError("its armor is not base64") from None
    if len(packets) < 3:
        raise ValueError("empty")
    tag_byte = packets[0]
    if not tag_byte & 0x80:
        raise ValueError("not an OpenPGP packet")
    if tag_byte & 0x40:  # new format: tag in the low 6 bits, then a length
        tag, (length, start) = tag_byte & 0x3F, _new_length(packets, 1)
    else:
        tag = (tag_byte >> 2) & 0x0F
        size = {0: 1, 1: 2, 2: 4}.get(tag_byte & 0x03)
        if size is None:
            raise ValueError("a packet of indeterminate length")
        length, start = int.from_bytes(packets[1 : 1 + size], "big"), 1 + size
    if tag != 6:
        raise ValueError("its first packet is not a public key")
    body = packets[start : start + length]
    if len(body) != length or not body or body[0] != 4:
        raise ValueError("not a version 4 public key")
    return hashlib.sha1(b"\x99" + length.to_bytes(2, "big") + body).hexdigest().upper()


def _new_length(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 192:
        return first, at + 1
    if first < 224:
        return ((first - 192) << 8) + data[at + 1] + 192, at + 2
    if first == 255:
        return int.from_bytes(data[at + 1 : at + 5], "big"), at + 5
    raise ValueError("a partial-length key packet")


def group_of(variable: str, definitions: list[Definition]) -> str:
    """The group whose file sets the release's version (a sha256 goes beside its
    version): group_vars/GROUP..., else all."""
    version = variable.replace("caps_sha256", "version").replace("sha256", "version")
    version = {
        "nvidia_driver_cuda_repo_key_version": "nvidia_driver_source",
        "monitoring_grafana_repository_key_version": "monitoring_grafana",
    }.get(version, version)
    for definition in definitions:
        if definition.name == version and definition.source.startswith("group_vars/"):
            return definition.source.removeprefix("group_vars/").split("/", 1)[0].split(".")[0]
    return "all"
