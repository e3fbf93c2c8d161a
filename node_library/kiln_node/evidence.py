"""The evidence bundle collected before a repair resets or reboots a node, and for an
RMA: what a vendor's support asks for, as one tarball with a manifest (each member's
sha256 and size, the command, its exit status, whether it ran past its time or was cut),
bounded in total size and in time.

Commands run with a deadline each and one for the whole bundle (what is left when a
command starts); past either, the command's process group is killed and what it printed
is kept, marked. A command not installed is listed as skipped."""

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kiln_node import nvidia_smi


@dataclass(frozen=True)
class Item:
    name: str  # the member's file name in the bundle
    argv: tuple[str, ...] = ()  # a command whose output is the member; `{dir}` a work dir
    path: str = ""  # or a file of the node's, copied
    produces: str = ""  # the command writes this file in `{dir}` (nvidia-bug-report.sh)
    timeout_s: float = 60.0
    max_bytes: int = 32 * 2**20
    keep_xid_lines: bool = False  # only the kernel log's XID lines


def plan(health: str, dcgm_level: int = 1, history_paths: tuple[str, ...] = ()) -> list[Item]:
    """What a bundle holds: nvidia-smi's whole report and the serials, NVIDIA's bug
    report where installed, the kernel's XID lines, kiln-health's JSON (report only, no
    Slurm change), DCGM's diagnostic JSON where dcgmi is installed (0: not run), the
    node's own records (validation, burn-in, active checks) and the system's serial."""
    items = [
        Item("nvidia-smi-q.xml", ("nvidia-smi", "-q", "-x")),
        Item(
            "serials.csv",
            (
                "nvidia-smi",
                "--query-gpu=index,pci.bus_id,serial,uuid,vbios_version",
                "--format=csv",
            ),
        ),
        Item(
            "nvidia-bug-report.log.gz",
            ("nvidia-bug-report.sh", "--output-file", "{dir}/nvidia-bug-report.log"),
            produces="nvidia-bug-report.log.gz",
            timeout_s=300,
            max_bytes=256 * 2**20,
        ),
        Item("xid-lines.txt", ("dmesg",), keep_xid_lines=True),
        Item("kiln-health.json", (health, "--json", "--no-slurm")),
        Item("system-serial.txt", ("dmidecode", "-s", "system-serial-number")),
    ]
    if dcgm_level:
        items.append(
            Item("dcgm-diag.json", ("dcgmi", "diag", "-r", str(dcgm_level), "-j"), timeout_s=600)
        )
    for given in map(Path, history_paths):
        # A directory (the active checks' records) gives each file under it.
        found = sorted(p for p in given.rglob("*") if p.is_file()) if given.is_dir() else [given]
        base = given.parent
        items += [Item(f"records/{p.relative_to(base)}", path=str(p)) for p in found]
    return items


def _run(argv: list[str], out, timeout: float, work: str) -> tuple[int | None, bool, str]:
    """(exit status, timed out, stderr's last line); stdout goes to `out` as printed."""
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=work,
            start_new_session=True,
        )  # fmt: skip
        try:
            rc, timed_out = child.wait(timeout), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
            rc, timed_out = None, True
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    return rc, timed_out, lines[-1] if lines else ""


def _sized(path: Path, limit: int) -> tuple[bytes, bool]:
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit


def collect(
    node: str, items: list[Item], out_dir: str, now: float, max_bytes: int, timeout_s: float
) -> tuple[Path, dict]:
    """Run and copy `items` into `out_dir/evidence-NODE-STAMP.tar.gz`: the members and
    manifest.json. Its path and the manifest."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    top = f"evidence-{node}-{stamp}"
    end = time.monotonic() + timeout_s
    left = max_bytes
    members: list[tuple[str, bytes]] = []
    listed = []
    for item in items:
        entry: dict = {"name": item.name, "command": list(item.argv) or None,
                       "path": item.path or None}  # fmt: skip
        budget = end - time.monotonic()
        if budget <= 0 or left <= 0:
            listed.append(
                entry | {"skipped": "time budget spent" if budget <= 0 else "size budget spent"}
            )
            continue
        cap = min(item.max_bytes, left)
        with tempfile.TemporaryDirectory() as work:
            if item.path:
                try:
                    data, cut = _sized(Path(item.path), cap)
                except OSError as exc:
                    listed.append(entry | {"skipped": f"unreadable: {exc.strerror}"})
                    continue
                entry |= {"exit_status": None, "timed_out": False}
            else:
                argv = [a.replace("{dir}", work) for a in item.argv]
                output = Path(work) / "stdout"
                try:
                    with open(output, "wb") as out:
                        rc, timed_out, error = _run(argv, out, min(item.timeout_s, budget), work)
                except FileNotFoundError:
                    listed.append(entry | {"skipped": "not installed"})
                    continue
                except OSError as exc:
                    listed.append(entry | {"skipped": f"did not start: {exc.strerror}"})
                    continue
                made = Path(work) / item.produces if item.produces else output
                if not made.exists():
                    listed.append(entry | {"skipped": f"{item.produces} not written",
                                           "exit_status": rc, "timed_out": timed_out,
                                           "stderr": error})  # fmt: skip
                    continue
                if item.keep_xid_lines:
                    text = made.read_bytes().decode(errors="replace")
                    made.write_text("".join(line + "\n" for line in nvidia_smi.xid_lines(text)))
                data, cut = _sized(made, cap)
                entry |= {"exit_status": rc, "timed_out": timed_out, "stderr": error}
        left -= len(data)
        members.append((item.name, data))
        entry |= {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "truncated": cut}
        listed.append(entry)
    manifest = {"node": node, "created": stamp, "max_bytes": max_bytes, "timeout_s": timeout_s,
                "members": listed}  # fmt: skip
    members.append(("manifest.json", json.dumps(manifest, indent=2).encode()))
    bundle = Path(out_dir) / f"{top}.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), int(now), 0o600
            tar.addfile(info, io.BytesIO(data))
    return bundle, manifest
