"""STAND-IN release packages for the lab and Molecule, not NVIDIA's: the real ones come
from GitHub, which the lab and CI cannot reach. Each is built with dpkg-deb under the
upstream name and file layout, so what the roles do with it is real (the sha256 pin,
dpkg, the files written around it); it does nothing else.

    python -m kiln.lab.standins enroot OUT VERSION   -> OUT/v<VERSION>/*.deb (GitHub's layout)
    python -m kiln.lab.standins pyxis OUT VERSION    -> OUT/v<VERSION>.tar.gz (GitHub's layout)
"""

import gzip
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from kiln.errors import ExitCode, KilnError

ENROOT_VERSION = "3.5.0"
PYXIS_VERSION = "0.20.0"
LABEL = "STAND-IN built by Kiln for tests and the lab, not NVIDIA's"
# Hooks enroot enables itself, and those it ships in /usr/share/enroot/hooks.d for a
# site to enable (Kiln's enroot role links the Slurm ones).
ENROOT_HOOKS = ("10-cgroups.sh", "10-devices.sh", "10-home.sh", "98-nvidia.sh", "99-mellanox.sh")
ENROOT_EXTRA_HOOKS = ("50-slurm-pmi.sh", "50-slurm-pytorch.sh", "50-mig-config.sh", "50-sharp.sh")


def _arch() -> str:
    return subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _write(root: Path, files: dict[str, tuple[str, int]]) -> None:
    for relative, (text, mode) in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)


def _build(root: Path, out: Path) -> None:
    done = subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(root), str(out)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise KilnError(
            f"dpkg-deb could not build {out.name}: {done.stderr.strip()}", ExitCode.FAILED
        )


def enroot(out: Path, version: str = ENROOT_VERSION) -> dict[str, str]:
    """enroot_<v>-1_<arch>.deb and enroot+caps_<v>-1_<arch>.deb under out/v<version>/;
    returns {package: sha256}."""
    arch = _arch()
    release = out / f"v{version}"
    release.mkdir(parents=True, exist_ok=True)
    control = "Package: {name}\nVersion: {version}-1\nArchitecture: {arch}\n{extra}"
    control += "Maintainer: Kiln tests <kiln@localhost>\nDescription: {label}\n"
    script = f'#!/bin/sh\n# {LABEL}\n[ "$1" = version ] && echo {version} && exit 0\n'
    script += 'echo "enroot stand-in: $*" >&2\nexit 1\n'
    enroot_files = {
        "DEBIAN/control": (
            control.format(name="enroot", version=version, arch=arch, extra="", label=LABEL),
            0o644,
        ),
        "DEBIAN/conffiles": ("/etc/enroot/enroot.conf\n", 0o644),
        "usr/bin/enroot": (script, 0o755),
        "usr/bin/enroot-mksquashovlfs": (f"#!/bin/sh\n# {LABEL}\nexit 0\n", 0o755),
        "usr/bin/enroot-aufs2ovlfs": (f"#!/bin/sh\n# {LABEL}\nexit 0\n", 0o755),
        "etc/enroot/enroot.conf": ("#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n", 0o644),
        "etc/enroot/mounts.d/10-system.fstab": (
            "/etc/hosts /etc/hosts none x-create=file,bind,ro,nosuid,nodev,noexec,nofail,silent\n",
            0o644,
        ),
        "etc/enroot/environ.d/10-terminal.env": ("TERM\n", 0o644),
        **{f"etc/enroot/hooks.d/{h}": (f"#!/bin/bash\n# {LABEL}\n", 0o755) for h in ENROOT_HOOKS},
        **{
            f"usr/share/enroot/hooks.d/{h}": (f"#!/bin/bash\n# {LABEL}\n", 0o755)
            for h in ENROOT_EXTRA_HOOKS
        },
    }
    caps_files = {
        "DEBIAN/control": (
            control.format(
                name="enroot+caps",
                version=version,
                arch=arch,
                extra=f"Depends: enroot (= {version}-1)\n",
                label=LABEL,
            ),
            0o644,
        ),
        "usr/share/doc/enroot+caps/README": (f"{LABEL}\n", 0o644),
    }
    digests = {}
    with tempfile.TemporaryDirectory() as work:
        for name, files in (("enroot", enroot_files), ("enroot+caps", caps_files)):
            root = Path(work) / name
            _write(root, files)
            package = release / f"{name}_{version}-1_{arch}.deb"
            _build(root, package)
            digests[name] = hashlib.sha256(package.read_bytes()).hexdigest()
    return digests


def lab_enroot(directory: Path, version: str = ENROOT_VERSION) -> dict[str, object]:
    """The lab's enroot settings: its stand-in packages, built once into `directory`,
    pinned by their sha256 and fetched from there by the control node."""
    packages = {p.name.split("_", 1)[0]: p for p in (directory / f"v{version}").glob("*.deb")}
    if set(packages) != {"enroot", "enroot+caps"}:
        digests = enroot(directory, version)
    else:
        digests = {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in packages.items()}
    return {
        "enroot_version": version,
        "enroot_sha256": digests["enroot"],
        "enroot_caps_sha256": digests["enroot+caps"],
        "enroot_base_url": directory.resolve().as_uri(),
        "enroot_fetch": "control",
    }


# pyxis's build interface (make; make install with prefix/libdir; the plugin in
# $(libdir)/slurm/spank_pyxis.so) around a SPANK plugin that adds --kiln-test=VALUE:
# KILN_TEST=VALUE in the job step, KILN_TEST_ARGS its plugstack.conf arguments.
PYXIS_MAKEFILE = f"""# {LABEL}
prefix ?= /usr/local
exec_prefix ?= $(prefix)
libdir ?= $(exec_prefix)/lib
CFLAGS ?= -O2 -Wall -Werror

all: spank_pyxis.so

spank_pyxis.so: standin.c
\t$(CC) $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC -shared -o $@ $< $(LDFLAGS)

install: all
\tinstall -d -m 755 $(DESTDIR)$(libdir)/slurm
\tinstall -m 755 spank_pyxis.so $(DESTDIR)$(libdir)/slurm/

clean:
\trm -f spank_pyxis.so

.PHONY: all install clean
"""
PYXIS_SOURCE = f"""/* {LABEL}: a SPANK plugin with pyxis's
 * name and build interface. `--kiln-test=VALUE` sets KILN_TEST=VALUE in the job step
 * and KILN_TEST_ARGS to the arguments plugstack.conf gives the plugin. */
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

static char *test_value;

static int set_test_value(int val, const char *optarg, int remote)
{{
	free(test_value);
	test_value = strdup(optarg ? optarg : "");
	return test_value ? 0 : -1;
}}

struct spank_option spank_options[] = {{
	{{"kiln-test", "VALUE", "STAND-IN for pyxis in Kiln's tests: sets KILN_TEST", 1, 0,
		set_test_value}},
	SPANK_OPTIONS_TABLE_END
}};

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{{
	char args[1024] = "";

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


def pyxis(out: Path, version: str = PYXIS_VERSION) -> str:
    """out/v<version>.tar.gz, unpacking to pyxis-<version>/ as GitHub's tag archives
    do; the same bytes every time (fixed times and owners). Returns its sha256."""
    files = {"Makefile": PYXIS_MAKEFILE, "standin.c": PYXIS_SOURCE, "README": f"{LABEL}\n"}
    raw = io.BytesIO()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pyxis-{version}/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"v{version}.tar.gz").write_bytes(raw.getvalue())
    return hashlib.sha256(raw.getvalue()).hexdigest()


def lab_pyxis(directory: Path, version: str = PYXIS_VERSION) -> dict[str, object]:
    """The lab's pyxis settings: its stand-in source, pinned by sha256, fetched from
    `directory` by the control node."""
    return {
        "pyxis_version": version,
        "pyxis_sha256": pyxis(directory, version),
        "pyxis_base_url": directory.resolve().as_uri(),
        "pyxis_fetch": "control",
    }


USAGE = "usage: python -m kiln.lab.standins enroot|pyxis OUT VERSION"


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("enroot", "pyxis"):
        print(USAGE, file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if argv[0] == "pyxis":
        print(f"pyxis {pyxis(Path(argv[1]), argv[2])}")
        return 0
    for name, digest in enroot(Path(argv[1]), argv[2]).items():
        print(f"{name} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
