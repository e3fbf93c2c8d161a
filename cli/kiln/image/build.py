"""`kiln image build`: the node-independent part of a compute node (playbooks/image.yml)
applied to a container of a base image, per-machine state cleared, committed, and
written out as an OCI archive, a root-filesystem tarball and a manifest of the pins.

Every check on the operator's input comes first (`check`): a bad base image, output
directory or inventory stops the build before a container exists. Outputs are written
beside the output directory and moved in only once all three are complete.
"""

import contextlib
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kiln import __version__, files, os_support, paths
from kiln.errors import ExitCode, InputError, KilnError
from kiln.image import manifest, target
from kiln.inventory.spec import ClusterSpec
from kiln.lab.podman import exists, inspect, podman
from kiln.run.display import Displays
from kiln.run.events import RunSummary

LABEL = "io.kiln.image"  # on build containers (their build's name) and built images
IMAGE_REPO = "localhost/kiln-image"
# An image name podman commits to: path components, a registry's port, a tag.
TAG = re.compile(
    r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
)
OUTPUTS = (manifest.OCI_FILE, manifest.ROOTFS_FILE, manifest.MANIFEST_FILE)
BOOT_TIMEOUT_S = 60

# What a machine made from the image must not share with its siblings: its identity
# (machine-id, SSH host keys, hostname), the munge key Debian's package makes as it
# installs (a secret every node of the image would share; the munge role installs the
# cluster's), what Kiln recorded about the build container
# (local facts), and the build's caches. A node makes new keys and a machine-id on its
# first boot (the lab's node image has a unit for the keys). /etc/hostname, /etc/hosts and
# /etc/resolv.conf are podman's mounts, never in the committed image. With apt's lists
# gone, their age reads as never updated (no update stamp, the directory's mtime at 0, as
# ansible.builtin.apt and kiln.packages read it): else a node from the image takes its
# empty lists for fresh (cache_valid_time) and finds no package the image lacks (autofs).
CLEAR = """set -e
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id /etc/ssh/ssh_host_*
rm -f /etc/munge/munge.key
rm -rf /etc/ansible/facts.d /root/.ansible /tmp/* /var/tmp/*
apt-get clean
rm -rf /var/lib/apt/lists/*
rm -f /var/lib/apt/periodic/update-success-stamp
touch -d @0 /var/lib/apt/lists
"""
DPKG_FORMAT = "${Package} ${db:Status-Abbrev} ${Version}\\n"


@dataclass
class BuildRequest:
    inventory: ClusterSpec
    output: Path
    base: str
    force: bool = False  # replace an image the output directory holds
    like: str | None = None
    tag: str | None = None
    network: str | None = None  # a podman network (a lab's, for its apt proxy)


@dataclass
class Plan:
    """A checked request: what the build will use."""

    request: BuildRequest
    like: str
    base_id: str
    tag: str
    container: str


class BadValue(InputError):
    """A value the operator gave is refused. OPTION names which (base, network, output,
    tag): the command says it as its option."""

    def __init__(self, option: str, value: object, message: str) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class HoldsImage(BadValue):
    """The output directory holds an image already."""


def check(request: BuildRequest) -> Plan:
    """Every problem with the operator's input, before anything is touched."""
    asked = [request.like] if request.like else None
    like = request.inventory.compute_nodes(asked, "build an image for")[0]
    if request.tag and not TAG.fullmatch(request.tag):
        raise BadValue(
            "tag", repr(request.tag), "not an image name (lower-case NAME[/NAME...][:TAG])"
        )
    _check_output(request.output, request.force)
    if request.network and not exists("network", request.network):
        raise BadValue("network", request.network, "no such podman network")
    info = inspect("image", request.base)
    if info is None:
        raise BadValue(
            "base",
            request.base,
            "no such image in podman (`podman images` lists them; `kiln lab up` builds the"
            " lab's node image)",
        )
    suffix = secrets.token_hex(4)
    tag = request.tag or f"{IMAGE_REPO}:{suffix}"
    return Plan(request, like, str(info.get("Id", "")), tag, f"kiln-image-{suffix}")


def _check_output(output: Path, force: bool) -> None:
    if output.exists() and not output.is_dir():
        raise BadValue("output", output, "not a directory")
    if output.is_dir():
        held = [name for name in OUTPUTS if (output / name).exists()]
        if held and not force:
            raise HoldsImage("output", output, f"holds an image already ({', '.join(held)})")
        _probe(output)
        return
    parent = output.absolute().parent
    if not parent.is_dir():
        raise BadValue("output", output, f"no directory {parent}")
    _probe(parent, output)


def _probe(directory: Path, output: Path | None = None) -> None:
    """Write a file there: root passes os.access on a read-only mount, a write does not."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".kiln-probe-"):
            pass
    except OSError as exc:
        raise BadValue(
            "output", output or directory, f"not writable ({exc.strerror or exc})"
        ) from None


def build(
    plan: Plan, display: Displays, log: Callable[[str], None]
) -> tuple[RunSummary, manifest.Manifest | None]:
    """The run's summary, and the manifest when the roles applied and the outputs are
    written; a failed run leaves no output and no container."""
    from kiln.run.execute import RunRequest, run_playbook

    request = plan.request
    work = paths.state_dir() / "tmp"
    work.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="image-", dir=work) as tmp, _container(plan, log):
        spec = target.write(request.inventory, plan.like, plan.container, Path(tmp))
        log(f"applying the compute roles to {plan.container} (variables of {plan.like})")
        summary = run_playbook(
            RunRequest(
                playbook="image",
                inventory=spec,
                display=display,
                recorded_inventory=request.inventory.source,
            )
        )
        for facts in os_support.fact_files(plan.container):  # a build host's, never a node's
            facts.unlink(missing_ok=True)
        if summary.exit_code != ExitCode.OK:
            return summary, None
        podman("exec", plan.container, "sh", "-c", CLEAR)
        installed = podman(
            "exec",
            plan.container,
            "dpkg-query",
            "-W",
            "-f",
            DPKG_FORMAT,
            *manifest.PACKAGES,
            check=False,
        )
        podman("stop", "--time", "10", plan.container)
        log(f"committing {plan.tag}")
        podman(
            "commit", "--change", 'CMD=["/sbin/init"]', "--change",
            f"LABEL={LABEL}={summary.run}", plan.container, plan.tag,
        )  # fmt: skip
        image_id = str((inspect("image", plan.tag) or {}).get("Id", ""))
        found = manifest.Manifest(
            kiln_version=__version__,
            built=datetime.now(UTC).isoformat(timespec="seconds"),
            run=summary.run,
            inventory=str(request.inventory.source),
            like=plan.like,
            base_image={"name": request.base, "id": plan.base_id},
            image={"name": plan.tag, "id": image_id},
            pins=manifest.pins(request.inventory, plan.like),
            packages=manifest.parse_dpkg(installed),
        )
        _write_outputs(plan, found, log)
    return summary, found


@contextlib.contextmanager
def _container(plan: Plan, log: Callable[[str], None]):
    """The build container, booted as a node boots (systemd, so roles enable and start
    services as they would), removed whatever happens."""
    log(f"starting {plan.container} from {plan.request.base}")
    network = ["--network", plan.request.network] if plan.request.network else []
    podman(
        "run", "--detach", "--name", plan.container, "--hostname", plan.container,
        "--privileged", "--systemd=always", "--label", f"{LABEL}={plan.container}",
        *network, plan.request.base, "/sbin/init",
    )  # fmt: skip
    try:
        _wait_booted(plan.container)
        yield
    finally:
        podman("rm", "--force", "--time", "2", plan.container, check=False)


def _wait_booted(container: str) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        state = podman("exec", container, "systemctl", "is-system-running", check=False).strip()
        if state in ("running", "degraded"):
            return
        time.sleep(1)
    raise KilnError(
        f"build container {container} did not boot in {BOOT_TIMEOUT_S} s (systemd: {state!r})",
        ExitCode.FAILED,
    )


def _write_outputs(plan: Plan, found: manifest.Manifest, log: Callable[[str], None]) -> None:
    """The archive, the tarball and the manifest in a directory beside the output, then
    moved in: an output directory holds a whole image or what it held before."""
    output = plan.request.output
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.absolute().parent))
    try:
        log(f"writing {manifest.OCI_FILE} and {manifest.ROOTFS_FILE}")
        oci, rootfs = staging / manifest.OCI_FILE, staging / manifest.ROOTFS_FILE
        podman("save", "--format", "oci-archive", "--output", str(oci), plan.tag)
        podman("export", "--output", str(rootfs), plan.container)
        found.files = [manifest.output_file(oci), manifest.output_file(rootfs)]
        (staging / manifest.MANIFEST_FILE).write_text(files.json_text(found.to_json()) + "\n")
        output.mkdir(exist_ok=True)
        for name in OUTPUTS:
            (staging / name).replace(output / name)
    except OSError as exc:
        raise files.cannot_write(output, exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
