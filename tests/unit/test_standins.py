"""The stand-ins for NVIDIA's releases and Grafana's package (tests/standins.py, the
HPC-X script) against the facts of the real ones written in docs/containers.md,
docs/mpi.md, docs/nccl.md and docs/monitoring.md: each is built
here and read back as apt, make and tar see it, so a stand-in that drifts from its
release (or a fact changed in the docs without the stand-in) fails here."""

import configparser
import ctypes
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from kiln import cuda_toolkit as kiln_cuda_toolkit
from kiln.roles import enroot as kiln_enroot
from kiln.roles import hpcx as kiln_hpcx
from kiln.roles import nccl_tests as kiln_nccl_tests
from kiln.roles import pyxis as kiln_pyxis
from kiln_node import cuda_toolchain
from tests import standins

ENROOT = standins.facts("enroot")
GRAFANA = standins.facts("grafana", standins.GRAFANA_FACTS_DOC)
PYXIS = standins.facts("pyxis")
HPCX = standins.facts("hpcx", standins.REPO / "docs" / "mpi.md")
NCCL_TESTS = standins.facts("nccl_tests", standins.NCCL_FACTS_DOC)
ARCH = standins.arch()


def run(*argv: str, **kwargs) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kwargs).stdout


@pytest.fixture(scope="module")
def enroot_built(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    out = tmp_path_factory.mktemp("enroot")
    return out, {version: standins.enroot(out, version) for version in ENROOT["versions"]}


def deb(out: Path, name: str, version: str) -> Path:
    # Where the role's URL for this release and package points (GitHub's layout).
    [chosen] = [
        p
        for p in kiln_enroot.packages(version, "", True, "", ARCH, out.as_uri())
        if p["package"] == name
    ]
    return Path(chosen["url"].removeprefix("file://").replace("%2B", "+"))


def release_fields(release: Path) -> dict[str, str]:
    """An apt Release file's own fields (not its lists of checksums)."""
    return dict(
        line.split(": ", 1)
        for line in release.read_text().splitlines()
        if not line.startswith(" ") and ": " in line
    )


def dearmored(key: Path, keyring: Path) -> Path:
    """The armored key as the keyring gpgv reads, written to `keyring`."""
    done = subprocess.run(
        ["gpg", "--dearmor"], input=key.read_bytes(), capture_output=True, check=True
    )
    keyring.write_bytes(done.stdout)
    return keyring


def fields(package: Path) -> dict[str, str]:
    found = {}
    for line in run("dpkg-deb", "-f", str(package)).splitlines():
        if not line.startswith(" "):
            key, _, value = line.partition(": ")
            found[key] = value
    return found


def control_member(package: Path, member: str, where: Path) -> Path:
    control = where / package.name
    if not control.exists():
        run("dpkg-deb", "--control", str(package), str(control))
    return control / member


@pytest.mark.parametrize("version", ENROOT["versions"])
@pytest.mark.parametrize("name", ["enroot", "enroot+caps"])
def test_each_enroot_package_has_the_real_ones_control_fields(enroot_built, name, version):
    out, _ = enroot_built
    found = fields(deb(out, name, version))
    wanted = {k: v.format(version=version) for k, v in ENROOT["packages"][name]["fields"].items()}
    assert (found["Package"], found["Version"], found["Architecture"]) == (
        name,
        f"{version}-{ENROOT['revision']}",
        ARCH,
    )
    # Every relation apt resolves, and no other (no Conflicts or Replaces between the two).
    assert {k: v for k, v in found.items() if k in standins.RELATIONS} == wanted
    assert "STAND-IN" in found["Description"]


@pytest.mark.parametrize("version", ENROOT["versions"])
@pytest.mark.parametrize("name", ["enroot", "enroot+caps"])
def test_each_enroot_package_has_the_real_ones_files_conffiles_and_scripts(
    enroot_built, name, version, tmp_path
):
    out, _ = enroot_built
    package = deb(out, name, version)
    real = ENROOT["packages"][name]
    files, directories = listing(package)
    assert files == {path: _mode_string(mode) for path, mode in real["files"].items()}
    parents = {str(p) for path in real["files"] for p in Path(path).parents}
    assert set(directories) == parents
    conffiles = control_member(package, "conffiles", tmp_path)
    listed = conffiles.read_text().splitlines() if conffiles.exists() else []
    assert listed == real["conffiles"]
    scripts = {p.name for p in conffiles.parent.iterdir()} - {"control", "conffiles", "md5sums"}
    assert scripts == set(real["scripts"])


def listing(package: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The package's files and directories, each with its mode as `ls -l` writes it,
    as dpkg-deb lists them; every one is root's."""
    files, directories = {}, {}
    for line in run("dpkg-deb", "-c", str(package)).splitlines():
        mode, owner, _size, _day, _time, path = line.split(maxsplit=5)
        assert owner == "root/root", line
        path = path.removeprefix(".").rstrip("/") or "/"
        (directories if mode.startswith("d") else files)[path] = mode
    return files, directories


def _mode_string(octal: str) -> str:
    bits = int(octal, 8)
    return "-" + "".join(
        flag if bits & (1 << (8 - i)) else "-" for i, flag in enumerate("rwxrwxrwx")
    )


def test_every_conffile_changes_from_one_stand_in_release_to_the_next(enroot_built, tmp_path):
    # The case where dpkg would ask about a conffile a site changed: the enroot role's
    # upgrades and downgrades between the two must never come to that question.
    out, _ = enroot_built
    first, second = ENROOT["versions"]
    contents = {}
    for version in (first, second):
        unpacked = tmp_path / version
        run("dpkg-deb", "--extract", str(deb(out, "enroot", version)), str(unpacked))
        contents[version] = {
            path: (unpacked / path.lstrip("/")).read_bytes()
            for path in ENROOT["packages"]["enroot"]["conffiles"]
        }
    assert [p for p in contents[first] if contents[first][p] == contents[second][p]] == []


def test_the_stand_in_enroot_answers_its_version_and_runs_no_container(enroot_built, tmp_path):
    out, _ = enroot_built
    version = ENROOT["versions"][-1]
    run("dpkg-deb", "--extract", str(deb(out, "enroot", version)), str(tmp_path))
    program = str(tmp_path / "usr/bin/enroot")
    assert run(program, "version") == f"{version}\n"
    assert run(program, "list") == ""  # no containers, as pyxis's epilog asks
    refused = subprocess.run([program, "start", "x"], capture_output=True, text=True)
    assert refused.returncode == 1
    assert "STAND-IN" in refused.stderr


def test_the_stand_ins_are_the_same_bytes_every_time(enroot_built, tmp_path):
    _, digests = enroot_built
    version = ENROOT["versions"][0]
    assert standins.enroot(tmp_path, version) == digests[version]
    assert standins.pyxis(tmp_path, PYXIS["version"]) == standins.pyxis(
        tmp_path / "again", PYXIS["version"]
    )


def test_the_lab_settings_built_again_leave_the_files_a_running_lab_reads_untouched(
    tmp_path, monkeypatch
):
    """`make test` runs the new user's lab beside the e2e lab: building the stand-ins again
    must not rewrite a file the other lab's provision is reading; nothing is left beside."""
    monkeypatch.delenv(standins.RELEASES, raising=False)
    settings = tmp_path / "standins.yml"
    standins.lab_settings(tmp_path / "built", settings)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    seen = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}
    standins.lab_settings(tmp_path / "built", settings)
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files} == seen
    assert [p.name for p in files if p.name.startswith(".")] == []


def test_a_stand_in_can_depend_on_one_more_package(tmp_path):
    standins.enroot(tmp_path, "4.1.3", "kiln-no-such-package")
    depends = fields(deb(tmp_path, "enroot", "4.1.3"))["Depends"]
    assert depends == ENROOT["packages"]["enroot"]["fields"]["Depends"] + ", kiln-no-such-package"


@pytest.fixture(scope="module")
def pyxis_tree(tmp_path_factory) -> Path:
    """The stand-in's source, where the role's URL points, unpacked as the role does."""
    out = tmp_path_factory.mktemp("pyxis")
    version = PYXIS["version"]
    digest = standins.pyxis(out, version)
    source = kiln_pyxis.source(version, digest, out.as_uri())
    tarball = Path(source["url"].removeprefix("file://"))
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == digest
    with tarfile.open(fileobj=io.BytesIO(tarball.read_bytes())) as tar:
        top = PYXIS["top"].format(version=version)
        assert source["top"] == top
        assert tar.getnames() == [f"{top}/Makefile", f"{top}/standin.c", f"{top}/README"]
        tar.extractall(out, filter="data")
    return out / top


def test_pyxis_make_install_installs_what_the_real_one_does(pyxis_tree, tmp_path):
    # The plugin is not compiled here (no Slurm headers): an up-to-date one stands in.
    (pyxis_tree / "spank_pyxis.so").write_bytes(b"")
    libdir = kiln_pyxis.build_dir(PYXIS["version"], "24.11.5")
    variables = {"libdir": libdir, "datadir": "/usr/local/share"}
    run("make", "-s", "-C", str(pyxis_tree), "install", f"DESTDIR={tmp_path}")
    run("make", "-s", "-C", str(pyxis_tree), "install", f"DESTDIR={tmp_path}", "prefix=/usr/local",
        f"libdir={libdir}")  # fmt: skip
    installed = {
        "/" + str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777)[2:].zfill(4)
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    wanted = {path.format(**variables): mode for path, mode in PYXIS["install"].items()}
    # The first install, with make's defaults: libdir $(prefix)/lib.
    wanted["/usr/local/lib/slurm/spank_pyxis.so"] = PYXIS["install"][
        "{libdir}/slurm/spank_pyxis.so"
    ]
    assert installed == wanted
    conf = tmp_path / "usr/local/share/pyxis/pyxis.conf"
    assert conf.read_text() == PYXIS["pyxis_conf"].format(**variables)
    assert f"{libdir}/slurm/spank_pyxis.so" == kiln_pyxis.plugin_path(PYXIS["version"], "24.11.5")


# The little of Slurm's SPANK interface the stand-in uses, to build it here and call it
# as slurmd would: its start (slurm_spank_init) with plugstack.conf arguments.
SPANK_H = """
typedef struct spank_handle *spank_t;
typedef int (*spank_opt_cb_f)(int val, const char *optarg, int remote);
struct spank_option { char *name; char *arginfo; char *usage; int has_arg; int val;
    spank_opt_cb_f cb; };
#define SPANK_OPTIONS_TABLE_END { 0, 0, 0, 0, 0, 0 }
#define SPANK_PLUGIN(name, version) const char plugin_name[] = #name; \\
    const char plugin_type[] = "spank"; const unsigned int plugin_version = 0;
typedef enum { ESPANK_SUCCESS = 0 } spank_err_t;
spank_err_t spank_setenv(spank_t spank, const char *var, const char *val, int overwrite);
void slurm_error(const char *format, ...);
"""
ERRORS_C = """
#include <stdarg.h>
#include <stdio.h>
char last_error[256];
void slurm_error(const char *format, ...)
{ va_list ap; va_start(ap, format); vsnprintf(last_error, sizeof(last_error), format, ap);
  va_end(ap); }
int spank_setenv(void *sp, const char *var, const char *val, int overwrite) { return 0; }
"""


@pytest.fixture(scope="module")
def pyxis_plugin(pyxis_tree, tmp_path_factory) -> ctypes.CDLL:
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in plugin with")
    where = tmp_path_factory.mktemp("spank")
    (where / "slurm").mkdir()
    (where / "slurm" / "spank.h").write_text(SPANK_H)
    (where / "errors.c").write_text(ERRORS_C)
    plugin = where / "spank_pyxis.so"
    run(compiler, "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Werror", f"-I{where}",
        "-o", str(plugin), str(pyxis_tree / "standin.c"), str(where / "errors.c"))  # fmt: skip
    return ctypes.CDLL(str(plugin), mode=os.RTLD_NOW)


def start(plugin: ctypes.CDLL, *arguments: str) -> tuple[int, str]:
    argv = (ctypes.c_char_p * max(len(arguments), 1))(*[a.encode() for a in arguments])
    error = ctypes.c_char.in_dll(plugin, "last_error")
    ctypes.memset(ctypes.addressof(error), 0, 256)
    code = plugin.slurm_spank_init(None, len(arguments), argv)
    return code, ctypes.string_at(ctypes.addressof(error)).decode()


def test_the_pyxis_stand_in_takes_the_real_ones_arguments(pyxis_plugin):
    every = [
        f"{name}={'job' if name == 'container_scope' else (default or '/x')}"
        for name, default in PYXIS["options"].items()
    ]
    assert start(pyxis_plugin, *every) == (0, "")
    for boolean in PYXIS["booleans"]:
        assert start(pyxis_plugin, f"sbatch_support={boolean}") == (0, "")
    for scope in PYXIS["container_scopes"]:
        assert start(pyxis_plugin, f"container_scope={scope}") == (0, "")
    # What Kiln's pyxis.conf gives it.
    settings = {"version": PYXIS["version"], "runtime_path": "/run/pyxis"}
    settings |= {"execute_entrypoint": False, "container_scope": "global", "sbatch_support": True}
    line = kiln_pyxis.config(settings, "24.11.5").splitlines()[1]
    assert start(pyxis_plugin, *line.split()[2:]) == (0, "")


@pytest.mark.parametrize(
    ("argument", "error"),
    [
        ("remap_root=1", "pyxis: unknown configuration option: remap_root=1"),
        ("runtime_path", "pyxis: unknown configuration option: runtime_path"),
        ("sbatch_support=maybe", "pyxis: sbatch_support: invalid value: maybe"),
        ("container_scope=node", "pyxis: container_scope: invalid value: node"),
    ],
)
def test_the_pyxis_stand_in_refuses_what_the_real_one_refuses(pyxis_plugin, argument, error):
    assert start(pyxis_plugin, argument) == (-1, error)


class SpankOption(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("arginfo", ctypes.c_char_p),
        ("usage", ctypes.c_char_p),
        ("has_arg", ctypes.c_int),
        ("val", ctypes.c_int),
        ("cb", ctypes.c_void_p),
    ]


def test_the_pyxis_stand_in_offers_the_real_ones_srun_options_and_runs_no_container(
    pyxis_plugin,
):
    rows = len(PYXIS["srun_options"]) + 2  # --kiln-test, and the table's end
    table = (SpankOption * rows).in_dll(pyxis_plugin, "spank_options")
    options = {row.name.decode(): row for row in table[:-1]}
    assert table[-1].name is None
    offered = {name: row.arginfo and row.arginfo.decode() for name, row in options.items()}
    assert offered == {"kiln-test": "VALUE", **PYXIS["srun_options"]}
    assert [row.has_arg for row in options.values()] == [int(bool(a)) for a in offered.values()]
    # A step given two of them, as srun passes them to slurmstepd: refused, naming both.
    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
    for name, value in (("container-image", b"/shared/x.sqsh"), ("container-writable", None)):
        row = options[name]
        assert callback(row.cb)(row.val, value, 1) == 0
    error = ctypes.c_char.in_dll(pyxis_plugin, "last_error")
    ctypes.memset(ctypes.addressof(error), 0, 256)
    code = pyxis_plugin.slurm_spank_user_init(None, 0, (ctypes.c_char_p * 1)())
    assert (code, ctypes.string_at(ctypes.addressof(error)).decode()) == (
        -1,
        f"pyxis: {standins.LABEL}: it runs no container:"
        " --container-image=/shared/x.sqsh --container-writable",
    )


def test_the_hpcx_stand_in_has_hpcxs_top_level(tmp_path):
    version, flavour = "2.22.1", "gcc-inbox-ubuntu24.04-cuda12-x86_64"
    script = standins.REPO / "molecule" / "hpcx" / "files" / "build-standin-hpcx.sh"
    run(str(script), str(tmp_path), version, flavour)
    flavour_of_node = kiln_hpcx.Flavour(
        distro="ubuntu24.04", ofed="inbox", cuda="12", arch="x86_64"
    )
    url = kiln_hpcx.default_url(tmp_path.as_uri(), version, flavour_of_node)
    tarball = Path(url.removeprefix("file://"))
    top = HPCX["top"].format(version=version, flavour=flavour)
    assert tarball.name == f"{top}.tbz"
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
    entries = sorted(
        name.removeprefix(f"{top}/") + ("/" if member.isdir() else "")
        for name, member in members.items()
        if name.count("/") == 1
    )
    assert entries == sorted(HPCX["entries"])
    links = {
        name.removeprefix(f"{top}/"): member.linkname
        for name, member in members.items()
        if member.issym() and name.removeprefix(f"{top}/") in HPCX["links"]
    }
    assert links == HPCX["links"]


def test_the_lab_settings_pin_what_was_built_where_the_roles_fetch_it(tmp_path, monkeypatch):
    monkeypatch.delenv(standins.RELEASES, raising=False)
    settings = tmp_path / "group_vars" / "all" / "standins.yml"
    values = standins.lab_settings(tmp_path / "built", settings)
    assert yaml.safe_load(settings.read_text()) == values
    assert settings.read_text().startswith("# Written by tests/standins.py (`make lab`)")
    chosen = kiln_enroot.packages(
        values["enroot_version"],
        values["enroot_sha256"],
        True,
        values["enroot_caps_sha256"],
        ARCH,
        values["enroot_base_url"],
    )
    for package in chosen:
        path = Path(package["url"].removeprefix("file://").replace("%2B", "+"))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == package["sha256"]
    source = kiln_pyxis.source(values["pyxis_version"], "", values["pyxis_base_url"])
    tarball = Path(source["url"].removeprefix("file://"))
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == values["pyxis_sha256"]
    assert (values["enroot_version"], values["pyxis_version"]) == ("4.1.2", PYXIS["version"])
    assert (values["enroot_fetch"], values["pyxis_fetch"]) == ("control", "control")
    # What kiln inventory check asks of a pinned release.
    assert (
        kiln_enroot.settings_problems({k[7:]: v for k, v in values.items() if k[:7] == "enroot_"})
        == []
    )
    pyxis_settings = {k[6:]: v for k, v in values.items() if k.startswith("pyxis_")}
    assert kiln_pyxis.settings_problems(pyxis_settings) == []


def test_the_lab_pins_nvidias_releases_from_the_directory_named(tmp_path, monkeypatch):
    """KILN_LAB_RELEASES names a directory in GitHub's release layout: the lab pins the
    files there, by the sha256 read from them, and builds no stand-in."""
    releases = tmp_path / "releases"
    # Stand-ins play the downloaded files here; the lab's hand check used NVIDIA's.
    for version in ("4.1.1", "4.1.2"):
        standins.enroot(releases / "enroot", version)
    pyxis_digest = standins.pyxis(releases / "pyxis", PYXIS["version"])
    monkeypatch.setenv(standins.RELEASES, str(releases))
    settings = tmp_path / "standins.yml"
    values = standins.lab_settings(tmp_path / "built", settings)
    assert values == {
        "enroot_version": "4.1.2",
        "enroot_sha256": hashlib.sha256(
            (releases / f"enroot/v4.1.2/enroot_4.1.2-1_{ARCH}.deb").read_bytes()
        ).hexdigest(),
        "enroot_caps_sha256": hashlib.sha256(
            (releases / f"enroot/v4.1.2/enroot+caps_4.1.2-1_{ARCH}.deb").read_bytes()
        ).hexdigest(),
        "enroot_base_url": (releases / "enroot").as_uri(),
        "enroot_fetch": "control",
        "pyxis_version": PYXIS["version"],
        "pyxis_sha256": pyxis_digest,
        "pyxis_base_url": (releases / "pyxis").as_uri(),
        "pyxis_fetch": "control",
    }
    assert yaml.safe_load(settings.read_text()) == values
    assert settings.read_text().splitlines()[:3] == [
        "# Written by tests/standins.py (`make lab`).",
        f"# NVIDIA's releases, from {releases} (KILN_LAB_RELEASES).",
        "# Not committed.",
    ]
    assert not (tmp_path / "built").exists()
    (releases / "pyxis" / f"v{PYXIS['version']}.tar.gz").unlink()
    with pytest.raises(SystemExit) as refused:
        standins.lab_settings(tmp_path / "built", settings)
    assert str(refused.value) == (
        f"KILN_LAB_RELEASES: no {releases}/pyxis/v{PYXIS['version']}.tar.gz"
        " (GitHub's release layout is expected)"
    )


@pytest.fixture(scope="module")
def nccl_tests_tree(tmp_path_factory) -> Path:
    """The stand-in nccl-tests source, where the role's URL points, unpacked as the role
    does: GitHub's tag archive layout, the same bytes every time."""
    out = tmp_path_factory.mktemp("nccl-tests")
    version = NCCL_TESTS["version"]
    digest = standins.nccl_tests(out, version)
    assert standins.nccl_tests(out / "again", version) == digest
    source = kiln_nccl_tests.source(version, digest, out.as_uri())
    tarball = Path(source["url"].removeprefix("file://"))
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == digest
    top = NCCL_TESTS["top"].format(version=version)
    assert source["top"] == top
    with tarfile.open(fileobj=io.BytesIO(tarball.read_bytes())) as tar:
        assert tar.getnames() == [
            f"{top}/{name}"
            for name in ["Makefile", "README", "src/Makefile", "src/standin.h"]
            + [f"src/{program}.cu" for program in NCCL_TESTS["programs"]]
        ]
        tar.extractall(out, filter="data")
    return out / top


def test_nccl_tests_programs_are_the_ones_kiln_expects():
    assert tuple(NCCL_TESTS["programs"]) == kiln_nccl_tests.PROGRAMS


def dry_make(*argv: str) -> list[str]:
    """The commands make would run (no nvcc here: its release reads as none)."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *argv], capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_nccl_tests_builds_as_the_role_runs_it(nccl_tests_tree, tmp_path):
    bin_dir = f"{tmp_path}/build/bin"
    toolchain = {
        "cuda": {"home": "/cuda", "version": "13.0.88", "lib": "/cuda/lib64"},
        "nccl": {"home": "/nccl", "version": "2.27.7", "lib": "/nccl/lib", "library": "libnccl.so"},
        "mpi": {"home": "/ompi", "version": "5.0.7", "lib": "/ompi/lib"},
    }
    make = kiln_nccl_tests.make_command(
        str(nccl_tests_tree), f"{tmp_path}/build", toolchain, ["90"], 2
    )
    flags = (
        "-ccbin g++ -gencode=arch=compute_90,code=sm_90 -std=c++14 "
        "-DSTANDIN_VERSION='\"2.19.6\"' -I/nccl/include -DMPI_SUPPORT -I/ompi/include"
    )
    link = "-L/cuda/lib64 -lcudart -lrt -L/nccl/lib -L/ompi/lib -L/ompi/lib64 -lmpi -lnccl"
    lines = dry_make(*make["argv"][1:])
    programs = NCCL_TESTS["programs"]
    assert lines[:-1] == [f"make -C src build BUILDDIR={bin_dir}"] + [
        line
        for name in programs
        for line in (
            f"mkdir -p {bin_dir}",
            f"/cuda/bin/nvcc -o {bin_dir}/{name}.o {flags} -c {name}.cu",
            f"/cuda/bin/nvcc -o {bin_dir}/{name}_perf {flags} {bin_dir}/{name}.o {link}",
        )
    ]
    # The objects are intermediates: removed, so bin/ holds the programs only.
    assert sorted(lines[-1].split()) == sorted(["rm", *(f"{bin_dir}/{n}.o" for n in programs)])


@pytest.mark.parametrize("release, std", [("12.4", "c++14"), ("13.0", "c++17")])
def test_nccl_tests_defaults_are_the_real_ones(nccl_tests_tree, tmp_path, release, std):
    # No MPI or NVCC_GENCODE: no MPI, and the default list of nvcc's major release.
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    lines = dry_make(
        "-C", str(nccl_tests_tree / "src"), "build", "BUILDDIR=/b", f"CUDA_HOME={tmp_path}/cuda"
    )
    archs = NCCL_TESTS["default_archs"][int(release.split(".")[0])]
    gencode = " ".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs)
    flags = f"-ccbin g++ {gencode} -std={std} -DSTANDIN_VERSION='\"2.19.6\"'"
    assert lines[:3] == [
        "mkdir -p /b",
        f"{nvcc} -o /b/all_reduce.o {flags} -c all_reduce.cu",
        f"{nvcc} -o /b/all_reduce_perf {flags} /b/all_reduce.o "
        f"-L{tmp_path}/cuda/lib64 -lcudart -lrt -lnccl",
    ]
    database = run("make", "-p", "-n", "-C", str(nccl_tests_tree / "src"), "clean").splitlines()
    for name, value in NCCL_TESTS["variables"].items():
        assert f"{name} = {value}" in database, name


@pytest.fixture(scope="module")
def grafana_repository(tmp_path_factory) -> Path:
    """The stand-in Grafana repository, as the Molecule scenario `monitoring` builds it."""
    out = tmp_path_factory.mktemp("grafana")
    assert standins.main(["grafana-repo", str(out)]) == 0
    return out


def grafana_deb(repository: Path) -> Path:
    return repository / f"pool/main/g/grafana/grafana_{GRAFANA['version']}_{ARCH}.deb"


def test_the_grafana_stand_in_has_the_real_ones_control_fields(grafana_repository):
    real = {k: v for k, v in GRAFANA["fields"].items() if k not in standins.OWN_FIELDS}
    assert fields(grafana_deb(grafana_repository)) == {
        "Package": "grafana",
        "Version": GRAFANA["version"],  # Grafana's own: no Debian revision
        "Architecture": ARCH,
        "Maintainer": standins.MAINTAINER,
        **real,
        "Description": standins.GRAFANA_LABEL,
    }


def test_the_grafana_stand_in_has_the_real_ones_files_conffiles_and_scripts(
    grafana_repository, tmp_path
):
    package = grafana_deb(grafana_repository)
    files, directories = listing(package)
    assert files == {path: _mode_string(mode) for path, mode in GRAFANA["files"].items()}
    parents = {str(p) for path in GRAFANA["files"] for p in Path(path).parents}
    assert directories == {
        **{path: "drwxr-xr-x" for path in parents},
        **{path: "d" + _mode_string(mode)[1:] for path, mode in GRAFANA["directories"].items()},
    }
    conffiles = control_member(package, "conffiles", tmp_path)
    assert conffiles.read_text().splitlines() == GRAFANA["conffiles"]
    scripts = {p.name for p in conffiles.parent.iterdir()} - {"control", "conffiles", "md5sums"}
    assert scripts == set(GRAFANA["scripts"])


def test_the_grafana_stand_ins_unit_defaults_and_settings_are_the_real_ones(
    grafana_repository, tmp_path
):
    run("dpkg-deb", "--extract", str(grafana_deb(grafana_repository)), str(tmp_path))
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # systemd's keys are CamelCase
    unit.read(tmp_path / "usr/lib/systemd/system/grafana-server.service")
    service = {k: v for k, v in unit["Service"].items() if k in GRAFANA["unit"]}
    assert service | {"WantedBy": unit["Install"]["WantedBy"]} == GRAFANA["unit"]
    default = (tmp_path / "etc/default/grafana-server").read_text().splitlines()
    assert dict(line.split("=", 1) for line in default[1:]) == GRAFANA["default"]
    assert default[0].startswith(f"# {standins.GRAFANA_LABEL}")
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string("[_top]\n" + (tmp_path / "usr/share/grafana/conf/defaults.ini").read_text())
    assert {k: ini["server"][k] for k in GRAFANA["server"]} == {
        k: str(v) for k, v in GRAFANA["server"].items()
    }
    # sample.ini, which the postinst copies to grafana.ini, sets nothing.
    sample = (tmp_path / "usr/share/grafana/conf/sample.ini").read_text().splitlines()
    assert [line for line in sample if "=" in line and not line.startswith(";")] == []


def test_the_grafana_stand_in_answers_health_where_grafana_ini_says(grafana_repository, tmp_path):
    run("dpkg-deb", "--extract", str(grafana_deb(grafana_repository)), str(tmp_path))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "grafana.ini"
    config.write_text(f"[server]\nhttp_addr = 127.0.0.1\nhttp_port = {port}\n")
    home = tmp_path / "usr/share/grafana"
    server = subprocess.Popen(
        [str(tmp_path / "usr/sbin/grafana-server"), f"--config={config}", "--pidfile="],
        cwd=home,
        env={**os.environ, "GRAFANA_HOME": str(home)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        said = server.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as answer:
            health = json.loads(answer.read())
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/dashboards", timeout=5)
    finally:
        server.terminate()
        server.wait(5)
    assert said == (
        f"grafana {GRAFANA['version']}: {standins.GRAFANA_LABEL}: listening on"
        f" 127.0.0.1:{port}, answering /api/health only\n"
    )
    assert list(health) == GRAFANA["health"]
    assert health == {"database": "ok", "version": GRAFANA["version"], "commit": "STAND-IN"}
    assert other.value.code == 404
    refused = subprocess.run(
        [str(home / "bin/grafana"), "cli", "plugins", "ls"], capture_output=True, text=True
    )
    assert (refused.returncode, refused.stderr) == (
        1,
        f"grafana cli plugins ls: {standins.GRAFANA_LABEL}: it serves /api/health only\n",
    )


def test_the_grafana_stand_in_is_the_same_bytes_every_time(grafana_repository, tmp_path):
    built = standins.grafana(tmp_path, GRAFANA["version"])
    assert built.read_bytes() == grafana_deb(grafana_repository).read_bytes()


def test_the_stand_in_grafana_repository_is_laid_out_and_signed_as_grafanas(
    grafana_repository, tmp_path
):
    suite = grafana_repository / "dists" / standins.GRAFANA_SUITE
    lists = suite / "main" / f"binary-{ARCH}"
    assert sorted(
        str(p.relative_to(grafana_repository)) for p in grafana_repository.rglob("*") if p.is_file()
    ) == sorted(
        [
            "gpg.key",
            "dists/stable/InRelease",
            "dists/stable/Release",
            "dists/stable/Release.gpg",
            f"dists/stable/main/binary-{ARCH}/Packages",
            f"dists/stable/main/binary-{ARCH}/Packages.gz",
            f"pool/main/g/grafana/grafana_{GRAFANA['version']}_{ARCH}.deb",
        ]
    )
    package = grafana_deb(grafana_repository)
    [stanza] = (lists / "Packages").read_text().strip().split("\n\n")
    entry = dict(line.split(": ", 1) for line in stanza.splitlines())
    assert (entry["Package"], entry["Version"], entry["Filename"], entry["SHA256"]) == (
        "grafana",
        GRAFANA["version"],
        str(package.relative_to(grafana_repository)),
        hashlib.sha256(package.read_bytes()).hexdigest(),
    )
    assert (
        gzip.decompress((lists / "Packages.gz").read_bytes()) == (lists / "Packages").read_bytes()
    )
    release = release_fields(suite / "Release")
    assert {k: release[k] for k in ("Suite", "Codename", "Components", "Architectures")} == {
        "Suite": "stable",
        "Codename": "stable",
        "Components": "main",
        "Architectures": ARCH,
    }
    # apt's check: InRelease and Release.gpg verify with the key at URL/gpg.key.
    keyring = dearmored(grafana_repository / "gpg.key", tmp_path / "grafana.gpg")
    run("gpgv", "--keyring", str(keyring), str(suite / "InRelease"))
    run("gpgv", "--keyring", str(keyring), str(suite / "Release.gpg"), str(suite / "Release"))


CUDA_REPO = standins.facts("cuda_repo_toolkit", standins.NCCL_FACTS_DOC)


@pytest.fixture(scope="module")
def cuda_repo_debs(tmp_path_factory) -> dict[tuple[str, str], Path]:
    out = tmp_path_factory.mktemp("cuda-repo")
    assert standins.main(["cuda-toolkit", str(out)]) == 0
    return {(fields(p)["Package"], fields(p)["Version"]): p for p in out.glob("*.deb")}


def test_the_cuda_repository_stand_ins_have_the_real_ones_names_and_relations(cuda_repo_debs):
    """Every package apt installs with the nccl_tests role's, and NCCL at each build:
    the real ones' names, versions, architectures, Depends and Provides, and no other
    relation."""
    wanted = {
        (name, package["version"]): (
            package.get("architecture", ARCH),
            package.get("fields") or {},
        )
        for name, package in CUDA_REPO["packages"].items()
    }
    for version in CUDA_REPO["nccl"]["versions"]:
        wanted[("libnccl2", version)] = (ARCH, {})
        wanted[("libnccl-dev", version)] = (ARCH, {"Depends": f"libnccl2 (= {version})"})
    assert set(cuda_repo_debs) == set(wanted)
    for key, package in cuda_repo_debs.items():
        found = fields(package)
        relations = {k: v for k, v in found.items() if k in standins.RELATIONS}
        assert (found["Architecture"], relations) == wanted[key], key
        assert "STAND-IN" in found["Description"]
    # What the role installs for driver 580 is among them, as kiln.cuda_toolkit names it.
    release = kiln_cuda_toolkit.for_driver(str(CUDA_REPO["driver"]))
    assert release is not None and release.cuda == CUDA_REPO["cuda"]
    for entry in kiln_cuda_toolkit.packages(release.cuda, release.nccl):
        name, _, version = entry.partition("=")
        assert any(n == name and version in ("", v) for n, v in cuda_repo_debs), entry


def test_the_stand_in_toolkit_is_where_kiln_looks_and_names_its_releases(cuda_repo_debs, tmp_path):
    """Unpacked as dpkg would: kiln_node.cuda_toolchain finds the compiler in
    /usr/local/cuda-13.0 and NCCL in /usr with their releases; nvcc compiles nothing."""
    nccl = CUDA_REPO["nccl"]["versions"][0]
    for (name, version), package in cuda_repo_debs.items():
        if not name.startswith("libnccl") or version == nccl:
            run("dpkg-deb", "--extract", str(package), str(tmp_path))
    home = tmp_path / "usr/local/cuda-13.0"
    triplet = standins.CUDA_TRIPLETS[ARCH]
    found = cuda_toolchain.find(str(home), str(tmp_path / "usr"), str(tmp_path))
    assert found == {
        "cuda": {"home": str(home), "version": "13.0.88", "lib": ""},
        "nccl": {
            "home": str(tmp_path / "usr"),
            "version": "2.28.9",
            "lib": str(tmp_path / "usr/lib" / triplet),
            "library": "libnccl.so",
        },
        "mpi": None,
    }
    assert os.readlink(tmp_path / f"usr/lib/{triplet}/libnccl.so.2") == "libnccl.so.2.28.9"
    compiled = subprocess.run([str(home / "bin/nvcc"), "-c", "x.cu"], capture_output=True)
    assert compiled.returncode == 1 and b"STAND-IN" in compiled.stderr


def test_the_cuda_repository_stand_ins_are_the_same_bytes_every_time(cuda_repo_debs, tmp_path):
    again = {p.name: p.read_bytes() for p in standins.cuda_toolkit(tmp_path)}
    assert again == {p.name: p.read_bytes() for p in cuda_repo_debs.values()}


@pytest.mark.parametrize(
    ("distro", "driver"),
    [
        (
            "debian",
            {
                "nvidia-kernel-open-dkms": "",
                "nvidia-kernel-dkms": "",
                "libcuda1": "",
                "libnvidia-ml1": "",
                "nvidia-smi": "",
                "nvidia-driver-cuda": "nvidia-smi (= {v}), libcuda1 (= {v}), libnvidia-ml1 (= {v})",
                "nvidia-persistenced": "",
            },
        ),
        (
            "ubuntu",
            {
                "libnvidia-compute-580": "",
                "nvidia-dkms-580": "",
                "nvidia-dkms-580-open": "",
                "nvidia-utils-580": "libnvidia-compute-580 (= {v})",
                "nvidia-compute-utils-580": "",
                "nvidia-headless-580": "nvidia-dkms-580 (= {v}), nvidia-compute-utils-580 (= {v}),"
                " libnvidia-compute-580 (= {v})",
                "nvidia-headless-580-open": "nvidia-dkms-580-open (= {v}), nvidia-compute-utils-580"
                " (= {v}), libnvidia-compute-580 (= {v})",
            },
        ),
    ],
)
def test_the_stand_in_cuda_repository_holds_nvidias_names_and_is_signed_as_nvidias(
    tmp_path, distro, driver
):
    """The nvidia_driver scenario's repository (drv-cuda): the driver's packages of
    NVIDIA's tree for the distribution at both versions, IMEX's at the driver's, the
    fabric manager one patch behind the newest driver, the toolkit's; each Packages entry
    is its file; Release says Origin NVIDIA, and InRelease verifies with standin.pub."""
    out = tmp_path / "repo"
    assert standins.main(["cuda-repo", str(out), distro]) == 0
    suffix = "-0ubuntu1" if distro == "ubuntu" else "-1"
    wanted = {
        (name, f"{version}{suffix}"): depends.format(v=f"{version}{suffix}")
        for version in standins.DRIVER_VERSIONS
        for name, depends in driver.items()
    }
    wanted |= {("nvidia-imex", f"{version}-1"): "" for version in standins.DRIVER_VERSIONS}
    for version in ("580.95.05", "580.105.07"):
        wanted |= {("nvidia-fabricmanager-580", f"{version}-1"): ""}
        wanted |= {("libnvidia-nscq-580", f"{version}-1"): ""}
    toolkit = {
        (fields(p)["Package"], fields(p)["Version"]) for p in standins.cuda_toolkit(tmp_path / "t")
    }
    stanzas = [
        dict(line.split(": ", 1) for line in stanza.splitlines() if not line.startswith(" "))
        for stanza in (out / "Packages").read_text().strip().split("\n\n")
    ]
    listed = {(s["Package"], s["Version"]): s for s in stanzas}
    assert set(listed) == set(wanted) | toolkit
    for key, depends in wanted.items():
        entry = listed[key]
        assert (entry.get("Depends", ""), entry["Architecture"]) == (depends, "all"), key
        assert entry["SHA256"] == hashlib.sha256((out / entry["Filename"]).read_bytes()).hexdigest()
    # What the role and the scenario's tests use of them: nvidia-smi's one query, the
    # units, IMEX's programs and its one conffile, persistenced's user.
    smi = "nvidia-utils-580" if distro == "ubuntu" else "nvidia-smi"
    version = standins.DRIVER_VERSIONS[0] + suffix
    listing = run("dpkg-deb", "-c", str(out / f"{smi}_{version}_all.deb"))
    assert "-rwxr-xr-x root/root" in listing and "./usr/bin/nvidia-smi" in listing
    imex = out / f"nvidia-imex_{standins.DRIVER_VERSIONS[0]}-1_all.deb"
    assert run("dpkg-deb", "-I", str(imex), "conffiles") == "/etc/nvidia-imex/config.cfg\n"
    files = {line.split()[-1] for line in run("dpkg-deb", "-c", str(imex)).splitlines()}
    assert {
        "./usr/bin/nvidia-imex",
        "./usr/bin/nvidia-imex-ctl",
        "./lib/systemd/system/nvidia-imex.service",
        "./etc/nvidia-imex/config.cfg",
    } <= files
    persistenced = "nvidia-compute-utils-580" if distro == "ubuntu" else "nvidia-persistenced"
    postinst = run("dpkg-deb", "-I", str(out / f"{persistenced}_{version}_all.deb"), "postinst")
    assert "useradd --system" in postinst
    release = release_fields(out / "Release")
    assert (release["Origin"], release["Label"]) == ("NVIDIA", "NVIDIA CUDA")
    keyring = dearmored(out / "standin.pub", tmp_path / "standin.gpg")
    run("gpgv", "--keyring", str(keyring), str(out / "InRelease"))


def test_the_mlnx_ofed_stand_in_is_an_empty_package_of_ofeds_name(tmp_path):
    built = standins.mlnx_ofed(tmp_path)
    assert (fields(built)["Package"], fields(built)["Version"]) == (
        "mlnx-ofed-kernel-utils",
        "24.10.OFED.24.10.1.1.4.1-1",
    )
    # Nothing in it but its top directory.
    assert [line.split()[-1] for line in run("dpkg-deb", "-c", str(built)).splitlines()] == ["./"]
