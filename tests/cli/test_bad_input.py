"""Every category of bad input, for every command, as one table: each gets its
documented exit code and one line naming the problem; none is an internal error, a
traceback, or a hang. (The review behind this table found 22 internal errors, 36 wrong
exit codes and 13 inputs silently accepted; each category is a row here.)

Runs `kiln.cli.main` in this process, as the `kiln` script does, to keep the table fast;
tests/cli/test_cli.py runs the real process for the same paths."""

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kiln import cli, files
from kiln.errors import ExitCode
from tests.conftest import REPO, cluster_inventory

FIXTURES = REPO / "tests" / "fixtures"
NCCL_TEXT = FIXTURES / "nccl-tests" / "all_reduce_2nodes.txt"
DUMP = FIXTURES / "topology" / "dgx-ndr-sharp.ibnetdiscover"
BINARY = bytes(range(256)) * 4  # no UTF-8 text starts with 0x80..0xff runs like this
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
)
VAULT = "$ANSIBLE_VAULT;1.1;AES256\n61626364656667686970\n"


class Hung(BaseException):
    """Kiln did not answer in time (a read that waits forever): no handler catches it."""


def _hung(signum, frame):
    raise Hung("kiln did not return within 30 s")


def kiln(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run `kiln ARGV` as the script does; its exit code, stdout and stderr."""
    previous = signal.getsignal(signal.SIGTERM)
    previous_alarm = signal.signal(signal.SIGALRM, _hung)
    old_argv = sys.argv
    sys.argv = ["kiln", *argv]
    signal.alarm(30)
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.alarm(0)
        sys.argv = old_argv
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGALRM, previous_alarm)
    out, err = capsys.readouterr()
    return code, out, err


# --- what each row writes ----------------------------------------------------------------


def inventory(tmp: Path, hosts=None, files: dict | None = None, mode: int | None = None) -> Path:
    """A valid two-node inventory, with `files` ({relative path: text, bytes or data})."""
    directory = tmp / "inv"
    directory.mkdir(exist_ok=True)
    hosts = cluster_inventory() if hosts is None else hosts
    if isinstance(hosts, bytes):
        (directory / "hosts.yml").write_bytes(hosts)
    else:
        (directory / "hosts.yml").write_text(
            hosts if isinstance(hosts, str) else yaml.safe_dump(hosts)
        )
    for rel, data in (files or {}).items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        if mode is not None:
            path.chmod(mode)
    return directory


def check(**kwargs) -> Callable[[Path], list[str]]:
    return lambda tmp: ["inventory", "check", "-i", str(inventory(tmp, **kwargs))]


def all_vars(data) -> Callable[[Path], list[str]]:
    return check(files={"group_vars/all.yml": data})


def hosts_text(text: str) -> Callable[[Path], list[str]]:
    return check(hosts=text)


def unsafe_host(name: str) -> Callable[[Path], list[str]]:
    return check(hosts=cluster_inventory(compute=(name,)))


def provision(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["provision", "-i", str(inventory(tmp)), *options]


def drift(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["drift", "-i", str(inventory(tmp)), *options]


HALF = {"rollout_max_unavailable": "half"}


def rollout(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["rollout", "-i", str(inventory(tmp)), *options]


def finished_rollout(tmp: Path) -> str:
    """A finished rollout's record in the state dir the row uses; its id."""
    from kiln.rollout import progress

    done = progress.Record(
        id="20261127-000000-rollout-0001",
        inventory=str(inventory(tmp)),
        started="2026-11-27T00:00:00+00:00",
        options=progress.Options(nodes=["gpu001", "gpu002"]),
        status=progress.FINISHED,
    )
    os.environ["KILN_STATE_DIR"] = str(tmp / "state")  # the row's (monkeypatched) state dir
    progress.save(done)
    return done.id


ROLLOUT_ID = "20261127-000000-rollout-0002"


def stray_rollout(data: object) -> Callable[[Path], list[str]]:
    """`kiln rollout --resume ID` of a record written by hand or broken: bytes as they
    are, a mapping as JSON, "fifo" a FIFO in its place."""

    def setup(tmp: Path) -> list[str]:
        os.environ["KILN_STATE_DIR"] = str(tmp / "state")  # the row's (monkeypatched) one
        path = tmp / "state" / "rollouts" / f"{ROLLOUT_ID}.json"
        path.parent.mkdir(parents=True)
        if data == "fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(as_bytes(data))
        return rollout("--resume", ROLLOUT_ID)(tmp)

    return setup


def running_rollout(tmp: Path, **change) -> dict:
    return {
        "id": ROLLOUT_ID,
        "inventory": str(tmp / "inv"),
        "started": "2026-11-27T00:00:00+00:00",
        "options": {"nodes": ["gpu001"]},
        "status": "running",
        **change,
    }


ROLLOUT_FILE = f"{{tmp}}/state/rollouts/{ROLLOUT_ID}.json"
NOT_A_ROLLOUT = f"kiln: error: {ROLLOUT_FILE}: not a rollout record Kiln can read"

PROMETHEUS_URL = (
    "expected Prometheus's address, e.g. http://ctl1:9090 (http or https, a host, an "
    "optional port and path)"
)


def validate(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["validate", "-i", str(inventory(tmp)), *options]


def burn_in(*options: str) -> Callable[[Path], list[str]]:
    given = ["--duration", "1h", *options] if "--duration" not in options else list(options)
    return lambda tmp: ["burn-in", "-i", str(inventory(tmp)), *given]


def burn_in_profile(text: str) -> Callable[[Path], list[str]]:
    """`kiln burn-in --profile p.yaml` of a profile file holding TEXT."""
    return lambda tmp: [*burn_in()(tmp), "--profile", str(a_file("p.yaml", text)(tmp))]


ACCOUNTING = {"group_vars/all.yml": {"slurm_accounting_enabled": True}}
GOOD_DUMP = {
    "kiln_accounting": 1,
    "associations": "Cluster - 'old':Fairshare=1:QOS='normal'\nParent - 'root'\n",
    "qos": [{"Name": "normal", "Priority": "0"}],
}


def accounting_load(dump: str | bytes | dict, files=ACCOUNTING) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        text = json.dumps(dump) if isinstance(dump, dict) else dump
        path = a_file("old.json", text)(tmp)
        return ["accounting", "load", "-i", str(inventory(tmp, files=files)), str(path)]

    return setup


def a_file(name: str, data: str | bytes) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        return path

    return write


def with_file(name: str, data, argv: Callable[[str], list[str]]) -> Callable[[Path], list[str]]:
    return lambda tmp: argv(str(a_file(name, data)(tmp)))


def with_report(change: Callable[[dict], object]) -> Callable[[Path], list[str]]:
    """A kept validation report (written by `kiln judge`), then changed by hand."""

    def setup(tmp: Path) -> list[str]:
        report = {
            "id": "20261123-120000-abcd",
            "started": "2026-11-23T12:00:00+00:00",
            "inventory": "inv",
            "profile": None,
            "suites": ["storage"],
            "nodes": ["gpu001"],
            "judgements": [
                {
                    "node": "gpu001",
                    "test": "storage.seq_read",
                    "subject": "/shared",
                    "value": 100.0,
                    "unit": "MB/s",
                    "verdict": "pass",
                    "reason": "ok",
                    "threshold": None,
                }
            ],
            "node_verdicts": {"gpu001": {"verdict": "pass", "reasons": []}},
            "curves": [],
            "notes": [],
            "actions": {"drain": {}, "resume": [], "left": {}},
            "runs": [],
            "finished": "2026-11-23T12:01:00+00:00",
        }
        data = change(report) or report
        folder = tmp / "state" / "validations" / report["id"]
        folder.mkdir(parents=True)
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        (folder / "report.json").write_bytes(body)
        return ["report", "show", "latest"]

    return setup


def with_run(
    record: object = None, event: object = None, events: list[dict] | None = None
) -> Callable[[Path], list[str]]:
    """A kept ansible run: its record, and one job event (or EVENTS); bytes are written
    as they are."""

    def setup(tmp: Path) -> list[str]:
        run = "20261123-120000-site-abcd"
        folder = tmp / "state" / "runs" / run
        folder_of_events = folder / "artifacts" / "ansible" / "job_events"
        folder_of_events.mkdir(parents=True)
        good = {
            "run": run,
            "playbook": "site.yml",
            "inventory": "inv",
            "kiln_version": "0",
            "started": "2026-11-23T12:00:00+00:00",
            "status": "successful",
        }
        kept = record if record is not None else good
        (folder / "kiln.json").write_bytes(as_bytes(kept))
        body = event if event is not None else {"counter": 1, "event": "playbook_on_start"}
        for number, each in enumerate(events or [body], 1):
            (folder_of_events / f"{number}-x.json").write_bytes(as_bytes(each))
        return ["runs", "show", run]

    return setup


def as_bytes(data: object) -> bytes:
    return data if isinstance(data, bytes) else json.dumps(data).encode()


RUN_DIR = "{tmp}/state/runs/20261123-120000-site-abcd"


def run_with_irregular(kind: str, name: str) -> Callable[[Path], list[str]]:
    """A kept run whose record (kiln.json) or event file NAME is a FIFO, /dev/zero (a
    link to it: an event file a mistake or an attacker put there) or a directory."""

    def setup(tmp: Path) -> list[str]:
        argv = with_run()(tmp)
        path = Path(RUN_DIR.format(tmp=tmp)) / name
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "device":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()
        return argv

    return setup


DEEP = b"[" * 100_000 + b"]" * 100_000  # past Python's recursion limit
DIGITS = b'{"counter": ' + b"1" * 5000 + b', "event": "playbook_on_start"}'


def slowest_of(**data) -> Callable[[Path], list[str]]:
    """`kiln runs show --slowest` of a run whose one host result has these fields."""
    event = {
        "counter": 1,
        "event": "runner_on_ok",
        "event_data": {
            "host": "gpu001",
            "task": "Install",
            "task_uuid": "0242ac11-0002-0001",
            "start": "2026-11-23T12:00:00+00:00",
            "end": "2026-11-23T12:00:05+00:00",
            "duration": 5.0,
            **data,
        },
    }
    return lambda tmp: [*with_run(event=event)(tmp), "--slowest", "3"]


EVENT_FILE = "{tmp}/state/runs/20261123-120000-site-abcd/artifacts/ansible/job_events/1-x.json"


def profile(text: str | bytes) -> Callable[[Path], list[str]]:
    return with_file(
        "p.yaml", text, lambda p: ["judge", "nccl-tests", str(NCCL_TEXT), "--profile", p]
    )


def validate_profile(text: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [
        "validate",
        "-i",
        str(inventory(tmp)),
        "--profile",
        str(a_file("p.yaml", text)(tmp)),
    ]


def compare_reports(change: Callable[[dict], object]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        with_report(change)(tmp)
        return ["report", "compare", "latest", "latest"]

    return setup


def report_text(old: str, new: str) -> Callable[[dict], bytes]:
    """A report whose JSON text is changed by hand (JSON has no Infinity or NaN)."""
    return lambda report: json.dumps(report).replace(old, new).encode()


def with_name_map(path: str) -> list[str]:
    return ["topology", "generate", "--from", "ibnetdiscover", str(DUMP), "--node-name-map", path]


# The fixture's preamble and footer, every result row taken out.
NCCL_HEADER_AND_FOOTER = "".join(
    line for line in NCCL_TEXT.read_text().splitlines(keepends=True) if line[:1] != " "
)


def nccl_with(old: str, new: str) -> Callable[[Path], list[str]]:
    text = NCCL_TEXT.read_text().replace(old, new)
    return with_file("nccl.txt", text, lambda p: ["judge", "nccl-tests", p])


def irregular(kind: str, name: str | None = None) -> Callable[[Path], Path]:
    """A path that is not a regular file: a FIFO (nobody writes to it: a read would wait
    forever), an endless device, a directory, or a sparse file over Kiln's read limit."""

    def make(tmp: Path) -> Path:
        if kind == "device":
            return Path("/dev/zero")
        path = tmp / (name or kind)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        else:
            with path.open("wb") as out:
                out.truncate(files.MAX_INPUT_BYTES + 1)
        return path

    return make


def given(kind: str, argv: Callable[[str], list[str]]) -> Callable[[Path], list[str]]:
    return lambda tmp: argv(str(irregular(kind)(tmp)))


def inventory_with_fifo(rel: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        directory = inventory(tmp)
        (directory / rel).parent.mkdir(exist_ok=True)
        (directory / rel).unlink(missing_ok=True)
        os.mkfifo(directory / rel)
        return ["inventory", "check", "-i", str(directory)]

    return setup


def not_regular(path: str, kind: str) -> str:
    return f"kiln: error: {path}: cannot read: {kind}, not a regular file"


def judge_file(path: str) -> list[str]:
    return ["judge", "nccl-tests", path]


def from_dump(path: str) -> list[str]:
    return ["topology", "generate", "--from", "ibnetdiscover", path]


def generate_into(path: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [*from_dump(str(DUMP)), "-o", path.format(tmp=tmp)]


# --- the table ---------------------------------------------------------------------------

BAD = ExitCode.BAD_INPUT
ARABIC = "\u0660\u0660\u0661-\u0660\u0660\u0662"  # 001-002 in Arabic-Indic digits
# A digest of nothing Kiln downloads: the wrong sha256 of a real-looking value.
WRONG_SHA = "d8f9a6d443303de93238800628107e0e10181bd4def8b53d52b9999ca92bc0fc"
SHA = "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae"
ENROOT = {"enroot_version": "3.5.0", "enroot_sha256": SHA, "enroot_caps": False}
CUDA_REPO = {
    "nvidia_driver_source": "cuda-repo",
    "nvidia_driver_cuda_repo_key_sha256": WRONG_SHA,
}
ALL = "group_vars/all.yml"
COMPUTE = "gpu[001-002]"  # the settings checked per host name the hosts
WORD = "must be one word of printable ASCII: no spaces, line breaks, '\"', '#' or '\\'"
AUTOFS_WORD = (
    "must be one word of printable ASCII: no spaces, line breaks or '\"', and a '\\' only "
    "before another character"
)
ONE_LINE = "must be one line: no line breaks or other control characters, no '\\' at the end"
URL = (
    "expected a URL (http://host:3142/...) of the characters URLs allow: no spaces, quotes or "
    "line breaks"
)
NAME = "may hold only letters, digits, '.', '_' and '-'"
ENROOT_VALUE = (
    "may hold only letters, digits, spaces and ._/+@%:,=-, and $(id -u), $(id -g) and "
    "${VARIABLE} (enroot expands it in a shell)"
)
PATH = (
    "expected an absolute path of letters, digits and . _ + - /, with no '.' or '..' part, no "
    "'//' and no '/' at the end"
)
DOWNLOAD_URL = (
    "expected an http, https, ftp or file URL of the characters URLs allow (no spaces, quotes "
    "or line breaks), with a host (but file:) and no '.' or '..' in its path"
)
BASE_URL = f"{DOWNLOAD_URL}, nor '?' or '#' (Kiln adds a file name to it)"
CALENDAR = (
    "must be a systemd OnCalendar expression on one line, of letters, digits, spaces and "
    "* . , : ~ / _ + @ -"
)
PACKAGE = "is not a Debian package name (lower-case letters, digits and + . -)"
HPCX = {"hpcx_version": "2.22.1", "hpcx_sha256": SHA}
# (label, group_vars/all.yml, where the error says it is, the rest of the line)
CONFIG_VALUES = [
    (
        "apt-proxy-quote",
        {"base_apt_proxy": 'http://proxy:3142";\nAPT::Update::Pre-Invoke {"id"};'},
        ALL,
        'base_apt_proxy \'http://proxy:3142";\\nAPT::Update::Pre-Invoke {"id"};\': ' + URL,
    ),
    (
        "cuda-repo-url-line",
        {**CUDA_REPO, "nvidia_driver_cuda_repo_url": "https://mirror/cuda/\nTrusted: yes"},
        COMPUTE,
        f"nvidia_driver_cuda_repo_url 'https://mirror/cuda/\\nTrusted: yes': {URL} (apt's "
        "sources hold it)",
    ),
    (
        "partition-max-time-line",
        {"slurm_partitions": [{"name": "batch", "max_time": "1:00:00\nPrologSlurmctld=/x"}]},
        ALL,
        "slurm_partitions: partition batch: max_time '1:00:00\\nPrologSlurmctld=/x': expected "
        "INFINITE, minutes (60), or [days-]hours:minutes:seconds (1-00:00:00)",
    ),
    (
        "partition-extra-line",
        {
            "slurm_partitions": [
                {"name": "batch", "extra": {"OverSubscribe": "NO\nPrologSlurmctld=/x"}}
            ]
        },
        ALL,
        f"slurm_partitions: partition batch: extra: OverSubscribe 'NO\\nPrologSlurmctld=/x' {WORD}",
    ),
    (
        "partition-name-space",
        {"slurm_partitions": [{"name": "batch queue"}]},
        ALL,
        f"slurm_partitions: partition name 'batch queue' {NAME}",
    ),
    (
        "slurm-override-space",
        {"slurm_conf_overrides": {"Prolog": "/x PrologSlurmctld=/tmp/x"}},
        ALL,
        f"slurm_conf_overrides: slurm.conf: Prolog '/x PrologSlurmctld=/tmp/x' {WORD}",
    ),
    (
        "cgroup-conf-line",
        {"slurm_cgroup_conf": {"ConstrainCores": "yes\nCgroupPlugin=x"}},
        ALL,
        f"slurm_cgroup_conf: cgroup.conf: ConstrainCores 'yes\\nCgroupPlugin=x' {WORD}",
    ),
    (
        "health-node-state-line",
        {"slurm_health_node_state": "ANY\nPrologSlurmctld=/x"},
        ALL,
        f"slurm_health_node_state: slurm.conf: HealthCheckNodeState 'ANY\\nPrologSlurmctld=/x' "
        f"{WORD}",
    ),
    (
        "prolog-extra-line",
        {"slurm_prolog_extra": ["/etc/slurm/p\nPrologSlurmctld=/x"]},
        ALL,
        f"slurm_prolog_extra: Prolog '/etc/slurm/p\\nPrologSlurmctld=/x' {WORD}",
    ),
    (
        "epilog-extra-relative",
        {"slurm_epilog_extra": ["clean-up"]},
        ALL,
        "slurm_epilog_extra: Epilog 'clean-up': expected one absolute path (slurmd runs it "
        "with no PATH)",
    ),
    (
        "dbd-password-line",  # a secret: the message never holds it
        {"slurm_dbd_password": "s3cret\nPluginDir=/tmp"},
        ALL,
        f"slurm_dbd_password {WORD} (slurmdbd.conf's StoragePass)",
    ),
    (
        "shape-feature-hostlist",
        {"slurm_node_shape": {"CPUs": 4, "RealMemory": 8000, "Features": ["ib,evil[1-9]"]}},
        ALL,
        f"slurm_node_shape: shape feature 'ib,evil[1-9]' {NAME}",
    ),
    (
        "enroot-path-subshell",
        {**ENROOT, "enroot_runtime_path": "/e/$(reboot)"},
        COMPUTE,
        "enroot_runtime_path '/e/$(reboot)': expected an absolute path (or one from "
        "${VARIABLE}) of letters, digits and ._/+@%:,=- with no '..', which may use "
        "$(id -u), $(id -g) and ${VARIABLE} (enroot "
        "expands it in a shell)",
    ),
    (
        "enroot-extra-config-line",
        {**ENROOT, "enroot_extra_config": {"ENROOT_LOGIN_SHELL": "/bin/sh\nrm"}},
        COMPUTE,
        f"enroot_extra_config: ENROOT_LOGIN_SHELL '/bin/sh\\nrm': {ENROOT_VALUE}",
    ),
    (
        "driver-module-option-line",  # modprobe runs an `install` line as root
        {"nvidia_driver_module_options": {"NVreg_X": "1\ninstall nvidia /bin/sh -c id"}},
        COMPUTE,
        f"nvidia_driver_module_options: NVreg_X '1\\ninstall nvidia /bin/sh -c id' {WORD}",
    ),
    (
        "driver-module-option-name",
        {"nvidia_driver_module_options": {"NVreg_X install nvidia id": 1}},
        COMPUTE,
        "nvidia_driver_module_options: 'NVreg_X install nvidia id' is not a module parameter "
        "name (letters, digits and '_')",
    ),
    (
        "nccl-ld-preload",
        {"nccl_env_overrides": {"LD_PRELOAD": "/tmp/x.so"}},
        ALL,
        "nccl_env_overrides: LD_PRELOAD is not a setting of NCCL or of a library it loads "
        "(allowed: NCCL_*, FI_*, OFI_NCCL_*, UCX_*, SHARP_*, RDMAV_*, MLX5_*, IBV_*, CUDA_*; "
        "not CUDA_INJECTION32_PATH, CUDA_INJECTION64_PATH)",
    ),
    (
        "ntp-server-line",
        {"base_ntp_servers": ["ntp1\ninclude /tmp/x"]},
        ALL,
        f"base_ntp_servers 'ntp1\\ninclude /tmp/x': {WORD}",
    ),
    (
        "limits-space",
        {"base_limits": [{"domain": "*", "type": "-", "item": "nofile", "value": "1 #"}]},
        ALL,
        f"base_limits value '1 #': {WORD}",
    ),
    (
        "sysctl-line",
        {"base_sysctl": {"vm.x": "1\nkernel.core_pattern = |/tmp/x"}},
        ALL,
        f"base_sysctl vm.x '1\\nkernel.core_pattern = |/tmp/x': {ONE_LINE}",
    ),
    (
        "systemd-limit-line",
        {"base_systemd_limits": {"DefaultLimitNOFILE": "1\nExecStartPre=/x"}},
        ALL,
        f"base_systemd_limits DefaultLimitNOFILE '1\\nExecStartPre=/x': {ONE_LINE}",
    ),
    (
        "autofs-source-line",
        {
            "autofs_mounts": [
                {"name": "s", "path": "/s", "type": "nfs", "source": "nas:/s\n/x -a b:/"}
            ]
        },
        ALL,
        f"autofs_mounts: mount s: source 'nas:/s\\n/x -a b:/' {AUTOFS_WORD}",
    ),
    (
        "autofs-default-option",
        {"autofs_default_options": {"nfs": ["hard program:/tmp/x"]}},
        ALL,
        f"autofs_default_options nfs: 'hard program:/tmp/x' {AUTOFS_WORD}",
    ),
    (
        "hpcx-root-dot-dot",
        {**HPCX, "hpcx_root": "/opt/hpcx/../../etc"},
        COMPUTE,
        f"hpcx_root '/opt/hpcx/../../etc': {PATH}",
    ),
]
# Every role setting that lands in a file or a command line, by its kind
# (kiln.setting_kinds): (label, group_vars/all.yml, the line after "group_vars/all.yml: ")
ROLE_VALUES = [
    (
        "grafana-suite-line",  # apt would trust the repository unsigned
        {"monitoring_grafana_repository_suite": "stable\nTrusted: yes"},
        f"monitoring_grafana_repository_suite 'stable\\nTrusted: yes': {WORD}",
    ),
    (
        "monitoring-version-line",  # another apt preferences stanza
        {"monitoring_versions": {"prometheus": "2.53.3\n\nPackage: *\nPin: origin *"}},
        "monitoring_versions.prometheus '2.53.3\\n\\nPackage: *\\nPin: origin *': is not an apt "
        "version or glob (letters, digits and . + ~ : * ? -)",
    ),
    (
        "monitoring-version-package",
        {"monitoring_versions": {"prometheus\nPin-Priority: 1001": "2.53.3"}},
        f"monitoring_versions: key 'prometheus\\nPin-Priority: 1001' {PACKAGE}",
    ),
    (
        "metrics-dir-space",  # node_exporter's flags
        {"monitoring_metrics_dir": "/var/lib/x --web.listen-address=:9100"},
        f"monitoring_metrics_dir '/var/lib/x --web.listen-address=:9100': {PATH}",
    ),
    (
        "dashboards-dir-dot-dot",
        {"monitoring_grafana_dashboards_dir": "/var/lib/grafana/../../../etc/cron.d"},
        f"monitoring_grafana_dashboards_dir '/var/lib/grafana/../../../etc/cron.d': {PATH}",
    ),
    (
        "storage-path-relative",
        {"monitoring_storage_path": "metrics2"},
        f"monitoring_storage_path 'metrics2': {PATH}",
    ),
    (
        "retention-a-number",  # Prometheus refuses 30 at the next provision
        {"monitoring_retention_time": 30},
        "monitoring_retention_time 30: is not a Prometheus duration such as 15d, 12h or 1w2d",
    ),
    (
        "metrics-interval-negative",
        {"monitoring_metrics_interval": -30},
        "monitoring_metrics_interval -30: must be 1 or more",
    ),
    (
        "temperature-ceiling-negative",
        {"monitoring_gpu_temperature_ceiling": -5},
        "monitoring_gpu_temperature_ceiling -5: must be 1 to 150 (degrees Celsius)",
    ),
    (
        "grafana-key-url-file",
        {"monitoring_grafana_repository_key_url": "file:///etc/../root/key"},
        f"monitoring_grafana_repository_key_url 'file:///etc/../root/key': {DOWNLOAD_URL}",
    ),
    (
        "monitoring-server-outside-inventory",
        {"monitoring_servers": ["prom.example.com"]},
        "monitoring_servers: 'prom.example.com' is not a host in the inventory",
    ),
    (
        "nccl-tests-url-line",
        {"nccl_tests_base_url": "https://mirror/nccl-tests\nx"},
        f"nccl_tests_base_url 'https://mirror/nccl-tests\\nx': {BASE_URL}",
    ),
    (
        "nccl-tests-cuda-home-line",
        {"nccl_tests_cuda_home": "/usr/local/cuda\nNVCC=/tmp/x"},
        f"nccl_tests_cuda_home '/usr/local/cuda\\nNVCC=/tmp/x': {PATH}",
    ),
    (
        "nccl-tests-nccl-home-line",
        {"nccl_tests_nccl_home": "/usr\n"},
        f"nccl_tests_nccl_home '/usr\\n': {PATH}",
    ),
    (
        "nccl-tests-mpi-home-relative",
        {"nccl_tests_mpi_home": "opt/hpcx/ompi"},
        f"nccl_tests_mpi_home 'opt/hpcx/ompi': {PATH}",
    ),
    (
        "imex-domain-line",
        {"nvidia_driver_imex_domain": "rack1\n10.0.0.99"},
        f"nvidia_driver_imex_domain 'rack1\\n10.0.0.99': {NAME}",
    ),
    (
        "imex-domain-path",
        {"nvidia_driver_imex_domain": "../../etc/nvidia-imex"},
        f"nvidia_driver_imex_domain '../../etc/nvidia-imex': {NAME}",
    ),
    (
        "imex-address-name",
        {"nvidia_driver_imex_address": "gpu001.cluster"},
        "nvidia_driver_imex_address 'gpu001.cluster': is not an IP address (10.0.0.1, fd00::1)",
    ),
    (
        "imex-address-line",
        {"nvidia_driver_imex_address": "10.0.0.1\n10.0.0.99"},
        "nvidia_driver_imex_address '10.0.0.1\\n10.0.0.99': is not an IP address (10.0.0.1, "
        "fd00::1)",
    ),
    (
        "cuda-key-url-space",
        {"nvidia_driver_cuda_repo_key_url": "https://mirror/key.pub -o /etc/passwd"},
        f"nvidia_driver_cuda_repo_key_url 'https://mirror/key.pub -o /etc/passwd': {DOWNLOAD_URL}",
    ),
    (
        "reboot-timeout-zero",
        {"nvidia_driver_reboot_timeout": 0},
        "nvidia_driver_reboot_timeout 0: must be 1 or more",
    ),
    (
        "enroot-url-dot-dot",
        {"enroot_base_url": "file:///../../etc"},
        f"enroot_base_url 'file:///../../etc': {BASE_URL}",
    ),
    (
        "enroot-url-encoded-dot-dot",
        {"enroot_base_url": "https://mirror/enroot/%2e%2e/%2E%2E/x"},
        f"enroot_base_url 'https://mirror/enroot/%2e%2e/%2E%2E/x': {BASE_URL}",
    ),
    (
        "pyxis-url-query",
        {"pyxis_base_url": "https://mirror/pyxis?x="},
        f"pyxis_base_url 'https://mirror/pyxis?x=': {BASE_URL}",
    ),
    (
        "hpcx-url-no-host",
        {"hpcx_base_url": "https:///hpc-x"},
        f"hpcx_base_url 'https:///hpc-x': {BASE_URL}",
    ),
    (
        "package-an-option",  # apt-get reads it as an option: a command run as root
        {"base_extra_packages": ["htop", "-oDpkg::Pre-Invoke::=touch /tmp/x"]},
        f"base_extra_packages[1] '-oDpkg::Pre-Invoke::=touch /tmp/x': {PACKAGE}",
    ),
    (
        "enroot-package-space",
        {"enroot_extra_packages": ["pigz squashfuse"]},
        f"enroot_extra_packages[0] 'pigz squashfuse': {PACKAGE}",
    ),
    (
        "mount-check-timeout-negative",
        {"autofs_check_timeout": -1},
        "autofs_check_timeout -1: must be 1 or more",
    ),
    (
        "gluster-volume-name-space",  # `gluster volume create NAME ...`
        {"glusterfs_server_volumes": [{"name": "shared force", "type": "auto"}]},
        f"glusterfs_server_volumes[0].name 'shared force': {NAME}",
    ),
    (
        "gluster-brick-root-dot-dot",
        {"glusterfs_server_brick_root": "/srv/../etc"},
        f"glusterfs_server_brick_root '/srv/../etc': {PATH}",
    ),
    (
        "health-schedule-semicolon",
        {"health_active_schedule": "daily;ExecStartPre=/bin/sh"},
        f"health_active_schedule 'daily;ExecStartPre=/bin/sh': {CALENDAR} (such as "
        '"Sun *-*-* 03:00:00")',
    ),
    (
        "health-minutes-zero",
        {"health_active_minutes": 0},
        "health_active_minutes 0: must be 1 or more",
    ),
    (
        "health-gpus-negative",
        {"health_gpus": -8},
        "health_gpus -8: must be 0 or more",
    ),
    (
        "health-reservation-space",
        {"health_active_reservation": "kiln maint"},
        f"health_active_reservation 'kiln maint': {NAME}",
    ),
    (
        "health-results-dir-relative",
        {"health_active_results_dir": "kiln/health"},
        f"health_active_results_dir 'kiln/health': {PATH}",
    ),
    (
        "health-metrics-dir-trailing-slash",
        {"health_metrics_dir": "/var/lib/prometheus/node-exporter/"},
        f"health_metrics_dir '/var/lib/prometheus/node-exporter/': {PATH}",
    ),
    (
        "slurm-port-past-65535",
        {"slurm_controller_port": 70000},
        "slurm_controller_port 70000: not a port (1-65535)",
    ),
    (
        "slurm-health-interval-negative",
        {"slurm_health_interval": -300},
        "slurm_health_interval -300: must be 0 or more",
    ),
    (
        "validate-python-space",
        {"validate_torch_python": "python3 -c import os"},
        "validate_torch_python 'python3 -c import os': expected a command (python3) or its "
        "absolute path: letters, digits and . _ + - /",
    ),
    (
        "validate-probe-user",
        {"validate_probe_user": "root;id"},
        "validate_probe_user 'root;id': is not an account name (lower-case letters, digits, "
        "'_' and '-')",
    ),
    (
        "validate-image-option",
        {"validate_nccl_tests_image": "--container-mounts=/:/host"},
        "validate_nccl_tests_image '--container-mounts=/:/host': must be one word of printable "
        "ASCII, not starting with '-'",
    ),
    (
        "validate-scratch-dot-dot",
        {"validate_scratch_paths": ["/scratch", "/scratch/../etc"]},
        f"validate_scratch_paths[1] '/scratch/../etc': {PATH}",
    ),
]
TRAILING_NEWLINES = [
    ("cluster-name", {"slurm_cluster_name": "kiln\n"}, ALL, f"slurm_cluster_name 'kiln\\n' {NAME}"),
    (
        "partition-name",
        {"slurm_partitions": [{"name": "batch\n"}]},
        ALL,
        f"slurm_partitions: partition name 'batch\\n' {NAME}",
    ),
    (
        "mount-name",
        {"autofs_mounts": [{"name": "data\n", "path": "/d", "type": "nfs", "source": "nas:/d"}]},
        ALL,
        "autofs_mounts[0]: name 'data\\n' must be lower-case letters, digits, - "
        "or _ (it names files)",
    ),
    (
        "nccl-key",
        {"nccl_env_overrides": {"NCCL_DEBUG\n": "INFO"}},
        ALL,
        "nccl_env_overrides: 'NCCL_DEBUG\\n' is not an environment variable name",
    ),
    (
        "enroot-version",
        {**ENROOT, "enroot_version": "3.5.0\n"},
        COMPUTE,
        "enroot_version '3.5.0\\n': expected a release such as 4.1.2",
    ),
    (
        "enroot-sha256",
        {**ENROOT, "enroot_sha256": SHA + "\n"},
        COMPUTE,
        f"enroot_sha256 {SHA + chr(10)!r} is not a sha256 (64 hex digits, lower case)"
        ""
        "; `kiln inventory pins -i {tmp}/inv --write` fetches it and fills it in",
    ),
    (
        "enroot-hook",
        {**ENROOT, "enroot_extra_hooks": ["50-slurm-pmi.sh\n"]},
        COMPUTE,
        "enroot_extra_hooks: '50-slurm-pmi.sh\\n' is not a hook file name (NAME.sh)",
    ),
    (
        "enroot-setting",
        {**ENROOT, "enroot_extra_config": {"ENROOT_MAX_PROCESSORS\n": 1}},
        COMPUTE,
        "enroot_extra_config: 'ENROOT_MAX_PROCESSORS\\n' is not an ENROOT_ setting",
    ),
    (
        "pyxis-version",
        {"pyxis_version": "0.20.0\n", "pyxis_sha256": SHA},
        "ctl1,gpu[001-002]",
        "pyxis_version '0.20.0\\n': expected a release such as 0.24.0",
    ),
    (
        "nccl-tests-version",
        {"nccl_tests_version": "2.19.6\n", "nccl_tests_sha256": SHA},
        COMPUTE,
        "nccl_tests_version '2.19.6\\n': expected a release such as 2.19.6",
    ),
    (
        "pyxis-runtime-path",
        {"pyxis_version": "0.20.0", "pyxis_sha256": SHA, "pyxis_runtime_path": "/run/pyxis\n"},
        "ctl1,gpu[001-002]",
        f"pyxis_runtime_path '/run/pyxis\\n': {PATH}",
    ),
    (
        "hpcx-version",
        {"hpcx_version": "2.22.1\n", "hpcx_sha256": SHA},
        COMPUTE,
        "hpcx_version '2.22.1\\n': expected a release such as 2.22.1",
    ),
    (
        "hpcx-root",
        {"hpcx_version": "2.22.1", "hpcx_sha256": SHA, "hpcx_root": "/opt/hpcx\n"},
        COMPUTE,
        f"hpcx_root '/opt/hpcx\\n': {PATH}",
    ),
    (
        "driver-version",
        {"nvidia_driver_version": "580.95.05\n"},
        COMPUTE,
        "nvidia_driver_version '580.95.05\\n' is neither an exact version (580.95.05) nor a "
        "branch (580)",
    ),
    (
        "grafana-key-sha256",
        {"monitoring_grafana": True, "monitoring_grafana_repository_key_sha256": "0" * 63},
        "ctl1,gpu[001-002]",
        f"monitoring_grafana_repository_key_sha256 {'0' * 63!r} is not a sha256 (64 hex "
        "digits, lower case)"
        "; `kiln inventory pins -i {tmp}/inv --write` fetches it and fills it in",
    ),
    (
        "cuda-key-sha256",
        {
            **CUDA_REPO,
            "nvidia_driver_cuda_repo_key_sha256": WRONG_SHA + "\n",
        },
        COMPUTE,
        "nvidia_driver_cuda_repo_key_sha256 'd8f9a6d443303de93238800628107e0e10181bd4def8b53d5"
        "2b9999ca92bc0fc\\n' is not a sha256 (64 hex digits, lower case)"
        "; `kiln inventory pins -i {tmp}/inv --write` fetches it and fills it in",
    ),
    (
        "mpi-module-path",
        {"mpi_module_path": "/opt/modulefiles\n"},
        ALL,
        f"mpi_module_path '/opt/modulefiles\\n': {PATH}",
    ),
]
CASES: list[tuple[str, Callable[[Path], list[str]], int, str]] = [
    # Inventories: the files themselves
    (
        "inv-missing",
        lambda t: ["inventory", "check", "-i", str(t / "nope")],
        BAD,
        "inventory not found",
    ),
    ("inv-empty-dir", lambda t: ["inventory", "check", "-i", str(t)], BAD, "no hosts.yml"),
    ("inv-binary-hosts", check(hosts=BINARY), BAD, "hosts.yml: not a text file"),
    (
        "inv-binary-vars",
        check(files={"group_vars/all.yml": BINARY}),
        BAD,
        "group_vars/all.yml: not a text file",
    ),
    ("inv-nul-byte", all_vars("a: \x00\n"), BAD, "character 0x00 at position 3 is not allowed"),
    ("inv-yaml-syntax", hosts_text("all: [\n"), BAD, "hosts.yml:2: YAML does not parse"),
    (
        "inv-duplicate-group",
        hosts_text("all:\n  children:\n    slurm_compute:\n    slurm_compute:\n"),
        BAD,
        "'slurm_compute' appears twice",
    ),
    ("inv-mapping-key", all_vars("{a: 1}: x\n"), BAD, "a key must be a plain value"),
    ("inv-billion-laughs", all_vars(LAUGHS), BAD, "aliases expand to over 1,000,000 values"),
    (
        "inv-recursive-alias",
        all_vars("a: &a [*a]\n"),
        BAD,
        "an alias refers to the value that contains it",
    ),
    (
        "inv-deep-nesting",
        all_vars("a: " + "[" * 20000 + "]" * 20000 + "\n"),
        BAD,
        "nested too deeply",
    ),
    (
        "inv-vault-no-password",
        check(files={"group_vars/all.yml": VAULT}),
        BAD,
        "encrypted with ansible-vault, and no vault password is configured",
    ),
    (
        "inv-ini-file",
        check(files={"extra.ini": "[slurm_compute]\ngpu003\n"}),
        BAD,
        "Kiln checks YAML inventories only",
    ),
    (
        "inv-script",
        check(files={"dynamic.py": "#!/bin/sh\n"}, mode=0o755),
        BAD,
        "Kiln checks YAML inventories only",
    ),
    (
        "inv-plugin-config",
        check(files={"aws.yml": {"plugin": "amazon.aws.aws_ec2"}}),
        BAD,
        "inventory plugin's configuration",
    ),
    ("inv-top-level-list", hosts_text("- gpu001\n"), BAD, "expected a YAML inventory"),
    (
        "inv-group-is-list",
        hosts_text("all:\n  children:\n    slurm_compute: [gpu001]\n"),
        BAD,
        "group slurm_compute must be a mapping",
    ),
    ("inv-unknown-group-key", hosts_text("all:\n  host:\n    gpu001:\n"), BAD, "unknown keys host"),
    ("inv-vars-not-mapping", all_vars("- a\n"), BAD, "expected a mapping of variables"),
    (
        "inv-group-cycle",
        hosts_text(
            "all:\n  children:\n    a:\n      children:\n        b:\n"
            "          children:\n            a:\n"
        ),
        BAD,
        "contains itself",
    ),
    # Inventories: names
    (
        "inv-integer-group",
        hosts_text("all:\n  children:\n    123:\n      hosts:\n        gpu9:\n"),
        BAD,
        "group 123 is not a string; quote it",
    ),
    (
        "inv-integer-host",
        hosts_text("all:\n  hosts:\n    5:\n"),
        BAD,
        "host 5 is not a string; quote it",
    ),
    ("inv-variable-name", all_vars("5: x\n"), BAD, "variable name 5 is not valid"),
    ("inv-variable-dash", all_vars("my-var: x\n"), BAD, "variable name 'my-var' is not valid"),
    ("inv-reversed-range", hosts_text("all:\n  hosts:\n    gpu[3:1]:\n"), BAD, "gpu[3:1]"),
    ("inv-huge-range", hosts_text("all:\n  hosts:\n    gpu[0:99999999]:\n"), BAD, "1,000,000"),
    *[
        (f"inv-host-{label}", unsafe_host(name), BAD, "names may hold only")
        for label, name in [
            ("semicolon", "gpu1;reboot"),
            ("subshell", "$(reboot)"),
            ("markup", "[/bold]"),
            ("space", "gpu 1"),
        ]
    ],
    (
        "inv-cluster-name",
        all_vars({"slurm_cluster_name": "a;b"}),
        BAD,
        "slurm_cluster_name 'a;b' may hold only",
    ),
    # Inventories: what the roles declare
    (
        "inv-no-controller",
        check(hosts={"all": {"children": {"slurm_compute": {"hosts": {"g": None}}}}}),
        BAD,
        "no slurm_controller group",
    ),
    ("inv-wrong-type", all_vars({"slurm_partitions": 5}), BAD, "slurm_partitions"),
    (
        "inv-secret-wrong-type",
        all_vars({"slurm_dbd_password": ["hunter2"]}),
        BAD,
        "slurm_dbd_password must be a string, got a list (secret) (role slurm)",
    ),
    (
        "inv-secret-url-in-error",
        all_vars({"base_apt_proxy": ["http://kiln:hunter2@proxy:3142"]}),
        BAD,
        "base_apt_proxy must be a string, got a list ['http://(secret)@proxy:3142']",
    ),
    (
        "inv-unknown-host-ref",
        all_vars({"slurm_dbd_host": "head9"}),
        BAD,
        "which is not a host in the inventory",
    ),
    (
        "inv-unknown-mount-type",
        all_vars(
            {"autofs_mounts": [{"name": "s", "path": "/s", "type": "cifs9", "source": "x:/s"}]}
        ),
        BAD,
        "autofs_mounts",
    ),
    (
        "inv-bad-munge-key",
        all_vars({"munge_key_b64": "c2hvcnQ="}),
        BAD,
        "a munge key has 32 to 1024",
    ),
    (
        "inv-driver-unknown-source",
        all_vars({"nvidia_driver_source": "nvidia.com"}),
        BAD,
        "nvidia_driver_source must be one of debian, cuda-repo, ubuntu, preinstalled, "
        "got 'nvidia.com'",
    ),
    (
        "inv-fabric-manager-inexact-version",
        all_vars(
            {
                "nvidia_driver_source": "cuda-repo",
                "nvidia_driver_cuda_repo_key_sha256": WRONG_SHA,
                "nvidia_driver_fabric_manager": "install",
                "nvidia_driver_version": "580",
            }
        ),
        BAD,
        "nvidia_driver_fabric_manager install needs an exact nvidia_driver_version (the "
        "fabric manager must equal the driver to the patch), got '580'",
    ),
    (
        "inv-cuda-repo-without-key-checksum",
        all_vars({"nvidia_driver_source": "cuda-repo"}),
        BAD,
        "nvidia_driver_source cuda-repo needs nvidia_driver_cuda_repo_key_sha256",
    ),
    (
        "inv-driver-version-unreadable",
        all_vars({"nvidia_driver_version": "latest"}),
        BAD,
        "nvidia_driver_version 'latest' is neither an exact version (580.95.05) nor a branch",
    ),
    (
        "inv-reboot-batch-unreadable",
        all_vars({"nvidia_driver_reboot_batch": "half"}),
        BAD,
        "nvidia_driver_reboot_batch 'half': expected a node count (4) or a share of the "
        "nodes (10%)",
    ),
    (
        "inv-rollout-max-unavailable-unreadable",
        all_vars({"rollout_max_unavailable": "0"}),
        BAD,
        "rollout_max_unavailable '0': expected a node count (4) or a share of the nodes (10%)",
    ),
    (
        "inv-rollout-max-unavailable-zero-count",
        all_vars({"rollout_max_unavailable": 0}),
        BAD,
        "rollout_max_unavailable '0': expected a node count (4) or a share of the nodes (10%)",
    ),
    (
        "inv-bmc-address-not-a-url",
        all_vars({"bmc_address": "ftp://bmc-c1"}),
        BAD,
        "bmc_address 'ftp://bmc-c1' is not an http(s) URL or a host name",
    ),
    (
        "inv-repair-back-after-zero",
        all_vars({"repair_back_after_s": 0}),
        BAD,
        "repair_back_after_s: 0 is not a whole number of 1 or more",
    ),
    (
        "inv-mpi-module-path-relative",
        all_vars({"mpi_module_path": "modulefiles"}),
        BAD,
        "mpi_module_path 'modulefiles': expected an absolute path of letters, digits and",
    ),
    (
        "inv-mpi-unknown-module-system",
        all_vars({"mpi_modules_system": "spack"}),
        BAD,
        "mpi_modules_system must be one of lmod, environment-modules, got 'spack' (role mpi)",
    ),
    (
        "inv-enroot-version-without-sha256",
        all_vars({"enroot_version": "3.5.0", "enroot_caps": False}),
        BAD,
        "enroot_version 3.5.0 needs enroot_sha256: the enroot package's sha256",
    ),
    (
        "inv-enroot-caps-without-its-sha256",
        all_vars(
            {
                "enroot_version": "3.5.0",
                "enroot_sha256": "f0a5b505df371643d8c1b2ae5b1c0df7f5f68c41d0334ed9c6926fb3797b55ae",
            }
        ),
        BAD,
        "enroot_version 3.5.0 with enroot_caps needs enroot_caps_sha256",
    ),
    (
        "inv-pyxis-version-without-sha256",
        all_vars({"pyxis_version": "0.20.0"}),
        BAD,
        "pyxis_version 0.20.0 needs pyxis_sha256: the source tarball's sha256",
    ),
    (
        "inv-nccl-tests-version-without-sha256",
        all_vars({"nccl_tests_version": "2.19.6"}),
        BAD,
        "kiln: error: gpu[001-002]: nccl_tests_version 2.19.6 needs nccl_tests_sha256: the "
        "source tarball's sha256 (64 hex digits)"
        "; `kiln inventory pins -i {tmp}/inv --write` fetches it and fills it in",
    ),
    (
        "inv-nccl-tests-archs-not-compute-capabilities",
        all_vars(
            {
                "nccl_tests_version": "2.19.6",
                "nccl_tests_sha256": SHA,
                "nccl_tests_cuda_archs": ["sm_90"],
            }
        ),
        BAD,
        "kiln: error: gpu[001-002]: nccl_tests_cuda_archs ['sm_90']: expected a list of compute "
        "capabilities such as ['90', '100']",
    ),
    (
        "inv-pyxis-unknown-container-scope",
        all_vars({"pyxis_container_scope": "node"}),
        BAD,
        "pyxis_container_scope must be one of job, global, got 'node' (role pyxis)",
    ),
    (
        "inv-health-timeout-past-slurmds-limit",
        all_vars({"health_timeout": 75}),
        BAD,
        "health_timeout 75: must be under 60 s, when slurmd kills its HealthCheckProgram",
    ),
    (
        "inv-health-schedule-of-two-lines",
        all_vars({"health_active_schedule": "daily\nExecStartPre=/bin/sh -c id"}),
        BAD,
        "health_active_schedule 'daily\\nExecStartPre=/bin/sh -c id': must be a systemd "
        "OnCalendar expression on one line",
    ),
    (
        "inv-validate-schedule-of-two-lines",
        all_vars({"validate_schedule": "weekly\nExecStartPre=/bin/sh -c id"}),
        BAD,
        "validate_schedule 'weekly\\nExecStartPre=/bin/sh -c id': must be a systemd "
        "OnCalendar expression on one line",
    ),
    (
        "inv-health-dcgm-level-unknown",
        all_vars({"health_dcgm_diag_level": 5}),
        BAD,
        "health_dcgm_diag_level must be one of 0, 1, 2, 3, 4, got 5 (role health)",
    ),
    (
        "inv-health-ib-port-without-rate",
        all_vars({"health_ib_ports": [{"device": "mlx5_0"}]}),
        BAD,
        "health_ib_ports: {'device': 'mlx5_0'} is not {device: mlx5_0, port: 1, rate: 400}",
    ),
    (
        "inv-monitoring-retention-not-a-duration",
        all_vars({"monitoring_retention_time": "15 days"}),
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_retention_time '15 days': is not a "
        "Prometheus duration such as 15d, 12h or 1w2d",
    ),
    (
        "inv-monitoring-scrape-target-outside-inventory",
        all_vars({"monitoring_scrape_hosts": ["ctl1", "gpu003"]}),
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_scrape_hosts: 'gpu003' is not a host in "
        "the inventory",
    ),
    (
        "inv-monitoring-gpu-source-unknown",
        all_vars({"monitoring_gpu_source": "dcgm"}),
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_gpu_source must be one of kiln, "
        "dcgm-exporter, got 'dcgm' (role monitoring)",
    ),
    (
        "inv-monitoring-dcgm-exporter-host-outside-inventory",
        all_vars(
            {
                "monitoring_gpu_source": "dcgm-exporter",
                "monitoring_dcgm_exporter_hosts": ["gpu001", "gpu009"],
            }
        ),
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_dcgm_exporter_hosts: 'gpu009' is not a "
        "host in the inventory",
    ),
    (
        "inv-monitoring-dcgm-exporter-port-not-a-port",
        all_vars({"monitoring_dcgm_exporter_port": 0}),
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_dcgm_exporter_port 0: not a port (1-65535)",
    ),
    (
        "run-monitoring-retention-not-a-duration",
        lambda t: [
            "provision",
            "-i",
            str(inventory(t, files={"group_vars/all.yml": {"monitoring_retention_time": "1.5d"}})),
        ],
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_retention_time '1.5d': is not a "
        "Prometheus duration such as 15d, 12h or 1w2d",
    ),
    (
        "run-monitoring-scrape-target-outside-inventory",
        lambda t: [
            "provision",
            "-i",
            str(inventory(t, files={"group_vars/all.yml": {"monitoring_scrape_hosts": ["db1"]}})),
        ],
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_scrape_hosts: 'db1' is not a host in "
        "the inventory",
    ),
    (
        "run-monitoring-gpu-source-unknown",
        lambda t: [
            "provision",
            "-i",
            str(inventory(t, files={"group_vars/all.yml": {"monitoring_gpu_source": "DCGM"}})),
        ],
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_gpu_source must be one of kiln, "
        "dcgm-exporter, got 'DCGM' (role monitoring)",
    ),
    (
        "new-into-a-directory-that-is-not-empty",
        lambda t: ["inventory", "new", str(inventory(t)), "--controller", "a", "--compute", "b"],
        BAD,
        "kiln: error: {tmp}/inv: not empty (--force writes over the files Kiln writes)",
    ),
    (
        "new-a-range-past-100000-hosts",
        lambda t: [
            "inventory",
            "new",
            str(t / "n"),
            "--controller",
            "a",
            "--compute",
            "g[1-100001]",
        ],
        BAD,
        "kiln: error: --compute 'g[1-100001]': more than 100,000 hosts",
    ),
    (
        "new-fewer-addresses-than-names",
        lambda t: [
            "inventory",
            "new",
            str(t / "n"),
            "--controller",
            "a",
            "--compute",
            "g[1-3]=10.0.0.[1-2]",
        ],
        BAD,
        "kiln: error: --compute 'g[1-3]=10.0.0.[1-2]': 3 names but 2 addresses",
    ),
    (
        "new-storage-of-an-unknown-kind",
        lambda t: [
            "inventory",
            "new",
            str(t / "n"),
            "--controller",
            "a",
            "--compute",
            "b",
            "--storage",
            "ceph:mon1:/",
        ],
        BAD,
        "kiln: error: --storage 'ceph:mon1:/': expected none, glusterfs or nfs:SERVER:/EXPORT",
    ),
    (
        "new-a-gpu-kiln-does-not-know",
        lambda t: [
            "inventory",
            "new",
            str(t / "n"),
            "--controller",
            "a",
            "--compute",
            "b",
            "--gpu",
            "h800",
        ],
        BAD,
        "kiln: error: --gpu 'h800': expected auto, none or one of a100, h100, h200, b200, gb200",
    ),
    (
        "pins-a-mirror-without-the-release",
        lambda t: [
            "inventory",
            "pins",
            "-i",
            str(
                inventory(
                    t,
                    files={
                        "group_vars/all.yml": {
                            "pyxis_version": "0.24.0",
                            "pyxis_base_url": "file:///nonexistent/pyxis",
                        }
                    },
                )
            ),
        ],
        BAD,
        "kiln: error: pyxis_sha256: file:///nonexistent/pyxis/v0.24.0.tar.gz: cannot fetch it "
        "([Errno 2] No such file or directory: '/nonexistent/pyxis/v0.24.0.tar.gz'); nothing "
        "written",
    ),
    (
        "inv-typo-in-a-roles-variable",
        all_vars({"hpcx_verison": "2.21"}),
        BAD,
        "kiln: error: group_vars/all.yml: hpcx_verison is not a setting of role hpcx; did you "
        "mean hpcx_version?",
    ),
    (
        "inv-misspelt-validation-profile",
        all_vars({"validate_profile": "h100-sxm-8x-ib40"}),
        BAD,
        "kiln: error: group_vars/all.yml: validate_profile: unknown profile "
        "'h100-sxm-8x-ib40'; did you mean 'h100-sxm-8x-ib400'? shipped: a100-sxm-8x, "
        "h100-sxm-8x-ib400, h100-sxm-8x-roce400, h200-sxm-8x-ib400, lab-cpu (or give a path to "
        "your own YAML file)",
    ),
    (
        "inv-sha256-of-zeros-read-as-a-number",
        check(
            files={
                "group_vars/all.yml": "nccl_tests_version: 2.19.6\nnccl_tests_sha256: "
                + "0" * 64
                + "\n"
            }
        ),
        BAD,
        "kiln: error: gpu[001-002]: nccl_tests_sha256 is int 0, not a sha256: YAML reads "
        "unquoted digits as a number; quote it, or `kiln inventory pins -i {tmp}/inv --write` "
        "fetches it and fills it in",
    ),
    (
        "inv-sha256-placeholder",
        all_vars({"pyxis_version": "0.24.0", "pyxis_sha256": "0123" * 16}),
        BAD,
        "kiln: error: ctl1,gpu[001-002]: pyxis_sha256 012301230123... is a placeholder, not the "
        "source tarball's sha256; `kiln inventory pins -i {tmp}/inv --write` fetches it and "
        "fills it in",
    ),
    (
        "inv-nccl-override-with-spaces",
        all_vars({"nccl_env_overrides": {"NCCL_DEBUG": " INFO"}}),
        BAD,
        "nccl_env_overrides: NCCL_DEBUG's value ' INFO' has a line break, a control "
        "character, or leading or trailing spaces, which NCCL would keep",
    ),
    (
        "inv-nccl-override-not-a-variable",
        all_vars({"nccl_env_overrides": {"nccl-debug": "INFO"}}),
        BAD,
        "nccl_env_overrides: 'nccl-debug' is not an environment variable name",
    ),
    (
        "inv-hpcx-version-without-sha256",
        all_vars({"hpcx_version": "2.22.1"}),
        BAD,
        "hpcx_version 2.22.1 needs hpcx_sha256: the tarball's sha256 (64 hex digits); `kiln "
        "inventory pins -i {tmp}/inv --write` fetches it and fills it in",
    ),
    (
        "inv-hpcx-url-of-another-version",
        all_vars(
            {
                "hpcx_version": "2.22.1",
                "hpcx_sha256": "1c3d5f7a9b2e4c6d8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e",
                "hpcx_url": "https://mirror/hpcx-v2.21-gcc-inbox-ubuntu24.04-cuda12-x86_64.tbz",
            }
        ),
        BAD,
        "hpcx_url 'hpcx-v2.21-gcc-inbox-ubuntu24.04-cuda12-x86_64.tbz' is not HPC-X 2.22.1",
    ),
    (
        "inv-hpcx-url-of-another-cuda",
        all_vars(
            {
                "hpcx_version": "2.22.1",
                "hpcx_sha256": "1c3d5f7a9b2e4c6d8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e",
                "hpcx_url": "https://mirror/hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda13-x86_64.tbz",
            }
        ),
        BAD,
        "hpcx_url 'hpcx-v2.22.1-gcc-inbox-ubuntu24.04-cuda13-x86_64.tbz' is built for cuda13; "
        "hpcx_cuda is 12",
    ),
    (
        "inv-ubuntu-source-without-branch",
        all_vars({"nvidia_driver_source": "ubuntu"}),
        BAD,
        "nvidia_driver_source ubuntu needs nvidia_driver_version",
    ),
    # Inventories: values that land in config files (kiln.formats), each a whole line
    *[
        (f"inv-config-{label}", all_vars(data), BAD, f"kiln: error: {where}: {message}")
        for label, data, where, message in CONFIG_VALUES
    ],
    # Inventories: every role setting that lands in a file, by its kind
    *[
        (f"inv-value-{label}", all_vars(data), BAD, f"kiln: error: {ALL}: {message}")
        for label, data, message in ROLE_VALUES
    ],
    # Inventories: every checked name and version with a trailing newline ('$' matches
    # before one; re.fullmatch does not)
    *[
        (f"inv-newline-{label}", all_vars(data), BAD, f"kiln: error: {where}: {message}")
        for label, data, where, message in TRAILING_NEWLINES
    ],
    (
        "inv-newline-host",
        unsafe_host("gpu001\n"),
        BAD,
        "kiln: error: host 'gpu001\\n': names may hold only letters, digits, '.', '_' and '-'",
    ),
    (
        "inv-newline-variable-name",
        all_vars({"base_apt_proxy\n": "http://p"}),
        BAD,
        "variable name 'base_apt_proxy\\n' is not valid",
    ),
    # provision / run options
    (
        "run-limit-no-host",
        provision("--limit", "nosuchhost"),
        BAD,
        "host pattern 'nosuchhost' matches no host",
    ),
    ("run-limit-excludes-all", provision("--limit", "!all"), BAD, "matches no host"),
    (
        "drift-limit-no-host",
        drift("--limit", "nosuchhost"),
        BAD,
        "host pattern 'nosuchhost' matches no host",
    ),
    (
        "run-tags-unknown",
        provision("--tags", "slurn"),
        BAD,
        "tags to run slurn: no task of site.yml has this tag",
    ),
    ("run-skip-tags-unknown", provision("--skip-tags", "bsae"), BAD, "tags to skip bsae: no task"),
    ("run-extravar-malformed", provision("-e", "novalue"), BAD, "expected KEY=VALUE or @FILE"),
    (
        "run-extravar-missing",
        provision("-e", "@/nonexistent/vars.yml"),
        BAD,
        "cannot read: No such file",
    ),
    (
        "run-extravar-binary",
        lambda t: ["provision", "-i", str(inventory(t)), "-e", f"@{a_file('x.yml', BINARY)(t)}"],
        BAD,
        "not a text file",
    ),
    (
        "run-extravar-list",
        lambda t: ["provision", "-i", str(inventory(t)), "-e", f"@{a_file('x.yml', '- a')(t)}"],
        BAD,
        "expected a YAML mapping",
    ),
    (
        "run-unknown-playbook",
        lambda t: ["run", "nosuch", "-i", str(inventory(t))],
        BAD,
        "no playbook 'nosuch'",
    ),
    ("run-unknown-option", lambda t: ["provision", "--frobnicate"], BAD, "No such option"),
    # rollout: refused before any host is touched
    (
        "rollout-max-unavailable-zero",
        rollout("--max-unavailable", "0"),
        BAD,
        "kiln: error: --max-unavailable '0': expected a node count (2) or a share of the compute "
        "nodes (10%), at least one node",
    ),
    (
        "rollout-max-unavailable-more-than-nodes",
        rollout("--max-unavailable", "3"),
        BAD,
        "kiln: error: --max-unavailable 3: more than the 2 compute nodes of the rollout",
    ),
    (
        "rollout-inventory-max-unavailable-bad",
        lambda t: ["rollout", "-i", str(inventory(t, files={"group_vars/all/main.yml": HALF}))],
        BAD,
        "rollout_max_unavailable 'half'",
    ),
    (
        "rollout-deadline-past",
        rollout("--deadline", "2020-01-01T00:00"),
        BAD,
        "--deadline 2020-01-01T00:00: that is in the past (",
    ),
    ("rollout-deadline-not-a-time", rollout("--deadline", "soon"), BAD, "--deadline 'soon'"),
    ("rollout-wait-not-a-duration", rollout("--wait-for-jobs", "2 days"), BAD, "'2 days'"),
    (
        "rollout-wait-and-deadline",
        rollout("--wait-for-jobs", "1h", "--deadline", "23:59"),
        BAD,
        "kiln: error: --wait-for-jobs and --deadline: give one of them",
    ),
    ("rollout-max-failures-zero", rollout("--max-failures", "0"), BAD, "--max-failures 0"),
    # Numbers past what Python or the calendar can hold: one line, never "internal error".
    (
        "rollout-max-unavailable-5000-digits",
        rollout("--max-unavailable", "9" * 5000),
        BAD,
        "kiln: error: --max-unavailable 99999999999999999999... (5000 characters): more than "
        "the 2 compute nodes of the rollout",
    ),
    (
        "rollout-inventory-max-unavailable-5000-digits",
        lambda t: [
            "rollout",
            "-i",
            str(
                inventory(
                    t, files={"group_vars/all.yml": f"rollout_max_unavailable: '{'9' * 5000}'"}
                )
            ),
        ],
        BAD,
        "rollout_max_unavailable 99999999999999999999... (5000 characters): more than the 2 "
        "compute nodes of the rollout",
    ),
    (
        "rollout-wait-past-a-year",
        rollout("--wait-for-jobs", "999999999999h"),
        BAD,
        "kiln: error: --wait-for-jobs 999999999999h: more than 365 days",
    ),
    (
        "rollout-wait-5000-digits",
        rollout("--wait-for-jobs", "9" * 5000 + "m"),
        BAD,
        "kiln: error: --wait-for-jobs 99999999999999999999... (5001 characters): more than 365 "
        "days",
    ),
    *(
        (
            f"rollout-deadline-year-9999{zone}",
            rollout("--deadline", f"9999-12-31T23:59{zone}"),
            BAD,
            f"kiln: error: --deadline 9999-12-31T23:59{zone}: more than 365 days away (leave "
            "--deadline out to wait for the jobs however long they run)",
        )
        for zone in ("", "-12:00", "+14:00")
    ),
    (
        "rollout-resume-unknown",
        rollout("--resume", "20990101-000000-rollout-beef"),
        BAD,
        "no rollout '20990101-000000-rollout-beef'",
    ),
    (
        "rollout-resume-finished",
        lambda t: rollout("--resume", finished_rollout(t))(t),
        BAD,
        "kiln: error: rollout 20261127-000000-rollout-0001 is finished: nothing to resume",
    ),
    (
        "rollout-resume-status-not-text",  # resumed before
        lambda t: stray_rollout(running_rollout(t, status=1))(t),
        BAD,
        f"{NOT_A_ROLLOUT} (status: Input should be a valid string)",
    ),
    (
        "rollout-resume-status-unknown",
        lambda t: stray_rollout(running_rollout(t, status="paused"))(t),
        BAD,
        f"{NOT_A_ROLLOUT} (status 'paused' is none of running, stopped, finished)",
    ),
    (
        "rollout-resume-inventory-a-number",
        lambda t: stray_rollout(running_rollout(t, inventory=5))(t),
        BAD,
        f"{NOT_A_ROLLOUT} (inventory: Input should be a valid string)",
    ),
    (
        "rollout-resume-a-list",
        stray_rollout([1, 2]),
        BAD,
        f"{NOT_A_ROLLOUT} (Input should be a dictionary or an instance of Record)",
    ),
    (
        "rollout-resume-nan",
        stray_rollout(b'{"id": NaN}'),
        BAD,
        f"kiln: error: {ROLLOUT_FILE}: not JSON Kiln can read (NaN is not a JSON value)",
    ),
    (
        "rollout-resume-nested-deep",
        stray_rollout(DEEP),
        BAD,
        f"kiln: error: {ROLLOUT_FILE}: not JSON Kiln can read (nested too deeply)",
    ),
    (
        "rollout-resume-fifo",
        stray_rollout("fifo"),
        BAD,
        f"kiln: error: {ROLLOUT_FILE}: cannot read: a FIFO, not a regular file",
    ),
    (
        "rollout-resume-with-options",
        rollout("--resume", "latest", "--max-unavailable", "1"),
        BAD,
        "--resume ID carries on with the rollout's own options",
    ),
    ("rollout-nodes-unknown", rollout("--nodes", "gpu009"), BAD, "gpu009"),
    # An empty value is refused, never read as "not given" (a script's unset variable:
    # every node, a new rollout, no deadline); every option of every command is walked by
    # test_no_option_takes_an_empty_value below.
    *(
        (
            f"{words[0]}-{option.strip('-')}-empty",
            lambda t, words=words, extra=extra, option=option, value=value: [
                *words,
                "-i",
                str(inventory(t)),
                *extra,
                option,
                value,
            ],
            BAD,
            f"kiln: error: {option} {value!r}: an empty value is refused: give one, or leave "
            f"{option} out",
        )
        for words, extra, option, value in (
            (["rollout"], [], "--resume", ""),
            (["rollout"], [], "--nodes", ""),
            (["rollout"], [], "--tags", ""),
            (["rollout"], [], "--deadline", ""),
            (["rollout"], [], "--wait-for-jobs", ""),
            (["rollout"], [], "--max-unavailable", ""),
            (["validate"], [], "--nodes", ""),
            (["validate"], [], "--nodes", " "),
            (["validate"], [], "--suite", ""),
            (["validate"], [], "--profile", ""),
            (["burn-in"], ["--duration", "1h"], "--nodes", ""),
            (["health"], [], "--nodes", ""),
            (["drift"], [], "--limit", ""),
            (["provision"], [], "--limit", ""),
            (["provision"], [], "--tags", ""),
            (["monitoring", "show"], [], "--url", ""),
        )
    ),
    (
        "run-limit-empty-short",  # -l names its option by its long name
        provision("-l", ""),
        BAD,
        "kiln: error: --limit '': an empty value is refused: give one, or leave --limit out",
    ),
    (
        "run-tags-no-tag",
        provision("--tags", ","),
        BAD,
        "kiln: error: --tags ',': names no tag",
    ),
    (
        "validate-nodes-no-node",
        validate("--nodes", ","),
        BAD,
        "kiln: error: --nodes ',': names no node",
    ),
    (
        "runs-show-empty-run",
        lambda t: ["runs", "show", ""],
        BAD,
        "kiln: error: RUN '': an empty value is refused: give one",
    ),
    # validate
    ("validate-nodes-reversed", validate("--nodes", "gpu[003-001]"), BAD, "gpu[003-001]"),
    ("validate-nodes-huge", validate("--nodes", "c[0-99999999]"), BAD, "1,000,000"),
    ("validate-nodes-unknown", validate("--nodes", "gpu009"), BAD, "gpu009"),
    (
        "nccl-show-unknown-node",
        lambda t: ["nccl", "show", "-i", str(inventory(t)), "--node", "gpu009"],
        BAD,
        "--node gpu009: not a compute node of",
    ),
    ("validate-suite-unknown", validate("--suite", "storage,nccl"), BAD, "nccl"),
    ("validate-profile-missing", validate("--profile", "/nonexistent/p.yaml"), BAD, "cannot read"),
    ("validate-profile-unknown", validate("--profile", "h900"), BAD, "unknown profile 'h900'"),
    (
        "validate-profile-binary",
        lambda t: [
            "validate",
            "-i",
            str(inventory(t)),
            "--profile",
            str(a_file("p.yaml", BINARY)(t)),
        ],
        BAD,
        "not a text file",
    ),
    (
        "validate-profile-storage-range",
        validate_profile("storage: {numjobs: -4, timeout_s: 0}\n"),
        BAD,
        "p.yaml: storage.numjobs -4: must be 1 to 1024",
    ),
    (
        "validate-profile-collectives-range",
        validate_profile("collectives: {min_bytes: -1, iters: 0, ranks_per_node: -8}\n"),
        BAD,
        "p.yaml: collectives.ranks_per_node -8: must be 1 to 1024",
    ),
    (
        "validate-profile-min-over-max",
        validate_profile("collectives: {min_bytes: 8192, max_bytes: 4096}\n"),
        BAD,
        "collectives.min_bytes 8192: must be at most collectives.max_bytes (4096)",
    ),
    (
        "validate-profile-timeout-under-runtime",
        validate_profile("storage: {runtime_s: 60, timeout_s: 30}\n"),
        BAD,
        "storage.runtime_s 60: must be under storage.timeout_s (30)",
    ),
    (
        "validate-profile-block-size",
        validate_profile("storage: {block_size: 1X}\n"),
        BAD,
        "storage.block_size '1X': must be a size fio reads, such as 1M or 128k",
    ),
    (
        "validate-profile-backend",
        validate_profile("collectives: {backend: mpi}\n"),
        BAD,
        "collectives.backend must be one of nccl, gloo",
    ),
    (
        "validate-profile-outlier-zero",
        validate_profile("outlier_percent: 0\n"),
        BAD,
        "outlier_percent 0: must be 1 to 1000",
    ),
    (
        "validate-profile-maximum-zero",
        validate_profile("thresholds: {slurm.srun_s: 0}\n"),
        BAD,
        "slurm.srun_s 0: a maximum must be above 0",
    ),
    # burn-in
    (
        "burn-no-length",
        lambda t: ["burn-in", "-i", str(inventory(t))],
        BAD,
        "kiln: error: burn-in needs --duration, --rounds or both: how long to load the nodes",
    ),
    (
        "burn-rounds-zero",
        burn_in("--rounds", "0"),
        BAD,
        "Error: Invalid value for '--rounds': 0 is not in the range 1<=x<=1000.",
    ),
    ("burn-duration-unit", burn_in("--duration", "4x"), BAD, "--duration '4x': expected a length"),
    ("burn-duration-bare", burn_in("--duration", "240"), BAD, "expected a length such as 4h"),
    ("burn-duration-short", burn_in("--duration", "5s"), BAD, "must be between 30s and 14d"),
    ("burn-duration-long", burn_in("--duration", "30d"), BAD, "must be between 30s and 14d"),
    # Python's int() reads at most 4,300 digits: the ValueError read as an internal error
    (
        "burn-duration-digits",
        burn_in("--duration", "9" * 5000 + "m"),
        BAD,
        f"kiln: error: --duration '{'9' * 5000}m': must be between 30s and 14d",
    ),
    (
        "burn-round-not-a-number",
        burn_in_profile("burn_in: {round_s: ten, sample_s: 5}\n"),
        BAD,
        "p.yaml: burn_in.round_s must be a whole number, got 'ten'",
    ),
    (
        "burn-round-digits",
        burn_in_profile("burn_in: {round_s: " + "9" * 5000 + "}\n"),
        BAD,
        "p.yaml: YAML does not parse: a value cannot be read (Exceeds the limit (4300 digits) "
        "for integer string conversion: value has 5000 digits)",
    ),
    # Numbers in CLI text are ASCII digits: \d and int() also take Arabic-Indic ones
    (
        "burn-duration-non-ascii-digit",
        burn_in("--duration", "\u0663h"),
        BAD,
        "kiln: error: --duration '\u0663h': expected a length such as 4h, 90m, 1h30m or 2d "
        "(units s, m, h, d)",
    ),
    (
        "validate-nodes-non-ascii-digit",
        validate("--nodes", f"gpu[{ARABIC}]"),
        BAD,
        f"kiln: error: --nodes 'gpu[{ARABIC}]': bad range '{ARABIC}' in hostlist 'gpu[{ARABIC}]'",
    ),
    (
        "runs-last-non-ascii-digit",
        lambda t: ["runs", "list", "--last", "\u0663"],
        BAD,
        "Error: Invalid value for '-n' / '--last': '\u0663' is not a whole number (digits 0-9)\n",
    ),
    (
        "topo-block-size-non-ascii-digit",
        lambda t: ["topology", "generate", "--from", "nvlink", "--block-size", "\u0662"],
        BAD,
        "Error: Invalid value for '--block-size': '\u0662' is not a whole number (digits 0-9)\n",
    ),
    (
        "lab-compute-non-ascii-digit",
        lambda t: ["lab", "up", "--compute", "\u0662"],
        BAD,
        "Error: Invalid value for '--compute': '\u0662' is not a whole number (digits 0-9)\n",
    ),
    (
        "burn-no-profile",
        burn_in(),
        BAD,
        "kiln: error: burn-in needs a profile with a burn_in: section: none was named and the "
        "inventory sets no validate_profile (shipped: a100-sxm-8x, h100-sxm-8x-ib400, "
        "h100-sxm-8x-roce400, h200-sxm-8x-ib400, lab-cpu); name one with --profile NAME",
    ),
    ("burn-profile-unknown", burn_in("--profile", "h900"), BAD, "unknown profile 'h900'"),
    (
        "burn-profile-without-section",
        burn_in_profile("thresholds: {slurm.srun_s: 5}\n"),
        BAD,
        "profile p has no burn_in: section",
    ),
    (
        "burn-profile-bad-section",
        burn_in_profile("burn_in: {device: tpu}\n"),
        BAD,
        "burn_in.device must be one of cuda, cpu",
    ),
    ("burn-nodes-unknown", burn_in("--nodes", "gpu009"), BAD, "gpu009"),
    # accounting
    (
        "accounting-dump-disabled",
        lambda t: ["accounting", "dump", "-i", str(inventory(t)), "-o", str(t / "a.json")],
        BAD,
        "slurm_accounting_enabled is not true: this cluster keeps no accounting",
    ),
    (
        "accounting-dump-no-controller",
        lambda t: [
            "accounting",
            "dump",
            "-i",
            str(inventory(t, cluster_inventory(controllers=()), files=ACCOUNTING)),
            "-o",
            str(t / "a.json"),
        ],
        BAD,
        "slurm_controller has 0 hosts",
    ),
    ("accounting-load-disabled", accounting_load(GOOD_DUMP, files={}), BAD, "keeps no accounting"),
    ("accounting-load-missing", lambda t: ["accounting", "load", str(t / "x.json")], BAD, "x.json"),
    ("accounting-load-binary", accounting_load(BINARY), BAD, "not a text file"),
    ("accounting-load-not-json", accounting_load("Cluster - 'old'\n"), BAD, "not JSON"),
    (
        "accounting-load-other-json",
        accounting_load({"runs": []}),
        BAD,
        'not a Kiln accounting dump (no "kiln_accounting": 1)',
    ),
    (
        "accounting-load-no-cluster",
        accounting_load({**GOOD_DUMP, "associations": "Parent - 'root'\n"}),
        BAD,
        "not a sacctmgr dump",
    ),
    (
        "accounting-load-bad-qos",
        accounting_load({**GOOD_DUMP, "qos": [{"Name": "x", "MaxCPUs": "4; rm -rf /"}]}),
        BAD,
        "unknown QOS setting MaxCPUs",
    ),
    (
        "accounting-load-unnamed-qos",
        accounting_load({**GOOD_DUMP, "qos": [{"Priority": "1"}]}),
        BAD,
        "qos is not a list of named QOS",
    ),
    # Names no Slurm QOS has: `sacctmgr add qos ''` must never run (issue 39).
    (
        "accounting-load-empty-qos-name",
        accounting_load({**GOOD_DUMP, "qos": [{"Name": " ", "Priority": "1"}]}),
        BAD,
        "not a Kiln accounting dump (a QOS with an empty name)",
    ),
    (
        "accounting-load-qos-name-list",
        accounting_load({**GOOD_DUMP, "qos": [{"Name": "normal,high"}]}),
        BAD,
        "QOS name 'normal,high' holds ',', which no Slurm QOS name has",
    ),
    (
        "accounting-load-qos-name-jinja",
        accounting_load({**GOOD_DUMP, "qos": [{"Name": "{{ lookup('pipe','touch /tmp/x') }}"}]}),
        BAD,
        "QOS name \"{{ lookup('pipe','touch /tmp/x') }}\" holds \"'\", which no Slurm QOS name has",
    ),
    (
        "accounting-load-qos-name-newline",
        accounting_load({**GOOD_DUMP, "qos": [{"Name": "normal\nhigh"}]}),
        BAD,
        "QOS name 'normal\\nhigh' holds '\\n', which no Slurm QOS name has",
    ),
    # judge
    ("judge-missing-file", lambda t: ["judge", "nccl-tests", str(t / "none.txt")], BAD, "none.txt"),
    (
        "judge-binary-input",
        with_file("out.txt", BINARY, lambda p: ["judge", "nccl-tests", p]),
        BAD,
        "no nccl-tests result rows",
    ),
    ("judge-nan-busbw", nccl_with("366.82", "nan"), BAD, "nan"),
    ("judge-negative-time", nccl_with("5488.47", "-5488.47"), BAD, "negative"),
    # A benchmark that measured nothing is no result, never a pass.
    (
        "judge-header-and-footer-only",
        lambda t: judge_file(str(a_file("nccl.txt", NCCL_HEADER_AND_FOOTER)(t))),
        BAD,
        "kiln: error: {tmp}/nccl.txt:28: a header and a footer but no result row: nothing was "
        "measured",
    ),
    (
        "judge-json-no-results",
        with_file(
            "all_reduce.json",
            json.dumps({"results": [], "out_of_bounds": {"count": 0, "okay": "true"}}),
            judge_file,
        ),
        BAD,
        "kiln: error: {tmp}/all_reduce.json: a header and a footer but no result row: nothing "
        "was measured",
    ),
    (
        "judge-negative-size-and-count",
        nccl_with("  8589934592    2147483648", " -8589934592   -2147483648"),
        BAD,
        "kiln: error: {tmp}/nccl.txt:41: not an nccl-tests result row (size -8589934592 is "
        "negative): '-8589934592   -2147483648     float     sum      -1  43356.0  198.13  "
        "371.49    '",
    ),
    (
        "judge-negative-count",
        nccl_with("  8589934592    2147483648", "  8589934592   -2147483648"),
        BAD,
        "(count -2147483648 is negative)",
    ),
    (
        "judge-json-negative-size",
        with_file(
            "all_reduce.json",
            json.dumps({"results": [{"size": -8, "count": 2, "alg_bw": 1, "bus_bw": 1}]}),
            judge_file,
        ),
        BAD,
        "kiln: error: {tmp}/all_reduce.json: results[0]: unexpected entry (size -8 is negative)",
    ),
    (
        "judge-profile-nan",
        profile("thresholds:\n  collectives.all_reduce.multi_node: .nan\n"),
        BAD,
        "nan",
    ),
    (
        "judge-profile-unknown-test",
        profile("thresholds:\n  all_reduce.fast: 5\n"),
        BAD,
        "unknown test 'all_reduce.fast'",
    ),
    ("judge-profile-binary", profile(BINARY), BAD, "not a text file"),
    (
        "judge-profile-duplicate-key",
        profile("thresholds: {}\nthresholds: {}\n"),
        BAD,
        "appears twice",
    ),
    # topology
    (
        "topo-missing-dump",
        lambda t: ["topology", "generate", "--from", "ibnetdiscover", str(t / "x")],
        BAD,
        "cannot read",
    ),
    (
        "topo-binary-dump",
        with_file("d", BINARY, lambda p: ["topology", "generate", "--from", "ibnetdiscover", p]),
        BAD,
        "not ibnetdiscover output",
    ),
    (
        "topo-binary-name-map",
        with_file(
            "map",
            BINARY,
            with_name_map,
        ),
        BAD,
        "not a text file",
    ),
    (
        "topo-map-guid-twice",
        with_file(
            "map",
            '0x1 "a"\n0x1 "b"\n',
            with_name_map,
        ),
        BAD,
        "0x1",
    ),
    (
        "topo-block-size-zero",
        lambda t: ["topology", "generate", "--from", "nvlink", "--block-size", "0"],
        BAD,
        "0",
    ),
    (
        "topo-block-size-negative",
        lambda t: ["topology", "generate", "--from", "nvlink", "--block-size", "-5"],
        BAD,
        "-5",
    ),
    (
        "topo-file-binary",
        with_file("t.yaml", BINARY, lambda p: ["topology", "generate", "--from", "file", p]),
        BAD,
        "is not allowed",
    ),
    (
        "topo-file-not-topology",
        with_file("t.yaml", "a: [1\n", lambda p: ["topology", "generate", "--from", "file", p]),
        BAD,
        "t.yaml",
    ),
    (
        "topo-file-laughs",
        with_file("t.yaml", LAUGHS, lambda p: ["topology", "generate", "--from", "file", p]),
        BAD,
        "aliases expand",
    ),
    # Names read from fabrics and files become Slurm node names: one plain name each
    (
        "topo-nvlink-hostlist-name",
        with_file(
            "nvlink.txt",
            "gpu001: 6b4d, 1\nevil[1-9]: 6b4d, 1\n",
            lambda p: ["topology", "generate", "--from", "nvlink", "--format", "block", p],
        ),
        BAD,
        "nvlink.txt:2: host 'evil[1-9]' is not a Slurm node name: names may hold only letters, "
        "digits, '.', '_' and '-'\n",
    ),
    (
        "topo-file-switch-name",
        with_file(
            "t.conf",
            "SwitchName=s1 Nodes=gpu1\nSwitchName=a;b Switches=s1\n",
            lambda p: ["topology", "generate", "--from", "file", p],
        ),
        BAD,
        "t.conf: name 'a;b' may hold only letters, digits, '.', '_' and '-'\n",
    ),
    (
        "topo-file-yaml-name-with-line-break",
        with_file(
            "t.yaml",
            'switches: {"s1 Nodes=evil\\nSwitchName=s2": {nodes: gpu1}}\n',
            lambda p: ["topology", "generate", "--from", "file", p],
        ),
        BAD,
        "t.yaml: switch 's1 Nodes=evil\\nSwitchName=s2': 's1 Nodes=evil\\nSwitchName=s2' must "
        "be one word of printable ASCII",
    ),
    (
        "topo-file-non-ascii-block-size",
        with_file(
            "b.conf",
            "BlockName=b1 Nodes=gpu[1-2]\nBlockSizes=\u0662\n",
            lambda p: ["topology", "generate", "--from", "file", "--format", "block", p],
        ),
        BAD,
        "b.conf:2: BlockSizes=\u0662: expected numbers\n",
    ),
    (
        "topo-labels-without-inventory",
        lambda t: ["topology", "generate", "--from", "labels"],
        BAD,
        "give -i INVENTORY",
    ),
    # kept reports and runs
    (
        "report-unknown-id",
        lambda t: ["report", "show", "20990101"],
        BAD,
        "no validation run '20990101'",
    ),
    (
        "report-wrong-types",
        with_report(lambda r: r.update(nodes=7)),
        BAD,
        "not a Kiln validation report (nodes:",
    ),
    (
        "report-bad-verdict",
        with_report(lambda r: r["judgements"][0].update(verdict="great")),
        BAD,
        "judgements.0.verdict",
    ),
    (
        "report-value-text",
        with_report(lambda r: r["judgements"][0].update(value="x")),
        BAD,
        "judgements.0.value",
    ),
    (
        "report-node-number",
        with_report(lambda r: r["judgements"][0].update(node=5)),
        BAD,
        "judgements.0.node",
    ),
    ("report-not-object", with_report(lambda r: [1]), BAD, "not a Kiln validation report"),
    (
        "report-infinity",
        with_report(lambda r: r["judgements"][0].update(value=float("inf"))),
        BAD,
        "report.json: not a Kiln validation report (Infinity is not a number JSON allows)",
    ),
    (
        "report-nan",
        with_report(lambda r: r["judgements"][0].update(value=float("nan"))),
        BAD,
        "report.json: not a Kiln validation report (NaN is not a number JSON allows)",
    ),
    (
        "report-overflowing-number",
        with_report(report_text('"value": 100.0', '"value": 1e999')),
        BAD,
        "report.json: not a Kiln validation report (1e999 is not a finite number)",
    ),
    (
        "report-compare-infinity",
        compare_reports(
            lambda r: r["curves"].append(
                {"node": "gpu001", "collective": "all_reduce", "points": [[1024, float("-inf")]]}
            )
        ),
        BAD,
        "report.json: not a Kiln validation report (-Infinity is not a number JSON allows)",
    ),
    ("report-binary", with_report(lambda r: BINARY), BAD, "not a text file"),
    (
        "report-compare-unknown",
        lambda t: ["report", "compare", "a", "b"],
        BAD,
        "no validation run 'a'",
    ),
    ("runs-unknown-id", lambda t: ["runs", "show", "20990101"], BAD, "no run '20990101'"),
    ("runs-record-wrong-types", with_run(record={"run": 5}), BAD, "not a Kiln run record (run:"),
    (
        "runs-event-wrong-types",
        with_run(event={"counter": "a", "event": 5}),
        BAD,
        "not an ansible-runner job event",
    ),
    ("runs-event-not-object", with_run(event=[1, 2]), BAD, "not an ansible-runner job event"),
    (
        "runs-event-counter-text",  # sorted with the others' numbers: a crash before
        with_run(events=[{"counter": 1}, {"counter": "12", "event": "playbook_on_start"}]),
        BAD,
        f"kiln: error: {RUN_DIR}/artifacts/ansible/job_events/2-x.json: not an ansible-runner "
        "job event (counter: Input should be a valid integer)",
    ),
    (
        "runs-event-nested-deep",
        with_run(event=DEEP),
        BAD,
        f"kiln: error: {EVENT_FILE}: not an ansible-runner job event (nested too deeply)",
    ),
    (
        "runs-event-5000-digits",
        with_run(event=DIGITS),
        BAD,
        f"kiln: error: {EVENT_FILE}: not an ansible-runner job event (Exceeds the limit (4300 "
        "digits) for integer string conversion: value has 5000 digits)",
    ),
    (
        "runs-record-nan",  # Kiln writes strict JSON (files.json_text)
        with_run(record=b'{"run": NaN}'),
        BAD,
        f"kiln: error: {RUN_DIR}/kiln.json: not a Kiln run record (NaN is not a JSON value)",
    ),
    *[
        (
            f"runs-event-{kind}",
            run_with_irregular(kind, "artifacts/ansible/job_events/1-x.json"),
            BAD,
            f"kiln: error: {EVENT_FILE}: cannot read: {what}, not a regular file",
        )
        for kind, what in [
            ("fifo", "a FIFO"),
            ("device", "a character device"),
            ("dir", "a directory"),
        ]
    ],
    *[
        (
            f"runs-record-{kind}",
            run_with_irregular(kind, "kiln.json"),
            BAD,
            f"kiln: error: {RUN_DIR}/kiln.json: cannot read: {what}, not a regular file",
        )
        for kind, what in [
            ("fifo", "a FIFO"),
            ("device", "a character device"),
            ("dir", "a directory"),
        ]
    ],
    (
        "runs-record-nested-deep",
        with_run(record=DEEP),
        BAD,
        f"kiln: error: {RUN_DIR}/kiln.json: not a Kiln run record (nested too deeply)",
    ),
    (
        "runs-record-too-large",
        with_run(record=b" " * (2 * 1024 * 1024)),
        BAD,
        f"kiln: error: {RUN_DIR}/kiln.json: cannot read: over 1 MiB (Kiln's limit for a file)",
    ),
    ("runs-last-negative", lambda t: ["runs", "list", "--last", "-1"], BAD, "-1"),
    ("runs-last-zero", lambda t: ["runs", "list", "--last", "0"], BAD, "0"),
    (
        "runs-slowest-duration-text",
        slowest_of(duration="5.0"),
        BAD,
        f"kiln: error: {EVENT_FILE}: not an ansible-runner job event"
        " (event_data.duration: Input should be a valid number)",
    ),
    (
        "runs-slowest-task-uuid-list",
        slowest_of(task_uuid=["0242ac11-0002-0001"]),
        BAD,
        f"kiln: error: {EVENT_FILE}: not an ansible-runner job event"
        " (event_data.task_uuid: Input should be a valid string)",
    ),
    (
        "runs-slowest-end-not-a-time",
        slowest_of(end="soon"),
        BAD,
        f"kiln: error: {EVENT_FILE}: not an ansible-runner job event"
        " (event_data.end: Input should be a valid datetime or date, input is too short)",
    ),
    ("runs-slowest-zero", lambda t: ["runs", "show", "--slowest", "0"], BAD, "0"),
    # files given on the command line that are not regular files, or too large
    ("judge-fifo", given("fifo", judge_file), BAD, not_regular("{tmp}/fifo", "a FIFO")),
    (
        "judge-device",
        given("device", judge_file),
        BAD,
        not_regular("/dev/zero", "a character device"),
    ),
    ("judge-directory", given("dir", judge_file), BAD, not_regular("{tmp}/dir", "a directory")),
    (
        "judge-over-limit",
        given("huge", judge_file),
        BAD,
        "kiln: error: {tmp}/huge: cannot read: over 1 GiB (Kiln's limit for a file)",
    ),
    (
        "judge-profile-fifo",
        given("fifo", lambda p: [*judge_file(str(NCCL_TEXT)), "--profile", p]),
        BAD,
        not_regular("profile {tmp}/fifo", "a FIFO"),
    ),
    ("inv-hosts-fifo", inventory_with_fifo("hosts.yml"), BAD, not_regular("hosts.yml", "a FIFO")),
    (
        "inv-vars-fifo",
        inventory_with_fifo("group_vars/all.yml"),
        BAD,
        not_regular("group_vars/all.yml", "a FIFO"),
    ),
    (
        "inv-device",
        given("device", lambda p: ["inventory", "check", "-i", p]),
        BAD,
        not_regular("zero", "a character device"),
    ),
    (
        "inv-diff-fifo",
        lambda t: ["inventory", "diff", str(irregular("fifo")(t)), str(inventory(t))],
        BAD,
        not_regular("fifo", "a FIFO"),
    ),
    (
        "run-extravar-fifo",
        lambda t: provision("-e", f"@{irregular('fifo')(t)}")(t),
        BAD,
        not_regular("-e @{tmp}/fifo", "a FIFO"),
    ),
    ("topo-dump-fifo", given("fifo", from_dump), BAD, not_regular("{tmp}/fifo", "a FIFO")),
    (
        "topo-name-map-device",
        given("device", with_name_map),
        BAD,
        not_regular("/dev/zero", "a character device"),
    ),
    (
        "topo-file-fifo",
        given("fifo", lambda p: ["topology", "generate", "--from", "file", p]),
        BAD,
        not_regular("{tmp}/fifo", "a FIFO"),
    ),
    (
        "accounting-load-fifo",
        lambda t: [
            "accounting",
            "load",
            "-i",
            str(inventory(t, files=ACCOUNTING)),
            str(irregular("fifo")(t)),
        ],
        BAD,
        not_regular("{tmp}/fifo", "a FIFO"),
    ),
    (
        "report-show-fifo",
        lambda t: ["report", "show", str(irregular("fifo", "report.json")(t))],
        BAD,
        not_regular("{tmp}/report.json", "a FIFO"),
    ),
    # output files (-o): the directory must exist, checked before any work
    (
        "topo-output-no-directory",
        generate_into("{tmp}/none/topology.conf"),
        BAD,
        "kiln: error: -o {tmp}/none/topology.conf: no directory {tmp}/none",
    ),
    (
        "topo-output-is-directory",
        generate_into("{tmp}"),
        BAD,
        "kiln: error: -o {tmp}: is a directory; name a file",
    ),
    (
        "topo-output-fifo",  # replaced whole, a device or FIFO would become a plain file
        lambda t: [*from_dump(str(DUMP)), "-o", str(irregular("fifo", "out.conf")(t))],
        BAD,
        "kiln: error: -o {tmp}/out.conf: a FIFO, not a regular file",
    ),
    (
        "report-output-no-directory",
        lambda t: ["report", "show", "latest", "-o", str(t / "none" / "r.html")],
        BAD,
        "kiln: error: -o {tmp}/none/r.html: no directory {tmp}/none",
    ),
    (
        "accounting-dump-output-no-directory",
        lambda t: [
            "accounting",
            "dump",
            "-i",
            str(inventory(t, files=ACCOUNTING)),
            "-o",
            str(t / "none" / "a.json"),
        ],
        BAD,
        "kiln: error: -o {tmp}/none/a.json: no directory {tmp}/none",
    ),
    # kiln monitoring show: Prometheus's address, from --url or the inventory
    *(
        (
            f"monitoring-url-{case}",
            lambda t, url=url: ["monitoring", "show", "--url", url],
            BAD,
            f"kiln: error: --url {url!r}: {PROMETHEUS_URL}",
        )
        for case, url in (
            ("not-http", "ftp://ctl1"),
            ("port-past-65535", "http://ctl1:99999"),
            ("newline", "http://ctl1\n"),
            ("query", "http://ctl1:9090/?query=up"),
        )
    ),
    # A user and password in --url: refused, never printed nor sent to the resolver.
    *(
        (
            f"monitoring-url-userinfo-{case}",
            lambda t, url=url: ["monitoring", "show", "--url", url],
            BAD,
            f"kiln: error: --url {shown!r}: a user or password in the URL is refused (Kiln "
            "sends Prometheus no credentials)",
        )
        for case, url, shown in (
            ("password", "http://kiln:hunter2@ctl1:9090", "http://(secret)@ctl1:9090"),
            ("at-in-password", "https://kiln:hun@ter2@gw/prom", "https://(secret)@gw/prom"),
            ("bad-port", "http://kiln:hunter2@ctl1:99999", "http://(secret)@ctl1:99999"),
            ("space", "http://kiln:hun ter2@ctl1", "http://(secret)@ctl1"),
        )
    ),
    (
        "monitoring-port-not-a-port",
        lambda t: [
            "monitoring",
            "show",
            "-i",
            str(inventory(t, files={"group_vars/all.yml": {"monitoring_prometheus_port": 70000}})),
        ],
        BAD,
        "kiln: error: group_vars/all.yml: monitoring_prometheus_port 70000: not a port (1-65535)",
    ),
    (
        "monitoring-no-controller",
        lambda t: ["monitoring", "show", "-i", str(inventory(t, cluster_inventory(())))],
        BAD,
        "kiln: error: inventory: slurm_controller has 0 hosts (); expected 1, or 2 for a "
        "backup controller",
    ),
    (
        "monitoring-no-inventory",
        lambda t: ["monitoring", "show", "-i", str(t / "none")],
        BAD,
        "kiln: error: inventory not found: {tmp}/none",
    ),
    # lab
    ("lab-bad-name", lambda t: ["lab", "status", "--name", "a;b"], BAD, "a;b"),
    (
        "lab-name-non-ascii",
        lambda t: ["lab", "status", "--name", "lab\u0663"],
        BAD,
        "kiln: error: lab name 'lab\u0663': use up to 20 letters, digits and '-', starting with "
        "a letter",
    ),
    (
        "lab-name-newline",
        lambda t: ["lab", "status", "--name", "lab\n"],
        BAD,
        "kiln: error: lab name 'lab\\n': use up to 20 letters, digits and '-', starting with a "
        "letter",
    ),
]


@pytest.mark.parametrize(
    ("setup", "code", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(setup, code, message, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("KILN_STATE_DIR", str(work / "state"))
    argv = setup(work)
    found, _, err = kiln(argv, capsys)
    assert "internal error" not in err and "Traceback" not in err, err
    assert found == code, (found, err)
    lines = err.strip().splitlines()
    if lines[0].startswith("kiln: error:"):  # Kiln's own errors: exactly one line
        assert len(lines) == 1, err
    else:  # Click's usage errors: its usual few lines, the error last
        assert lines[-1].startswith("Error:"), err
    message = message.replace("{tmp}", str(work))
    if message.startswith("kiln: error:"):
        assert err == message + "\n"
    else:
        assert message in err, err
    # Nothing ran: no ansible run was started for any of these.
    assert not (work / "state" / "runs").exists() or argv[:1] == ["runs"]


def test_a_vault_encrypted_vars_file_is_left_to_ansible_when_a_password_is_set(
    tmp_path, monkeypatch, capsys
):
    password = tmp_path / "vault-pass"
    password.write_text("secret\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password))
    inv = inventory(
        tmp_path,
        files={
            "group_vars/all/vault.yml": VAULT,
            "group_vars/all/main.yml": {"slurm_cluster_name": "ok"},
        },
    )
    code, out, err = kiln(["inventory", "check", "-i", str(inv)], capsys)
    assert (code, err) == (0, "")
    assert "not checked (ansible-vault; Ansible decrypts it): group_vars/all/vault.yml" in out
    # The files beside it are still checked.
    (inv / "group_vars" / "all" / "main.yml").write_text("slurm_cluster_name: 'a;b'\n")
    code, out, err = kiln(["inventory", "check", "-i", str(inv)], capsys)
    assert code == ExitCode.BAD_INPUT and "slurm_cluster_name 'a;b'" in err


def test_the_table_covers_every_command():
    """Each command that reads operator input has rows here."""
    covered = {c[0].split("-")[0] for c in CASES}
    assert covered >= {
        "inv",
        "run",
        "validate",
        "burn",
        "accounting",
        "judge",
        "topo",
        "report",
        "new",
        "pins",
        "runs",
        "lab",
        "rollout",
        "monitoring",
    }
    assert len(CASES) >= 80


@pytest.mark.parametrize(
    ("limit", "tags", "skip_tags"),
    [
        ("gpu001", None, None),
        ("slurm_compute:!gpu002", "base,slurm", None),
        ("gpu00*", None, "storage"),
        (None, "always,munge", None),
    ],
)
def test_selections_that_match_pass_the_check(tmp_path, limit, tags, skip_tags):
    from kiln import inventory as inventory_model
    from kiln import selection
    from kiln.run.execute import resolve_playbook

    spec = inventory_model.load(inventory(tmp_path))
    selection.check(resolve_playbook("site"), spec, limit, tags, skip_tags)


def _value_parameters() -> list[tuple[list[str], str, list[str]]]:
    """Every option and argument that takes a value, of every command: (the command's
    words, the parameter's name as an error names it, argv giving it '')."""
    import click

    ctx = click.Context(cli.cli)
    found = []

    def walk(words: list[str], command: click.Command) -> None:
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        for param in command.params:
            if getattr(param, "is_flag", False) or isinstance(
                param.type, click.types.UnprocessedParamType
            ):
                continue
            if isinstance(param, click.Option):
                name = max(param.opts, key=len)
                found.append((words, name, [*words, name, ""]))
                if name.startswith("--"):
                    found.append((words, name, [*words, f"{name}="]))
            else:  # the arguments before it get a value, this one ''
                before = ["x"] * arguments.index(param)
                found.append((words, param.human_readable_name, [*words, *before, ""]))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk([*words, name], command.get_command(ctx, name))

    for name in cli.cli.list_commands(ctx):
        walk([name], cli.cli.get_command(ctx, name))
    return found


VALUE_PARAMETERS = _value_parameters()


@pytest.mark.parametrize(
    ("words", "name", "argv"),
    VALUE_PARAMETERS,
    ids=[" ".join(argv) for _, _, argv in VALUE_PARAMETERS],
)
def test_no_option_takes_an_empty_value(words, name, argv, tmp_path, monkeypatch, capsys):
    """Every option and argument of every command, given '', is refused before anything
    is read or run: one line, exit 2 (a new option cannot forget it: kiln.cli applies
    the rule to every command it loads)."""
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    code, out, err = kiln(argv, capsys)
    if name.startswith("-"):
        said = f"an empty value is refused: give one, or leave {name} out"
    else:
        said = "an empty value is refused: give one"
    assert (code, out, err) == (BAD, "", f"kiln: error: {name} '': {said}\n")
    assert not (tmp_path / "state").exists()


def test_the_walk_reaches_every_command_and_option():
    walked = {(" ".join(words), name) for words, name, _ in VALUE_PARAMETERS}
    assert walked >= {
        ("rollout", "--resume"),
        ("rollout", "--nodes"),
        ("rollout", "--tags"),
        ("rollout", "--deadline"),
        ("rollout", "--wait-for-jobs"),
        ("rollout", "--suite"),
        ("rollout", "--profile"),
        ("validate", "--nodes"),
        ("burn-in", "--nodes"),
        ("health", "--nodes"),
        ("provision", "--limit"),
        ("drift", "--limit"),
        ("run", "PLAYBOOK"),
        ("inventory diff", "AFTER"),
        ("report compare", "RUN_B"),
        ("judge nccl-tests", "FILES"),
        ("monitoring show", "--url"),
        ("lab up", "--name"),
        ("topology generate", "--from"),
    }
    assert {words[0] for words, _, _ in VALUE_PARAMETERS} == set(cli.COMMANDS)


# --- scale: answers, not hangs (the 30 s alarm of kiln() bounds each) ----------------------


def test_report_compare_of_100000_nodes_answers(tmp_path, monkeypatch, capsys):
    """Two validation runs of 100,000 nodes: one line per node that changed. Comparing
    took minutes (a list searched per judgement, and a Rich table)."""
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path / "state"))
    nodes = [f"gpu{i:06d}" for i in range(100_000)]
    for run, value in (("20261123-120000-aaaa", 100.0), ("20261124-120000-bbbb", 80.0)):
        judgement = {"test": "storage.seq_read", "subject": "/shared", "unit": "MB/s"}
        report = {
            "id": run,
            "started": "2026-11-23T12:00:00+00:00",
            "inventory": "inv",
            "profile": None,
            "suites": ["storage"],
            "nodes": nodes,
            "judgements": [
                {**judgement, "node": n, "value": value, "verdict": "pass", "reason": "ok"}
                for n in nodes
            ],
            "node_verdicts": {n: {"verdict": "pass", "reasons": []} for n in nodes},
        }
        folder = tmp_path / "state" / "validations" / run
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps(report))
    code, out, err = kiln(
        ["report", "compare", "20261123-120000-aaaa", "20261124-120000-bbbb"], capsys
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 1 + 100_000 + 1  # the header, every node, the fleet's median
    assert lines[1].split() == [
        "fleet", "median", "storage.seq_read", "/shared", "100", "MB/s", "pass", "80", "MB/s",
        "pass", "-20%", "worse",
    ]  # fmt: skip
    assert lines[-1].split()[0] == "gpu099999"


def test_inventory_diff_works_per_host_only_where_a_value_differs(tmp_path, monkeypatch):
    """Two inventories of 100,001 hosts where one host's address differs: the per-host
    comparison makes one change, not one per host (at 1,000,000 hosts it had no answer
    in a minute)."""
    from kiln import inventory as inventory_model
    from kiln.inventory import diff

    def site(name: str, address: str) -> Path:
        hosts = cluster_inventory(compute=())
        hosts["all"]["children"]["slurm_compute"]["hosts"] = {
            "gpu[000000:099999]": None,
            "gpx1": {"ansible_host": address},
        }
        (tmp_path / name).mkdir()
        return inventory(tmp_path / name, hosts)

    old = inventory_model.load(site("old", "10.0.0.1"))
    new = inventory_model.load(site("new", "10.0.0.2"))
    made = []
    real = diff._change
    monkeypatch.setattr(diff, "_change", lambda *args: made.append(args[0]) or real(*args))
    found = diff.diff(old, new)
    assert made == ["ansible_host"]
    assert found.lines()[1:] == ["host gpx1:", "  ansible_host: '10.0.0.1' -> '10.0.0.2'"]
