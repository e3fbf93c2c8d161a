"""STAND-INs for the releases the lab and CI cannot download (NVIDIA's enroot packages,
pyxis's and nccl-tests' source, from GitHub; Grafana's package, from its repository):
test aids, not part of Kiln. Each copies its real release in everything Kiln touches,
from the facts written in docs/containers.md, docs/nccl.md and docs/monitoring.md (the
`kiln:release-facts` blocks, which tests/unit/test_standins.py
checks every stand-in against); none of them runs a container or measures anything.

    python tests/standins.py enroot OUT VERSION [DEPENDS]
        OUT/v<VERSION>/enroot{,+caps}_<VERSION>-1_<arch>.deb (GitHub's release layout);
        DEPENDS: one more package enroot depends on (one apt cannot install, in tests)
    python tests/standins.py pyxis OUT VERSION
        OUT/v<VERSION>.tar.gz, unpacking to pyxis-<VERSION>/ (GitHub's tag archives)
    python tests/standins.py nccl-tests OUT VERSION
        OUT/v<VERSION>.tar.gz, unpacking to nccl-tests-<VERSION>/ (GitHub's tag
        archives): nccl-tests' build interface; each *_perf program calls NCCL, the
        CUDA runtime and MPI and says it is a stand-in
    python tests/standins.py grafana OUT VERSION
        OUT/grafana_<VERSION>_<arch>.deb (docs/monitoring.md's facts): its program
        answers /api/health where grafana.ini says, and says it is a stand-in
    python tests/standins.py grafana-repo OUT [VERSION]
        a signed apt repository in Grafana's layout under OUT holding that package
        (VERSION: the facts' own), OUT/gpg.key its key
    python tests/standins.py cuda-toolkit OUT
        OUT/<package>_<version>_<arch>.deb: the CUDA compiler's and NCCL's packages of
        NVIDIA's CUDA repository that the nccl_tests role installs, and what they pull
        in (docs/nccl.md's facts), for a flat repository such as the nvidia_driver
        scenario's; `nvcc` answers --version only, NCCL is its header and names
    python tests/standins.py cuda-repo OUT debian|ubuntu
        a flat repository under OUT signed as NVIDIA's CUDA repository is: the driver's
        packages of NVIDIA's tree for the distribution (empty but for units, IMEX's
        config and small programs in place of nvidia-smi and IMEX's), IMEX's, the fabric
        manager's and cuda-toolkit's; OUT/standin.pub its key
    python tests/standins.py mlnx-ofed OUT
        OUT/mlnx-ofed-kernel-utils_<version>_all.deb: an empty package under MLNX
        OFED's name, so a node's RDMA stack reads as OFED
    python tests/standins.py lab
        the lab's: built into build/standins/, pinned in
        inventories/lab/group_vars/all/standins.yml (git-ignored), which `kiln lab up`
        copies with the rest of the lab's settings (`make lab` runs this first). With
        KILN_LAB_RELEASES=DIR, NVIDIA's real releases in DIR are pinned instead (GitHub's
        layout: DIR/enroot/v<version>/*.deb, DIR/pyxis/v<version>.tar.gz)

Each build gives the same bytes for the same arguments (fixed times and owners), so a
pin written once stays true.
"""

import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
FACTS_DOC = REPO / "docs" / "containers.md"
NCCL_FACTS_DOC = REPO / "docs" / "nccl.md"
LAB_DIR = REPO / "build" / "standins"
LAB_SETTINGS = REPO / "inventories" / "lab" / "group_vars" / "all" / "standins.yml"
LAB_ENROOT = "4.1.2"
LAB_PYXIS = "0.24.0"
LABEL = "STAND-IN built by Kiln's tests, not NVIDIA's"
# Names a directory of NVIDIA's real releases for the lab to install instead.
RELEASES = "KILN_LAB_RELEASES"
_FACTS = re.compile(
    r"<!-- kiln:release-facts (?P<name>[a-z_]+) -->\n```yaml\n(?P<body>.*?)```\n"
    r"<!-- /kiln:release-facts -->",
    re.DOTALL,
)
# The dpkg fields that relate a package to others: what apt resolves.
RELATIONS = ("Pre-Depends", "Depends", "Recommends", "Suggests", "Conflicts", "Breaks")
RELATIONS += ("Replaces", "Provides")
# Set on every build: dpkg-deb and tar clamp their times to it.
EPOCH = 1700000000


def facts(name: str, doc: Path = FACTS_DOC) -> dict:
    """The real release's facts, as the doc's `kiln:release-facts NAME` block holds them."""
    for found in _FACTS.finditer(doc.read_text()):
        if found["name"] == name:
            return yaml.safe_load(found["body"])
    raise LookupError(f"{doc} has no kiln:release-facts block for {name}")


def arch() -> str:
    return subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _write(root: Path, relative: str, data: str | bytes, mode: int) -> None:
    path = root / relative.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)


def _gzip(text: str) -> bytes:
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped:
        zipped.write(text.encode())
    return raw.getvalue()


def _enroot_program(path: str, version: str) -> str:
    """enroot answers `version`, and `list` with no containers (what pyxis's epilog
    asks); anything else, and every helper, says it is a stand-in and fails."""
    head = f"#!/bin/sh\n# {LABEL}: {path} of enroot {version}.\n"
    if path != "/usr/bin/enroot":
        return head + f'echo "{path}: {LABEL}" >&2\nexit 1\n'
    return head + (
        'case "$1" in\n'
        f"  version) echo {version} ;;\n"
        "  list) ;;\n"
        f'  *) echo "enroot $*: {LABEL}: it runs no container" >&2; exit 1 ;;\n'
        "esac\n"
    )


def _enroot_file(path: str, version: str) -> str | bytes:
    if path.startswith("/usr/bin/"):
        return _enroot_program(path, version)
    if path.endswith(".sh"):  # hooks and enroot's shell libraries
        return f"#!/bin/bash\n# {LABEL}: {path} of enroot {version}.\nexit 0\n"
    if path.endswith("changelog.Debian.gz"):
        return _gzip(f"enroot ({version}-1) stable; urgency=medium\n\n  * {LABEL}.\n")
    if path == "/etc/apparmor.d/enroot":
        # As the real one: user namespaces for the helper that creates them.
        return (
            f"# {LABEL} (enroot {version}).\nabi <abi/4.0>,\ninclude <tunables/global>\n\n"
            "profile enroot-nsenter /usr/bin/enroot-nsenter flags=(unconfined) {\n"
            "  userns,\n  include if exists <local/enroot>\n}\n"
        )
    # Conffiles and the rest: text naming the version, so every conffile changes
    # from one release to the next.
    return f"# {LABEL}: {path} of enroot {version}.\n"


# Maintainer scripts doing what the real ones do: enroot's reloads its AppArmor profile
# where AppArmor runs; enroot+caps's give the two helpers their file capabilities.
_ENROOT_SCRIPTS = {
    "postinst": (
        'if [ "$1" = configure ] && aa-enabled --quiet 2>/dev/null; then\n'
        "  apparmor_parser -r -T -W /etc/apparmor.d/enroot || true\nfi\n"
    ),
    "postrm": "",
}
_CAPS = (
    ("/usr/bin/enroot-mksquashovlfs", "cap_sys_admin"),
    ("/usr/bin/enroot-aufs2ovlfs", "cap_sys_admin,cap_mknod"),
)
_CAPS_SCRIPTS = {
    "postinst": 'case "$1" in configure|abort-*)\n'
    + "".join(f"  setcap {caps}+pe {path}\n" for path, caps in _CAPS)
    + "esac\n",
    "prerm": 'case "$1" in remove|upgrade|deconfigure)\n'
    + "".join(f"  setcap {caps}-pe {path}\n" for path, caps in _CAPS)
    + "esac\n",
}


# Fields every stand-in states as its own: who built it, and (Description) its label.
OWN_FIELDS = ("Maintainer", "Description")
MAINTAINER = "Kiln tests <kiln@localhost>"


def _control(
    name: str, version: str, fields: dict[str, str], arch_: str, label: str = LABEL
) -> str:
    """The control file: the real package's fields but OWN_FIELDS (Section and Priority
    from `fields` where they name them)."""
    tail = {"Section": "utils", "Priority": "optional"}
    tail |= {key: fields[key] for key in tail if key in fields}
    rest = {k: v for k, v in fields.items() if k not in tail and k not in OWN_FIELDS}
    lines = [f"Package: {name}", f"Version: {version}", f"Architecture: {arch_}"]
    lines.append(f"Maintainer: {MAINTAINER}")
    lines += [f"{key}: {value}" for key, value in rest.items()]
    lines += [f"{key}: {value}" for key, value in tail.items()]
    lines.append(f"Description: {label}")
    return "\n".join(lines) + "\n"


def _replace(path: Path, data: bytes) -> None:
    """The file holds `data`, never anything in between: another test run may be reading
    it (`make test` runs the new user's lab beside the e2e lab, both from these files).
    The same bytes are left as they are."""
    if path.exists() and path.read_bytes() == data:
        return
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.write_bytes(data)
    os.replace(part, path)


def _build(root: Path, out: Path) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)}
    part = out.with_name(f".{out.name}.{os.getpid()}")
    argv = ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(part)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"dpkg-deb could not build {out.name}: {done.stderr.strip()}")
    data = part.read_bytes()
    part.unlink()
    _replace(out, data)


def enroot(out: Path, version: str, depends: str = "") -> dict[str, str]:
    """enroot and enroot+caps of `version` under out/v<version>/, with the real
    packages' fields, conffiles, files and modes; `depends` adds one more package to
    enroot's Depends. Returns {package: sha256}."""
    known = facts("enroot")
    full = f"{version}-{known['revision']}"
    machine = arch()
    release = out / f"v{version}"
    release.mkdir(parents=True, exist_ok=True)
    scripts = {"enroot": _ENROOT_SCRIPTS, "enroot+caps": _CAPS_SCRIPTS}
    digests = {}
    with tempfile.TemporaryDirectory() as work:
        for name, package in known["packages"].items():
            root = Path(work) / name
            fields = {k: v.format(version=version) for k, v in package["fields"].items()}
            if depends and name == "enroot":
                fields["Depends"] += f", {depends}"
            _write(root, "DEBIAN/control", _control(name, full, fields, machine), 0o644)
            if package["conffiles"]:
                _write(root, "DEBIAN/conffiles", "\n".join(package["conffiles"]) + "\n", 0o644)
            for script in package["scripts"]:
                body = f"#!/bin/sh\n# {LABEL}\nset -e\n{scripts[name][script]}exit 0\n"
                _write(root, f"DEBIAN/{script}", body, 0o755)
            for path, mode in package["files"].items():
                _write(root, path, _enroot_file(path, version), int(mode, 8))
            package_file = release / f"{name}_{full}_{machine}.deb"
            _build(root, package_file)
            digests[name] = hashlib.sha256(package_file.read_bytes()).hexdigest()
    return digests


# Grafana (docs/monitoring.md's facts): what its deb holds and does, in Kiln's words.
GRAFANA_FACTS_DOC = REPO / "docs" / "monitoring.md"
# The suite and component of Grafana's repository (`deb URL stable main`).
GRAFANA_SUITE = "stable"
GRAFANA_LABEL = "STAND-IN built by Kiln's tests, not Grafana Labs'"

# The "grafana" program: `grafana server` reads defaults.ini under its home, then the
# --config file over it, as Grafana does, listens on [server] http_addr:http_port
# (empty address: every one) and answers GET /api/health with Grafana's keys. It serves
# nothing else and says it is a stand-in; `grafana cli` refuses.
_GRAFANA_PROGRAM = """#!/usr/bin/python3
# {label}: /usr/share/grafana/bin/grafana of Grafana {version}.
import configparser
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "{version}"
LABEL = "{label}"


def settings(home, config):
    ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";", "#"))
    for path in (os.path.join(home, "conf", "defaults.ini"), config):
        if path and os.path.exists(path):
            with open(path) as text:  # keys before any section are Grafana's top level
                ini.read_string("[_top]\\n" + text.read(), source=path)
    server = ini["server"] if ini.has_section("server") else {{}}
    return server.get("http_addr", ""), int(server.get("http_port", "{port}"))


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("?")[0] != "/api/health":
            self.send_error(404, LABEL + ": only /api/health")
            return
        body = json.dumps({health}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def server(argv):
    home, config, pidfile = os.getcwd(), "", ""
    for arg in argv:
        name, _, value = arg.partition("=")
        if name == "--homepath":
            home = value
        elif name == "--config":
            config = value
        elif name == "--pidfile":
            pidfile = value
    address, port = settings(home, config)
    httpd = ThreadingHTTPServer((address, port), Health)
    if pidfile:
        with open(pidfile, "w") as pid:
            pid.write(str(os.getpid()))
    print(f"grafana {{VERSION}}: {{LABEL}}: listening on {{address or '*'}}:{{port}},"
          " answering /api/health only", flush=True)
    httpd.serve_forever()


def main(argv):
    if argv[:1] in (["-v"], ["--version"]):
        print(f"grafana version {{VERSION}} ({{LABEL}})")
        return 0
    if argv[:1] == ["server"]:
        server(argv[1:])
        return 0
    print(f"grafana {{' '.join(argv)}}: {{LABEL}}: it serves /api/health only", file=sys.stderr)
    return 1


sys.exit(main(sys.argv[1:]))
"""

# The init script: an LSB header (update-rc.d reads it when systemctl enables the
# service); it leaves running Grafana to systemd.
_GRAFANA_INIT = """#!/bin/sh
### BEGIN INIT INFO
# Provides:          grafana-server
# Required-Start:    $all
# Required-Stop:     $remote_fs $syslog
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: Grafana ({label})
### END INIT INFO
# {label}: /etc/init.d/grafana-server of Grafana {version}.
echo "grafana-server: {label}: run it with systemd (grafana-server.service)" >&2
exit 1
"""

# What Grafana's postinst does (docs/monitoring.md), written here.
_GRAFANA_POSTINST = """[ -r /etc/default/grafana-server ] && . /etc/default/grafana-server
if [ "$1" = configure ]; then
  user="${GRAFANA_USER:-grafana}" group="${GRAFANA_GROUP:-grafana}"
  home="${GRAFANA_HOME:-/usr/share/grafana}" data="${DATA_DIR:-/var/lib/grafana}"
  conf="${CONF_FILE:-/etc/grafana/grafana.ini}"
  provisioning="${PROVISIONING_CFG_DIR:-/etc/grafana/provisioning}"
  getent group "$group" >/dev/null || addgroup --quiet --system "$group"
  id "$user" >/dev/null 2>&1 || adduser --quiet --system --home "$home" --no-create-home \\
    --ingroup "$group" --disabled-password --shell /bin/false "$user"
  mkdir -p /var/log/grafana "$data"
  chown -R "$user:$group" /var/log/grafana "$data"
  chmod 755 /var/log/grafana "$data"
  if [ ! -f "$conf" ]; then
    cp "$home/conf/sample.ini" "$conf"
    cp "$home/conf/ldap.toml" /etc/grafana/ldap.toml
  fi
  if [ ! -d "$provisioning" ]; then
    for kind in dashboards datasources; do
      mkdir -p "$provisioning/$kind"
      cp "$home/conf/provisioning/$kind/sample.yaml" "$provisioning/$kind/"
    done
  fi
  for kind in plugins access-control alerting; do
    if [ ! -d "$provisioning/$kind" ]; then
      mkdir -p "$provisioning/$kind"
      cp "$home/conf/provisioning/$kind/sample.yaml" "$provisioning/$kind/"
    fi
  done
  chown -Rh "root:$group" /etc/grafana/*
  chmod 755 /etc/grafana
  find /etc/grafana -type f -exec chmod 640 {} +
  find /etc/grafana -type d -exec chmod 755 {} +
  if [ -z "$2" ]; then
    echo "grafana-server is not started on installation: systemctl enable --now grafana-server"
  elif [ "$RESTART_ON_UPGRADE" = true ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload
    systemctl restart grafana-server || true
  fi
fi
"""
_GRAFANA_PRERM = """if [ "$1" = remove ] && command -v systemctl >/dev/null; then
  systemctl stop grafana-server || true
  systemctl disable grafana-server || true
fi
"""


def _grafana_unit(known: dict) -> str:
    unit = known["unit"]
    service = "".join(f"{k}={v}\n" for k, v in unit.items() if k != "WantedBy")
    return (
        f"# {GRAFANA_LABEL}: grafana-server.service of Grafana {known['version']}.\n"
        f"[Unit]\nDescription=Grafana instance ({GRAFANA_LABEL})\n"
        "Wants=network-online.target\nAfter=network-online.target\n\n"
        f"[Service]\n{service}Restart=on-failure\nTimeoutStopSec=20\n\n"
        f"[Install]\nWantedBy={unit['WantedBy']}\n"
    )


def _grafana_ini(defaults: bool, server: dict) -> str:
    """defaults.ini sets every key; sample.ini, the copy an operator edits, comments
    them out (`;key = value`), as Grafana's do."""
    mark = "" if defaults else ";"
    return (
        f"# {GRAFANA_LABEL}: Grafana's {'defaults' if defaults else 'sample'}.ini, [server] only.\n"
        f"{mark}app_mode = production\n\n[paths]\n{mark}data = data\n{mark}logs = data/log\n\n"
        f"[server]\n{mark}protocol = http\n"
        + f"{mark}http_addr = {server['http_addr']}".rstrip()
        + f"\n{mark}http_port = {server['http_port']}\n"
    )


def _grafana_file(path: str, known: dict) -> str:
    version = known["version"]
    head = f"# {GRAFANA_LABEL}: {path} of Grafana {version}.\n"
    sbin = {"grafana-server": "server", "grafana-cli": "cli"}
    name = path.rsplit("/", 1)[-1]
    health = {"database": "ok", "version": version, "commit": "STAND-IN"}
    texts = {
        "/etc/default/grafana-server": head
        + "".join(f"{k}={v}\n" for k, v in known["default"].items()),
        "/etc/init.d/grafana-server": _GRAFANA_INIT.format(label=GRAFANA_LABEL, version=version),
        "/usr/lib/systemd/system/grafana-server.service": _grafana_unit(known),
        "/usr/share/grafana/bin/grafana": _GRAFANA_PROGRAM.format(
            label=GRAFANA_LABEL,
            version=version,
            port=known["server"]["http_port"],
            health={key: health[key] for key in known["health"]},
        ),
        "/usr/share/grafana/conf/defaults.ini": _grafana_ini(True, known["server"]),
        "/usr/share/grafana/conf/sample.ini": _grafana_ini(False, known["server"]),
    }
    if path in texts:
        return texts[path]
    if path.startswith(("/usr/sbin/", "/usr/share/grafana/bin/")):
        # The wrappers, and the tarball's two older programs: `grafana SUBCOMMAND`.
        home = "${GRAFANA_HOME:-/usr/share/grafana}"
        return f'#!/bin/sh\n{head}exec "{home}/bin/grafana" {sbin[name]} "$@"\n'
    return head  # LICENSE, ldap.toml, the provisioning samples: comments only


def grafana(out: Path, version: str) -> Path:
    """out/grafana_<version>_<arch>.deb with the real package's fields, conffiles, files
    and modes, and maintainer scripts doing what the real ones do; the same bytes every
    time. Returns its path."""
    known = {**facts("grafana", GRAFANA_FACTS_DOC), "version": version}
    machine = arch()
    scripts = {"postinst": _GRAFANA_POSTINST, "prerm": _GRAFANA_PRERM}
    out.mkdir(parents=True, exist_ok=True)
    package_file = out / f"grafana_{version}_{machine}.deb"
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "grafana"
        control = _control("grafana", version, known["fields"], machine, GRAFANA_LABEL)
        _write(root, "DEBIAN/control", control, 0o644)
        _write(root, "DEBIAN/conffiles", "\n".join(known["conffiles"]) + "\n", 0o644)
        for script in known["scripts"]:
            body = f"#!/bin/sh\n# {GRAFANA_LABEL}\nset -e\n{scripts[script]}exit 0\n"
            _write(root, f"DEBIAN/{script}", body, 0o755)
        for path, mode in known["directories"].items():
            (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).chmod(int(mode, 8))
        for path, mode in known["files"].items():
            _write(root, path, _grafana_file(path, known), int(mode, 8))
        _build(root, package_file)
    return package_file


def grafana_repository(out: Path, version: str) -> Path:
    """A signed apt repository in Grafana's layout under out (`deb file:OUT stable
    main`): dists/stable/{Release,InRelease,Release.gpg},
    dists/stable/main/binary-<arch>/Packages(.gz), pool/main/g/grafana/ holding the
    stand-in of `version`, and out/gpg.key, the armored key that signs it (a new one
    each build). Needs apt-ftparchive (apt-utils) and gpg. Returns out/gpg.key."""
    machine = arch()
    grafana(out / "pool" / "main" / "g" / "grafana", version)
    lists = out / "dists" / GRAFANA_SUITE / "main" / f"binary-{machine}"
    lists.mkdir(parents=True, exist_ok=True)
    packages = _run(["apt-ftparchive", "packages", "pool"], out)
    (lists / "Packages").write_text(packages)
    (lists / "Packages.gz").write_bytes(_gzip(packages))
    release = {
        "Origin": "Kiln stand-in",
        "Label": GRAFANA_LABEL,
        "Suite": GRAFANA_SUITE,
        "Codename": GRAFANA_SUITE,
        "Architectures": machine,
        "Components": "main",
    }
    key = _signed_release(
        out / "dists" / GRAFANA_SUITE, release, f"{GRAFANA_LABEL} <kiln@localhost>"
    )
    (out / "gpg.key").write_text(key)
    return out / "gpg.key"


def _signed_release(suite: Path, fields: dict[str, str], user: str) -> str:
    """suite/Release (apt-ftparchive over what suite holds, with `fields`), signed as
    InRelease and Release.gpg by a key made for `user`; returns the armored key."""
    for old in ("Release", "InRelease", "Release.gpg"):  # a rebuild lists none of them
        (suite / old).unlink(missing_ok=True)
    options = [f"-oAPT::FTPArchive::Release::{k}={v}" for k, v in fields.items()]
    (suite / "Release").write_text(_run(["apt-ftparchive", *options, "release", "."], suite))
    with tempfile.TemporaryDirectory() as home:
        gpg = ["gpg", "--batch", "--quiet", "--homedir", home]
        _run([*gpg, "--passphrase", "", "--quick-gen-key", user], suite)
        for sign, name in (("--clearsign", "InRelease"), ("--detach-sign", "Release.gpg")):
            _run([*gpg, "--armor", sign, "--output", name, "Release"], suite)
        key = _run([*gpg, "--armor", "--export"], suite)
        _run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], suite)
    return key


def _run(argv: list[str], where: Path) -> str:
    done = subprocess.run(argv, cwd=where, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{argv[0]} {argv[1]} failed: {done.stderr.strip()}")
    return done.stdout


# pyxis's build interface: make, then make install with its variables (prefix, libdir,
# datarootdir, datadir, DESTDIR), installing what the real one installs, as it does.
PYXIS_MAKEFILE = f"""# {LABEL}
prefix ?= /usr/local
libdir ?= $(prefix)/lib
datarootdir ?= $(prefix)/share
datadir ?= $(datarootdir)
CFLAGS ?= -O2 -Wall -Werror

all: spank_pyxis.so

spank_pyxis.so: standin.c
\t$(CC) $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC -shared -o $@ $< $(LDFLAGS)

install: all
\tinstall -d -m 755 $(DESTDIR)$(libdir)/slurm $(DESTDIR)$(datadir)/pyxis
\tinstall -m 644 spank_pyxis.so $(DESTDIR)$(libdir)/slurm/
\tprintf 'required %s\\n' '$(libdir)/slurm/spank_pyxis.so' >$(DESTDIR)$(datadir)/pyxis/pyxis.conf
\tchmod 644 $(DESTDIR)$(datadir)/pyxis/pyxis.conf

clean:
\trm -f spank_pyxis.so

.PHONY: all install clean
"""


def _c_strings(values: list[str]) -> str:
    return "{" + ", ".join(f'"{v}"' for v in values) + ", NULL}"


def _spank_option_rows(options: dict[str, str | None]) -> str:
    """spank_options rows for pyxis's srun options: name, argument, a usage of the
    stand-in's own, whether it takes a value, its index for set_container_option."""
    rows = []
    for index, (name, argument) in enumerate(options.items()):
        arginfo = f'"{argument}"' if argument else "NULL"
        rows.append(
            f'\t{{"{name}", {arginfo}, STANDIN_USAGE, {int(bool(argument))}, {index},'
            " set_container_option},\n"
        )
    return "".join(rows)


def pyxis_source(known: dict) -> str:
    """A SPANK plugin named pyxis that takes the real one's plugstack.conf arguments and
    refuses any other as it does (its start fails, and with `required` every step);
    `--kiln-test=VALUE` sets KILN_TEST=VALUE in the job step, and KILN_TEST_ARGS to
    its plugstack.conf arguments. It adds the real one's srun options
    (`--container-image`...) and, since it runs no container, fails a step given any of
    them with one line naming the node and the options it received."""
    options = known["options"]
    srun_options = known["srun_options"]
    booleans = [k for k, v in options.items() if v in ("0", "1")]
    texts = [k for k in options if k not in booleans and k != "container_scope"]
    return f"""/* {LABEL}: a SPANK plugin with pyxis's name, build
 * interface and plugstack.conf arguments; it runs no container. `--kiln-test=VALUE` sets
 * KILN_TEST=VALUE in the job step and KILN_TEST_ARGS to its plugstack.conf arguments. */
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

static const char *const booleans[] = {_c_strings(known["booleans"])};
static const char *const scopes[] = {_c_strings(known["container_scopes"])};
static const char *const boolean_options[] = {_c_strings(booleans)};
static const char *const text_options[] = {_c_strings(texts)};
static char *test_value;
/* pyxis's srun options, as the step received them (NULL: not given). */
#define STANDIN_USAGE "[pyxis] {LABEL}: runs no container"
static const char *const container_options[] = {_c_strings(list(srun_options))};
static char *container_values[{len(srun_options)}];

static int listed(const char *const *list, const char *value, size_t length)
{{
	for (; *list; list++)
		if (strlen(*list) == length && strncmp(*list, value, length) == 0)
			return 1;
	return 0;
}}

/* As pyxis: each argument is NAME=VALUE of a known name with a valid value. */
static int check_arguments(int ac, char **av)
{{
	static const char *const scope_option[] = {{"container_scope", NULL}};

	for (int i = 0; i < ac; i++) {{
		const char *value = strchr(av[i], '=');
		size_t name = value ? (size_t)(value - av[i]) : 0;
		int boolean = value && listed(boolean_options, av[i], name);
		int scope = value && listed(scope_option, av[i], name);

		if (!boolean && !scope && !(value && listed(text_options, av[i], name))) {{
			slurm_error("pyxis: unknown configuration option: %s", av[i]);
			return -1;
		}}
		value++;
		if ((boolean && !listed(booleans, value, strlen(value)))
			|| (scope && !listed(scopes, value, strlen(value)))) {{
			slurm_error("pyxis: %.*s: invalid value: %s", (int)name, av[i], value);
			return -1;
		}}
	}}
	return 0;
}}

static int set_test_value(int val, const char *optarg, int remote)
{{
	free(test_value);
	test_value = strdup(optarg ? optarg : "");
	return test_value ? 0 : -1;
}}

static int set_container_option(int val, const char *optarg, int remote)
{{
	free(container_values[val]);
	container_values[val] = strdup(optarg ? optarg : "");
	return container_values[val] ? 0 : -1;
}}

struct spank_option spank_options[] = {{
	{{"kiln-test", "VALUE", "STAND-IN for pyxis in Kiln's tests: sets KILN_TEST", 1, 0,
		set_test_value}},
{_spank_option_rows(srun_options)}	SPANK_OPTIONS_TABLE_END
}};

/* The options of pyxis this step was given, "--NAME[=VALUE] ...". */
static void given_container_options(char *given, size_t size)
{{
	for (int i = 0; container_options[i]; i++) {{
		if (!container_values[i])
			continue;
		if (*given)
			strncat(given, " ", size - strlen(given) - 1);
		strncat(given, "--", size - strlen(given) - 1);
		strncat(given, container_options[i], size - strlen(given) - 1);
		if (*container_values[i]) {{
			strncat(given, "=", size - strlen(given) - 1);
			strncat(given, container_values[i], size - strlen(given) - 1);
		}}
	}}
}}

int slurm_spank_init(spank_t sp, int ac, char **av)
{{
	return check_arguments(ac, av);
}}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{{
	char args[1024] = "";
	char given[2048] = "";

	given_container_options(given, sizeof(given));
	if (*given) {{
		slurm_error("pyxis: {LABEL}: it runs no container: %s", given);
		return -1;
	}}
	if (!test_value)
		return 0;
	for (int i = 0; i < ac; i++) {{
		if (i)
			strncat(args, " ", sizeof(args) - strlen(args) - 1);
		strncat(args, av[i], sizeof(args) - strlen(args) - 1);
	}}
	if (spank_setenv(sp, "KILN_TEST", test_value, 1) != ESPANK_SUCCESS)
		return -1;
	if (spank_setenv(sp, "KILN_TEST_ARGS", args, 1) != ESPANK_SUCCESS)
		return -1;
	return 0;
}}
"""


def pyxis(out: Path, version: str) -> str:
    """out/v<version>.tar.gz, unpacking to pyxis-<version>/ as GitHub's tag archives
    do; the same bytes every time. Returns its sha256."""
    known = facts("pyxis")
    top = known["top"].format(version=version)
    files = {
        "Makefile": PYXIS_MAKEFILE,
        "standin.c": pyxis_source(known),
        "README": f"{LABEL}: pyxis {version}'s build interface and arguments.\n",
    }
    return _tag_archive(out, version, top, files)


def _tag_archive(out: Path, version: str, top: str, files: dict[str, str]) -> str:
    """out/v<version>.tar.gz holding `files` under top/, as GitHub's tag archives are
    laid out; the same bytes every time. Returns its sha256."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            tar.addfile(info, io.BytesIO(data))
    out.mkdir(parents=True, exist_ok=True)
    _replace(out / f"v{version}.tar.gz", raw.getvalue())
    return hashlib.sha256(raw.getvalue()).hexdigest()


# nccl-tests' build interface (docs/nccl.md's facts): the top Makefile makes src's
# `build` target with BUILDDIR made absolute; src/Makefile takes CUDA_HOME (nvcc and
# the CUDA runtime), NCCL_HOME, MPI=1 with MPI_HOME, NVCC_GENCODE and BUILDDIR, and
# makes $(BUILDDIR)/<name>_perf for each program. Written for the stand-in, from the
# facts: not NVIDIA's files.
NCCL_TESTS_TOP_MAKEFILE = f"""# {LABEL}
BUILDDIR ?= build
override BUILDDIR := $(abspath $(BUILDDIR))

.PHONY: default all src.build

default: src.build
all: src.build

src.build:
\t$(MAKE) -C src build BUILDDIR=$(BUILDDIR)
"""


def _nccl_tests_src_makefile(known: dict, version: str) -> str:
    defaults = "".join(f"{name} ?= {value}\n" for name, value in known["variables"].items())
    gencode = {
        major: " ".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs)
        for major, archs in known["default_archs"].items()
    }
    return f"""# {LABEL}: nccl-tests {version}'s build interface.
{defaults}
# nvcc's release (13.0) decides the default architectures and C++ standard.
CUDA_RELEASE := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \\([0-9.]*\\),.*/\\1/p')
CUDA_MAJOR := $(firstword $(subst ., ,$(CUDA_RELEASE)))
ifeq ($(shell [ 0$(CUDA_MAJOR) -ge 13 ] && echo new),new)
NVCC_GENCODE ?= {gencode[13]}
CXXSTD ?= -std=c++17
else
NVCC_GENCODE ?= {gencode[12]}
CXXSTD ?= -std=c++14
endif

NVCUFLAGS := -ccbin $(CXX) $(NVCC_GENCODE) $(CXXSTD) -DSTANDIN_VERSION='"{version}"'
NVLDFLAGS := {known["link"]}
ifneq ($(NCCL_HOME),)
NVCUFLAGS += -I$(NCCL_HOME)/include
NVLDFLAGS += -L$(NCCL_HOME)/lib
endif
ifeq ($(MPI),1)
NVCUFLAGS += -DMPI_SUPPORT -I$(MPI_HOME)/include
NVLDFLAGS += -L$(MPI_HOME)/lib -L$(MPI_HOME)/lib64 -lmpi
endif
NVLDFLAGS += -lnccl

PROGRAMS := {" ".join(known["programs"])}

.PHONY: build clean
build: $(PROGRAMS:%=$(BUILDDIR)/%_perf)

$(BUILDDIR)/%.o: %.cu standin.h
\t@mkdir -p $(BUILDDIR)
\t$(NVCC) -o $@ $(NVCUFLAGS) -c $<

$(BUILDDIR)/%_perf: $(BUILDDIR)/%.o
\t$(NVCC) -o $@ $(NVCUFLAGS) $< $(NVLDFLAGS)

clean:
\trm -rf $(BUILDDIR)
"""


# What every stand-in program runs: NCCL's version, the CUDA devices and MPI's start
# and end, the calls a real build links against; one line, then exit 1 without a GPU
# (the real programs fail there too).
NCCL_TESTS_MAIN = f"""/* {LABEL}: one nccl-tests program's calls, none of its tests. */
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>
#ifdef MPI_SUPPORT
#include <mpi.h>
#endif

__global__ void standin_kernel(int *value) {{ *value = 1; }}

int main(int argc, char *argv[]) {{
  int nccl = 0, devices = 0, mpi = 0;
#ifdef MPI_SUPPORT
  MPI_Init(&argc, &argv);
  mpi = 1;
#endif
  ncclGetVersion(&nccl);
  cudaError_t found = cudaGetDeviceCount(&devices);
  printf("# %s_perf: nccl-tests %s {LABEL}; NCCL %d.%d.%d, MPI %s, CUDA devices %d (%s)\\n",
         STANDIN_PROGRAM, STANDIN_VERSION, nccl / 10000, nccl % 10000 / 100, nccl % 100,
         mpi ? "yes" : "no", found == cudaSuccess ? devices : 0, cudaGetErrorName(found));
#ifdef MPI_SUPPORT
  MPI_Finalize();
#endif
  return found == cudaSuccess && devices > 0 ? 0 : 1;
}}
"""


def nccl_tests(out: Path, version: str) -> str:
    """out/v<version>.tar.gz, unpacking to nccl-tests-<version>/ as GitHub's tag
    archives do, with nccl-tests' build interface; the same bytes every time. Returns
    its sha256."""
    known = facts("nccl_tests", NCCL_FACTS_DOC)
    files = {
        "Makefile": NCCL_TESTS_TOP_MAKEFILE,
        "README": f"{LABEL}: nccl-tests {version}'s build interface and programs.\n",
        "src/Makefile": _nccl_tests_src_makefile(known, version),
        "src/standin.h": NCCL_TESTS_MAIN,
        **{
            f"src/{name}.cu": f'#define STANDIN_PROGRAM "{name}"\n#include "standin.h"\n'
            for name in known["programs"]
        },
    }
    return _tag_archive(out, version, known["top"].format(version=version), files)


# NVIDIA's CUDA repository (docs/nccl.md's facts): the toolkit's and NCCL's packages as
# apt resolves them. Their files are what Kiln reads: nvcc's --version, nccl.h's release,
# NCCL's library names.
CUDA_TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}


def _nvcc(cuda: str, version: str) -> str:
    """nvcc answers --version as the real one does (the lines Kiln reads); anything
    else says it is a stand-in and fails: it compiles nothing."""
    full = version.split("-")[0]
    return (
        f"#!/bin/sh\n# {LABEL}: nvcc of CUDA {full}.\n"
        'if [ "$*" = --version ]; then\n'
        '  echo "nvcc: NVIDIA (R) Cuda compiler driver"\n'
        f'  echo "Cuda compilation tools, release {cuda}, V{full}"\n'
        "  exit 0\nfi\n"
        f'echo "nvcc $*: {LABEL}: it compiles nothing" >&2\nexit 1\n'
    )


def _nccl_header(version: str) -> str:
    major, minor, patch = version.split("-")[0].split(".")
    return (
        f"/* {LABEL}: nccl.h of NCCL {version}, its release only. */\n"
        f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n"
    )


def _cuda_package(
    out: Path, name: str, version: str, package: dict, machine: str, texts: dict[str, str]
) -> Path:
    """One package: the real one's fields and files (each file's text from `texts`,
    else a line naming it), symbolic links where the real one has them."""
    arch_ = package.get("architecture", machine)
    fields = {k: v.format(version=version) for k, v in (package.get("fields") or {}).items()}
    deb_file = out / f"{name}_{version}_{arch_}.deb"
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / name
        _write(root, "DEBIAN/control", _control(name, version, fields, arch_), 0o644)
        for path, mode in (package.get("files") or {}).items():
            text = texts.get(path, f"{LABEL}: {path} of {name} {version}.\n")
            _write(root, path, text, int(mode, 8))
        for path, target in (package.get("links") or {}).items():
            link = root / path.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
        _build(root, deb_file)
    return deb_file


def cuda_toolkit(out: Path) -> list[Path]:
    """The CUDA compiler's and NCCL's packages of NVIDIA's repository under out, with
    the real ones' names, versions, Depends and Provides (docs/nccl.md's facts), NCCL at
    every build the facts list; the same bytes every time. Returns their paths."""
    known = facts("cuda_repo_toolkit", NCCL_FACTS_DOC)
    machine = arch()
    names = {"triplet": CUDA_TRIPLETS.get(machine, f"{machine}-linux-gnu")}
    out.mkdir(parents=True, exist_ok=True)
    built = []
    for name, package in known["packages"].items():
        version = package["version"]
        nvcc = {f"/usr/local/cuda-{known['cuda']}/bin/nvcc": _nvcc(known["cuda"], version)}
        built.append(_cuda_package(out, name, version, package, machine, nvcc))
    for version in known["nccl"]["versions"]:
        release = version.split("-")[0]
        for name, package in known["nccl"]["packages"].items():
            spelled = {
                key: {
                    path.format(release=release, **names): str(value).format(release=release)
                    for path, value in package[key].items()
                }
                for key in ("files", "links")
                if key in package
            }
            texts = {"/usr/include/nccl.h": _nccl_header(version)}
            built.append(_cuda_package(out, name, version, {**package, **spelled}, machine, texts))
    return built


# NVIDIA's CUDA repository's driver packages, for the nvidia_driver scenario: the names
# and versions of NVIDIA's tree for the node's release (debian12/debian13 or
# ubuntu2204/ubuntu2404), empty but for units, IMEX's config and small programs in place
# of nvidia-smi, nvidia-imex and nvidia-imex-ctl, so the role's apt logic (origin
# preferences, the version pin, holds, the fabric manager's and IMEX's exact version)
# meets real apt. The fabric manager is offered one patch behind the newest driver, as
# happens upstream.
DRIVER_VERSIONS = ("580.95.05", "580.105.08")
FABRIC_MANAGER_VERSIONS = ("580.95.05", "580.105.07")
DRIVER_BRANCH = "580"
DRIVER_MAINTAINER = "Kiln tests <kiln@example.invalid>"


def _unit(description: str, start: str) -> str:
    return (
        f"[Unit]\nDescription=Stand-in for {description} (Kiln's Molecule test)\n"
        f"[Service]\nType=forking\nExecStart={start}\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


# nvidia-smi answers the one query the role's IMEX step asks: the GPUs' NVLink domain, as
# each of the four GPUs of a GB200 compute tray in the default NVLink partition reports it
# (tests/fixtures/gpu/imex/README.md names the sources: the fields, 32766). Anything else
# fails: no GPU is here.
_NVIDIA_SMI = """#!/bin/sh
# Stand-in for NVIDIA's nvidia-smi (Kiln's Molecule test).
if [ "$*" = "--query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader" ]; then
  for gpu in 0 1 2 3; do echo "8c1f2a4e-5b3d-4e6f-9a7b-0c1d2e3f4a5b, 32766"; done
  exit 0
fi
echo "stand-in nvidia-smi: no GPU here; only the fabric.clusterUuid,fabric.cliqueId query" >&2
exit 1
"""
# IMEX, nvidia-imex from branch 580 on. What the package holds, as Canonical's packaging of
# NVIDIA's IMEX tarball installs it (github.com/canonical/apt-packaging-imex:
# debian/templates/nvidia-imex-BRANCH.install.in, debian/conffiles): the programs in
# /usr/bin, the unit in /lib/systemd/system, /etc/nvidia-imex/config.cfg (its one
# conffile), no nodes_config.cfg. The service is nvidia-imex, nvidia-imex-ctl comes with it
# (NVIDIA's IMEX guide, "Getting Started with IMEX"). Its Depends in NVIDIA's repository
# are not known here: none. The unit: IMEX daemonizes by default (DAEMONIZE=1, NVIDIA's
# IMEX guide, "IMEX Service Config Options"), so forking; the ExecStart line as AWS
# ParallelCluster's cookbook tests it (aws/aws-parallelcluster-cookbook, nvidia-imex
# kitchen controls). The config's keys and defaults from NVIDIA's IMEX guide, "IMEX
# Service Config Options".
_IMEX_CONFIG = """# Stand-in for NVIDIA's IMEX config.cfg (Kiln's Molecule test):
# documented defaults.
DAEMONIZE=1
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
"""
_IMEX = """#!/bin/sh
# Stand-in for NVIDIA's nvidia-imex (Kiln's Molecule test): daemonizes, does nothing.
sleep infinity </dev/null >/dev/null 2>&1 &
"""
# -N as NVIDIA's IMEX guide, "IMEX Service Command Service", lays it out
# (tests/fixtures/gpu/imex/README.md): every node of nodes_config.cfg READY and connected.
_IMEX_CTL = r"""#!/bin/sh
# Stand-in for NVIDIA's nvidia-imex-ctl (Kiln's Molecule test): -N only.
[ "$*" = -N ] || { echo "stand-in nvidia-imex-ctl: only -N" >&2; exit 2; }
version="$(dpkg-query -W -f '${Version}' nvidia-imex | cut -d- -f1)"
nodes="$(grep -v '^[[:space:]]*$' /etc/nvidia-imex/nodes_config.cfg)"
echo "Connectivity Table Legend:"
echo "C - Connected - Ready for operation"
echo
date +'%m/%d/%Y %H:%M:%S.000'
echo "Nodes:"
i=0
for ip in $nodes; do
  printf 'Node #%-3s - %-15s - %-20s - Version: %s\n' "$i" "$ip" READY "$version"
  i=$((i + 1))
done
echo
printf ' Nodes From\\To '
n=0; while [ "$n" -lt "$i" ]; do printf ' %-3s' "$n"; n=$((n + 1)); done; echo
r=0
while [ "$r" -lt "$i" ]; do
  printf '       %-8s ' "$r"
  n=0; while [ "$n" -lt "$i" ]; do printf ' C  '; n=$((n + 1)); done; echo
  r=$((r + 1))
done
echo
echo "Domain State: UP"
"""
_PERSISTENCED_POSTINST = """#!/bin/sh
getent passwd nvidia-persistenced >/dev/null ||
  useradd --system --no-create-home --shell /usr/sbin/nologin nvidia-persistenced
"""
_PERSISTENCED = {
    "/lib/systemd/system/nvidia-persistenced.service": (
        _unit(
            "NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced --user nvidia-persistenced"
        ),
        0o644,
    )
}
_SMI = {"/usr/bin/nvidia-smi": (_NVIDIA_SMI, 0o755)}


def _driver_package(
    out: Path,
    name: str,
    version: str,
    depends: str = "",
    files: dict[str, tuple[str, int]] | None = None,
    postinst: str = "",
) -> Path:
    """One empty stand-in (Architecture all) holding `files`; a file under /etc is a
    conffile."""
    lines = [
        f"Package: {name}",
        f"Version: {version}",
        "Architecture: all",
        f"Maintainer: {DRIVER_MAINTAINER}",
        *([f"Depends: {depends}"] if depends else []),
        "Section: misc",
        "Priority: optional",
        f"Description: stand-in for NVIDIA's {name} (Kiln's Molecule test)",
    ]
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / name
        _write(root, "DEBIAN/control", "\n".join(lines) + "\n", 0o644)
        conffiles = [path for path in files or {} if path.startswith("/etc/")]
        if conffiles:
            _write(root, "DEBIAN/conffiles", "\n".join(conffiles) + "\n", 0o644)
        if postinst:
            _write(root, "DEBIAN/postinst", postinst, 0o755)
        for path, (text, mode) in (files or {}).items():
            _write(root, path, text, mode)
        deb_file = out / f"{name}_{version}_all.deb"
        _build(root, deb_file)
    return deb_file


def _driver_packages(out: Path, distro: str, version: str) -> list[Path]:
    """The driver of `version` as NVIDIA's tree for the distribution names it: Ubuntu's
    headless metapackages and their dependencies at the same version (nvidia-smi in
    nvidia-utils, persistenced in nvidia-compute-utils), or Debian's."""
    built = []
    if distro == "ubuntu":
        b, v = DRIVER_BRANCH, f"{version}-0ubuntu1"
        for name in (f"libnvidia-compute-{b}", f"nvidia-dkms-{b}", f"nvidia-dkms-{b}-open"):
            built.append(_driver_package(out, name, v))
        compute = f"libnvidia-compute-{b} (= {v})"
        built.append(_driver_package(out, f"nvidia-utils-{b}", v, compute, _SMI))
        built.append(
            _driver_package(
                out, f"nvidia-compute-utils-{b}", v, "", _PERSISTENCED, _PERSISTENCED_POSTINST
            )
        )
        for kind in ("", "-open"):
            depends = f"nvidia-dkms-{b}{kind} (= {v}), nvidia-compute-utils-{b} (= {v}), {compute}"
            built.append(_driver_package(out, f"nvidia-headless-{b}{kind}", v, depends))
        return built
    v = f"{version}-1"
    for name in ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "libcuda1", "libnvidia-ml1"):
        built.append(_driver_package(out, name, v))
    built.append(_driver_package(out, "nvidia-smi", v, "", _SMI))
    depends = f"nvidia-smi (= {v}), libcuda1 (= {v}), libnvidia-ml1 (= {v})"
    built.append(_driver_package(out, "nvidia-driver-cuda", v, depends))
    built.append(
        _driver_package(out, "nvidia-persistenced", v, "", _PERSISTENCED, _PERSISTENCED_POSTINST)
    )
    return built


def cuda_repository(out: Path, distro: str) -> Path:
    """A flat repository under out signed as NVIDIA's CUDA repository is (Origin NVIDIA,
    Label "NVIDIA CUDA"): the driver's packages for `distro` (debian or ubuntu) at two
    versions, IMEX's, the fabric manager's, and cuda_toolkit's; out/standin.pub the
    armored key that signs it (a new one each build). Needs apt-ftparchive and gpg.
    Returns out/standin.pub."""
    if distro not in ("debian", "ubuntu"):
        raise SystemExit(f"cuda-repo: a distribution of debian or ubuntu, not {distro!r}")
    out.mkdir(parents=True, exist_ok=True)
    for version in DRIVER_VERSIONS:
        _driver_packages(out, distro, version)
        imex = {
            "/usr/bin/nvidia-imex": (_IMEX, 0o755),
            "/usr/bin/nvidia-imex-ctl": (_IMEX_CTL, 0o755),
            "/lib/systemd/system/nvidia-imex.service": (
                _unit("NVIDIA IMEX service", "/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg"),
                0o644,
            ),
            "/etc/nvidia-imex/config.cfg": (_IMEX_CONFIG, 0o644),
        }
        _driver_package(out, "nvidia-imex", f"{version}-1", "", imex)
    fabric_manager = {
        "/lib/systemd/system/nvidia-fabricmanager.service": (
            _unit(
                "NVIDIA fabric manager",
                "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
            ),
            0o644,
        )
    }
    for version in FABRIC_MANAGER_VERSIONS:
        _driver_package(
            out, f"nvidia-fabricmanager-{DRIVER_BRANCH}", f"{version}-1", "", fabric_manager
        )
        _driver_package(out, f"libnvidia-nscq-{DRIVER_BRANCH}", f"{version}-1")
    cuda_toolkit(out)
    (out / "Packages").write_text(_run(["apt-ftparchive", "packages", "."], out))
    fields = {"Origin": "NVIDIA", "Label": "NVIDIA CUDA"}
    key = _signed_release(out, fields, "Kiln stand-in CUDA repository")
    (out / "standin.pub").write_text(key)
    return out / "standin.pub"


def mlnx_ofed(out: Path) -> Path:
    """STAND-IN, NOT NVIDIA'S: an empty package under MLNX OFED's name, so a node's RDMA
    stack reads as OFED. Returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    return _driver_package(out, "mlnx-ofed-kernel-utils", "24.10.OFED.24.10.1.1.4.1-1")


def real_releases() -> Path | None:
    """The directory of NVIDIA's real releases the lab installs instead of stand-ins, if
    KILN_LAB_RELEASES names one: GitHub's layout, enroot/v<version>/<package>.deb and
    pyxis/v<version>.tar.gz (a mirror's, or packages built by hand)."""
    where = os.environ.get(RELEASES, "")
    return Path(where).resolve() if where else None


def _sha256(path: Path) -> str:
    if not path.is_file():
        raise SystemExit(f"{RELEASES}: no {path} (GitHub's release layout is expected)")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _real_pins(where: Path) -> dict[str, str]:
    """The sha256 of the lab's releases in `where`, read from the files the role fetches."""
    from kiln.roles import enroot as kiln_enroot
    from kiln.roles import pyxis as kiln_pyxis

    base = (where / "enroot").as_uri()
    chosen = kiln_enroot.packages(LAB_ENROOT, "", True, "", arch(), base)
    files = {p["package"]: where / "enroot" / f"v{LAB_ENROOT}" / p["file"] for p in chosen}
    tarball = kiln_pyxis.source(LAB_PYXIS, "", (where / "pyxis").as_uri())["url"]
    return {
        "enroot": _sha256(files["enroot"]),
        "enroot+caps": _sha256(files["enroot+caps"]),
        "pyxis": _sha256(Path(tarball.removeprefix("file://"))),
    }


def lab_settings(directory: Path = LAB_DIR, settings: Path = LAB_SETTINGS) -> dict[str, object]:
    """The lab's stand-ins built into `directory` (or, with KILN_LAB_RELEASES, NVIDIA's
    releases in the directory it names), and the settings that pin them written to
    `settings` (the lab's group_vars): the control node fetches them from there."""
    real = real_releases()
    if real:
        digests, where = _real_pins(real), real
        made = f"# NVIDIA's releases, from {real} ({RELEASES}).\n"
    else:
        digests = enroot(directory / "enroot", LAB_ENROOT)
        digests["pyxis"], where = pyxis(directory / "pyxis", LAB_PYXIS), directory
        made = (
            "# STAND-INs for NVIDIA's enroot and pyxis, which the lab cannot download (not\n"
            f"# NVIDIA's), built in {directory}.\n"
        )
    values: dict[str, object] = {
        "enroot_version": LAB_ENROOT,
        "enroot_sha256": digests["enroot"],
        "enroot_caps_sha256": digests["enroot+caps"],
        "enroot_base_url": (where / "enroot").resolve().as_uri(),
        "enroot_fetch": "control",
        "pyxis_version": LAB_PYXIS,
        "pyxis_sha256": digests["pyxis"],
        "pyxis_base_url": (where / "pyxis").resolve().as_uri(),
        "pyxis_fetch": "control",
    }
    header = f"# Written by tests/standins.py (`make lab`).\n{made}# Not committed.\n"
    settings.parent.mkdir(parents=True, exist_ok=True)
    _replace(settings, (header + yaml.safe_dump(values, sort_keys=False)).encode())
    return values


USAGE = (
    "usage: python tests/standins.py enroot OUT VERSION [DEPENDS] | pyxis OUT VERSION"
    " | nccl-tests OUT VERSION | grafana OUT VERSION | grafana-repo OUT [VERSION]"
    " | cuda-toolkit OUT | cuda-repo OUT debian|ubuntu | mlnx-ofed OUT | lab"
)


def main(argv: list[str]) -> int:
    if argv == ["lab"]:
        lab_settings()
        print(LAB_SETTINGS)
        return 0
    if argv[:1] == ["pyxis"] and len(argv) == 3:
        print(f"pyxis {pyxis(Path(argv[1]), argv[2])}")
        return 0
    if argv[:1] == ["nccl-tests"] and len(argv) == 3:
        print(f"nccl-tests {nccl_tests(Path(argv[1]), argv[2])}")
        return 0
    if argv[:1] == ["grafana"] and len(argv) == 3:
        print(grafana(Path(argv[1]), argv[2]))
        return 0
    if argv[:1] == ["grafana-repo"] and len(argv) in (2, 3):
        version = argv[2] if len(argv) == 3 else facts("grafana", GRAFANA_FACTS_DOC)["version"]
        print(grafana_repository(Path(argv[1]), version))
        return 0
    if argv[:1] == ["cuda-repo"] and len(argv) == 3:
        print(cuda_repository(Path(argv[1]), argv[2]))
        return 0
    if argv[:1] == ["mlnx-ofed"] and len(argv) == 2:
        print(mlnx_ofed(Path(argv[1])))
        return 0
    if argv[:1] == ["cuda-toolkit"] and len(argv) == 2:
        for path in cuda_toolkit(Path(argv[1])):
            print(path)
        return 0
    if argv[:1] == ["enroot"] and len(argv) in (3, 4):
        for name, digest in enroot(Path(argv[1]), argv[2], *argv[3:]).items():
            print(f"{name} {digest}")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
