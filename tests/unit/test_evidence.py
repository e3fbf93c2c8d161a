"""The evidence bundle (kiln_node.evidence) collected on stand-in commands: programs on
PATH that print the recorded outputs of tests/fixtures/gpu (an H100 VM's nvidia-smi and
kernel log, kiln-health's JSON, DCGM's diagnostic JSON), and the whole manifest read
back from the tarball."""

import hashlib
import json
import os
import tarfile
from pathlib import Path

import pytest

from kiln_node import evidence

GPU = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
H100 = GPU / "h100-80gb-hbm3-vm"
XID = (
    "[ 8012.345678] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus."
)
SERIALS = (
    "index, pci.bus_id, serial, uuid, vbios_version\n"
    "0, 00000000:00:06.0, 1652524086972, GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70, 96.00.DA.00.0C\n"
)
NOW = 1_795_000_000.0


def stand_in(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A PATH of stand-ins only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "dmesg.txt").write_text((H100 / "dmesg-nvrm.txt").read_text() + XID + "\n")
    (tmp_path / "serials.csv").write_text(SERIALS)
    stand_in(
        bin_dir,
        "nvidia-smi",
        f'case "$1" in -q) /bin/cat {H100}/nvidia-smi-q.xml;; '
        f"*) /bin/cat {tmp_path}/serials.csv;; esac",
    )
    stand_in(bin_dir, "nvidia-bug-report.sh", 'printf "bug report of n1" > "$2.gz"')
    stand_in(bin_dir, "dmesg", f"/bin/cat {tmp_path}/dmesg.txt")
    stand_in(bin_dir, "kiln-health", f"/bin/cat {GPU}/h100-80gb-hbm3-580.159.04/kiln-health.json")
    stand_in(bin_dir, "dcgmi", f"/bin/cat {GPU}/dcgm/diag-r2-pcie-fail.json; exit 226")
    stand_in(bin_dir, "slow", "echo started; /bin/sleep 30; echo never")
    stand_in(bin_dir, "big", "/bin/cat " + str(H100 / "nvidia-smi-q.xml"))
    monkeypatch.setenv("PATH", str(bin_dir))
    out = tmp_path / "out"
    out.mkdir()
    return tmp_path, out


def member(data: bytes, **fields) -> dict:
    return fields | {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def read_back(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_a_bundle_holds_every_output_with_its_manifest(node):
    tmp_path, out = node
    record = tmp_path / "burn-in-1.json"
    record.write_text('{"verdict": "pass"}\n')
    active = tmp_path / "health"
    (active / "2026").mkdir(parents=True)
    (active / "2026" / "run-1.json").write_text("{}")
    stand_in(tmp_path / "bin", "dmidecode", "")
    (tmp_path / "bin" / "dmidecode").chmod(0o644)  # there, but not executable
    paths = (str(record), str(tmp_path / "absent.json"), str(active))
    items = evidence.plan("kiln-health", 2, paths)
    bundle, manifest = evidence.collect("n1", items, str(out), NOW, 2**30, 600)
    assert bundle == out / "evidence-n1-20261118T110640Z.tar.gz"
    smi = (H100 / "nvidia-smi-q.xml").read_bytes()
    health = (GPU / "h100-80gb-hbm3-580.159.04" / "kiln-health.json").read_bytes()
    dcgm = (GPU / "dcgm" / "diag-r2-pcie-fail.json").read_bytes()
    ran = {"exit_status": 0, "timed_out": False, "stderr": "", "truncated": False}
    assert manifest == {
        "node": "n1",
        "created": "20261118T110640Z",
        "max_bytes": 2**30,
        "timeout_s": 600,
        "members": [
            member(
                smi, name="nvidia-smi-q.xml", command=["nvidia-smi", "-q", "-x"], path=None, **ran
            ),
            member(
                SERIALS.encode(),
                name="serials.csv",
                command=[
                    "nvidia-smi",
                    "--query-gpu=index,pci.bus_id,serial,uuid,vbios_version",
                    "--format=csv",
                ],
                path=None,
                **ran,
            ),
            member(
                b"bug report of n1",
                name="nvidia-bug-report.log.gz",
                command=["nvidia-bug-report.sh", "--output-file", "{dir}/nvidia-bug-report.log"],
                path=None,
                **ran,
            ),
            member(
                (XID + "\n").encode(), name="xid-lines.txt", command=["dmesg"], path=None, **ran
            ),
            member(
                health,
                name="kiln-health.json",
                command=["kiln-health", "--json", "--no-slurm"],
                path=None,
                **ran,
            ),
            {
                "name": "system-serial.txt",
                "command": ["dmidecode", "-s", "system-serial-number"],
                "path": None,
                "skipped": "did not start: Permission denied",
            },
            member(
                dcgm,
                name="dcgm-diag.json",
                command=["dcgmi", "diag", "-r", "2", "-j"],
                path=None,
                **(ran | {"exit_status": 226}),
            ),
            member(
                b'{"verdict": "pass"}\n',
                name="records/burn-in-1.json",
                command=None,
                path=str(record),
                exit_status=None,
                timed_out=False,
                truncated=False,
            ),
            {
                "name": "records/absent.json",
                "command": None,
                "path": str(tmp_path / "absent.json"),
                "skipped": "unreadable: No such file or directory",
            },
            member(
                b"{}",
                name="records/health/2026/run-1.json",
                command=None,
                path=str(active / "2026" / "run-1.json"),
                exit_status=None,
                timed_out=False,
                truncated=False,
            ),
        ],
    }
    inside = read_back(bundle)
    top = "evidence-n1-20261118T110640Z"
    assert json.loads(inside.pop(f"{top}/manifest.json")) == manifest
    assert {
        name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in inside.items()
    } == {
        f"{top}/{m['name']}": (m["size"], m["sha256"]) for m in manifest["members"] if "size" in m
    }


def test_a_bundle_is_bounded_in_size_and_in_time(node):
    _, out = node
    smi = (H100 / "nvidia-smi-q.xml").read_bytes()
    items = [
        evidence.Item("big.xml", ("big",), max_bytes=1000),
        evidence.Item("rest.xml", ("big",)),
        evidence.Item("more.xml", ("big",)),
    ]
    _, manifest = evidence.collect("n1", items, str(out), NOW, 1500, 60)
    ran = {"exit_status": 0, "timed_out": False, "stderr": "", "truncated": True}
    assert manifest["members"] == [
        member(smi[:1000], name="big.xml", command=["big"], path=None, **ran),
        member(smi[:500], name="rest.xml", command=["big"], path=None, **ran),
        {"name": "more.xml", "command": ["big"], "path": None, "skipped": "size budget spent"},
    ]
    items = [
        evidence.Item("slow.txt", ("slow",), timeout_s=30),
        evidence.Item("after.txt", ("big",)),
    ]
    _, manifest = evidence.collect("n1", items, str(out), NOW + 1, 2**20, 1.5)
    assert manifest["members"] == [
        member(
            b"started\n",
            name="slow.txt",
            command=["slow"],
            path=None,
            exit_status=None,
            timed_out=True,
            stderr="",
            truncated=False,
        ),
        {"name": "after.txt", "command": ["big"], "path": None, "skipped": "time budget spent"},
    ]
    assert sorted(os.listdir(out)) == [
        "evidence-n1-20261118T110640Z.tar.gz",
        "evidence-n1-20261118T110641Z.tar.gz",
    ]


def test_a_command_not_installed_or_writing_no_file_is_listed_as_skipped(node):
    tmp_path, out = node
    stand_in(tmp_path / "bin", "quiet-report", "echo nothing to say >&2; exit 1")
    items = [
        evidence.Item("absent.txt", ("kiln-absent",)),
        evidence.Item("report.gz", ("quiet-report", "{dir}/report"), produces="report.gz"),
    ]
    _, manifest = evidence.collect("n1", items, str(out), NOW, 2**20, 60)
    assert manifest["members"] == [
        {
            "name": "absent.txt",
            "command": ["kiln-absent"],
            "path": None,
            "skipped": "not installed",
        },
        {
            "name": "report.gz",
            "command": ["quiet-report", "{dir}/report"],
            "path": None,
            "skipped": "report.gz not written",
            "exit_status": 1,
            "timed_out": False,
            "stderr": "nothing to say",
        },
    ]
