"""kiln_node, the library the node programs and the control side share: standard library
only (it runs on the nodes with the system python3), shipped whole, and its parsers fed
real captures."""

import ast
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import kiln_node
from kiln.roles import node_library
from kiln.validation import drain
from kiln_node import commands, metrics, node_files, nvidia_smi, slurm_jobs, slurm_state
from tests.conftest import REPO
from tests.node_scripts import health_active
from tests.unit.test_filter_plugins import filters
from tests.unit.test_gpu import SCONTROL_NODE_REBOOT_REQUESTED
from tests.unit.test_node_metrics import CLOCK_REASONS

PACKAGE = REPO / "node_library" / "kiln_node"
FIXTURES = REPO / "tests" / "fixtures"
# The node programs that import kiln_node, by role.
IMPORTERS = {
    "autofs": ["kiln-mount-check"],
    "base": ["kiln-fingerprint"],
    "health": ["kiln-health", "kiln-health-active", "kiln-prolog"],
    "monitoring": ["kiln-metrics"],
    "nccl_env": ["kiln-nccl-probe"],
    "nvidia_driver": ["kiln-gpu-detect"],
    "repair": ["kiln-evidence", "kiln-repair", "kiln-repair-step"],
    "validate": [
        "kiln-validate-probe",
        "kiln-probe-launcher",
        "kiln-torch-bench",
        "kiln-burn-stress",
    ],
}
# The role that installs it, the one copy of those tasks: base imports it, every other
# role that needs it includes it by name.
LIBRARY_ROLE = "kiln.cluster.node_library"
SYS_PATH = 'sys.path.insert(0, os.environ.get("KILN_NODE_LIBRARY") or "/usr/local/lib/kiln")'


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            found.add(node.module or "")
    return found


# Imported only inside the function that needs it, on the one host whose role installs
# it: the Redfish client, on the first controller where BMC repair is configured.
OPTIONAL = {"bmc_power.py": {"sushy"}}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_library_imports_the_standard_library_and_itself_only(path):
    outside = {
        name
        for name in imported(path)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not (name == "kiln_node" or name.startswith("kiln_node."))
    }
    assert outside == OPTIONAL.get(path.name, set())


def role_tasks(role: str, name: str = "main.yml", follow: bool = True) -> list[dict]:
    """The tasks of a role's tasks file in order, blocks opened, and (follow) each tasks
    file of the role it imports or includes in its place."""
    found = []
    for task in yaml.safe_load((REPO / "roles" / role / "tasks" / name).read_text()) or []:
        found.append(task)
        for key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks"):
            target = task.get(key)
            if follow and isinstance(target, str) and "/" not in target and "{" not in target:
                found += role_tasks(role, target)
        found += [t for block in ("block", "rescue", "always") for t in task.get(block, [])]
    return found


def test_every_node_program_that_imports_it_finds_it_where_its_role_installs_it():
    users = {
        f"{role}/{path.name}"
        for role_dir in (REPO / "roles").iterdir()
        for path in (role_dir / "files").glob("*")
        if path.is_file() and (role := role_dir.name) and "kiln_node" in path.read_text()
    }
    assert users == {f"{role}/{name}" for role, names in IMPORTERS.items() for name in names}
    for role, names in IMPORTERS.items():
        # The role imports (base) or includes (the others, one skipped task where this
        # run installed it already, none in a whole site.yml run: kiln.run.skips) the
        # node_library role before any task that names one of its programs.
        first = next(
            task
            for task in role_tasks(role)
            if LIBRARY_ROLE in str(task) or any(n in str(task) for n in names)
        )
        assert LIBRARY_ROLE in str(first), (role, first)
        expected = (
            {"ansible.builtin.import_role": {"name": LIBRARY_ROLE}}
            if role == "base"
            else {
                "ansible.builtin.include_role": {"name": LIBRARY_ROLE},
                "when": "node_library_dir is not defined",
                "tags": ["kiln_role_alone"],
            }
        )
        assert {k: v for k, v in first.items() if k != "name"} == expected, role
        for name in names:
            text = (REPO / "roles" / role / "files" / name).read_text()
            assert SYS_PATH in text, name
    assert f"or {kiln_node.INSTALL_DIR!r}".replace("'", '"') in SYS_PATH


def test_the_probes_a_role_runs_read_the_library_where_this_run_put_it():
    """A dry run's probes may read a temporary copy: each program a role runs by
    ansible.builtin.script is told where the library is."""
    programs = {name for names in IMPORTERS.values() for name in names}
    scripts = [
        task
        for role_dir in sorted((REPO / "roles").iterdir())
        for tasks in sorted((role_dir / "tasks").glob("*.yml"))
        for task in role_tasks(role_dir.name, tasks.name, follow=False)
        if "ansible.builtin.script" in task
    ]
    run = [t for t in scripts if t["ansible.builtin.script"]["cmd"].split()[0] in programs]
    assert len(run) == 5  # kiln-gpu-detect twice, kiln-nccl-probe three times
    for task in run:
        assert task["environment"] == {"KILN_NODE_LIBRARY": "{{ node_library_dir }}"}


def test_each_task_file_that_runs_a_probe_imports_the_library_before_it():
    """A task file may be entered alone (tasks_from: the nvidia_driver role's reboot
    step reaches state.yml without main.yml): each one that runs a program first
    includes the install, which a run that already installed it skips."""
    programs = {name for names in IMPORTERS.values() for name in names}
    for role_dir in sorted((REPO / "roles").iterdir()):
        for tasks in sorted((role_dir / "tasks").glob("*.yml")):
            listed = role_tasks(role_dir.name, tasks.name, follow=False)
            runs = [
                i
                for i, task in enumerate(listed)
                if "ansible.builtin.script" in task
                and task["ansible.builtin.script"]["cmd"].split()[0] in programs
            ]
            imports = [i for i, task in enumerate(listed) if LIBRARY_ROLE in str(task)]
            if runs:
                assert imports and imports[0] < runs[0], f"{role_dir.name}/tasks/{tasks.name}"


@pytest.mark.parametrize("root", [None, node_library.DRY_RUN_DIR])
def test_the_filter_ships_the_package_whole(root):
    """To INSTALL_DIR, or under a dry run's copy."""
    shipped = filters("kiln_node")["kiln_node_library"](root)
    root = root or kiln_node.INSTALL_DIR
    assert shipped["directories"] == [root, f"{root}/kiln_node"]
    modules = sorted(PACKAGE.glob("*.py"))
    assert [f["path"] for f in shipped["files"]] == [f"{root}/kiln_node/{m.name}" for m in modules]
    assert [f["content"] for f in shipped["files"]] == [m.read_text() for m in modules]
    # The manifest the role looks at instead of every file: one line per file.
    manifest = shipped["manifest"]
    assert manifest["path"] == f"{root}/kiln-node-library.sha256"
    assert manifest["content"].splitlines() == [
        f"{hashlib.sha256(f['content'].encode()).hexdigest()}  {f['path'][len(root) + 1 :]}"
        for f in shipped["files"]
    ]
    assert manifest["sha256"] == hashlib.sha256(manifest["content"].encode()).hexdigest()
    assert shipped["dry_run_dir"] == "/run/kiln-node-library"


def test_the_node_programs_run_with_the_shipped_files_alone(tmp_path):
    """No site-packages (-S), so no other kiln: what the filter ships, where
    KILN_NODE_LIBRARY names it (a dry run's copy), is all there is."""
    for name, text in node_library.shipped_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    for role, names in IMPORTERS.items():
        for name in names:
            program = REPO / "roles" / role / "files" / name
            # The two facts programs take no arguments: they print their JSON.
            reads_only = name in ("kiln-fingerprint", "kiln-gpu-detect")
            done = subprocess.run(
                [sys.executable, "-S", str(program), *([] if reads_only else ["--help"])],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "KILN_NODE_LIBRARY": str(tmp_path), "PYTHONPATH": ""},
            )
            assert (done.returncode, done.stderr) == (0, ""), name
            if reads_only:
                assert isinstance(json.loads(done.stdout), dict), name
            else:
                assert done.stdout.startswith("usage: "), name


# --- Slurm node state ------------------------------------------------------------------


def test_scontrol_oneliner_read_whole():
    """Slurm 24.11 on the lab, both compute nodes drained (tests/fixtures/slurm/README.md)."""
    text = (FIXTURES / "slurm" / "show-node-oneliner-24.11.txt").read_text()
    assert slurm_state.parse(text) == {
        "kiln-compute01": slurm_state.NodeState(
            "kiln-compute01", "IDLE+DRAIN", "RMA 4711: replace the fan"
        ),
        "kiln-compute02": slurm_state.NodeState(
            "kiln-compute02",
            "IDLE+DRAIN",
            "kiln-health: mounts: shared /shared: autofs could not mount "
            "kiln-storage:/shared (server kiln-storag",
        ),
    }
    seen = slurm_state.parse(text)["kiln-compute02"]
    assert (seen.base, seen.flags, seen.drained, seen.busy) == (
        "IDLE",
        frozenset({"IDLE", "DRAIN"}),
        True,
        frozenset(),
    )


def test_scontrol_show_node_read_whole_without_oneliner():
    """Slurm 22.05 (Debian 12), a node waiting for the reboot Kiln asked for."""
    seen = slurm_state.parse_line(SCONTROL_NODE_REBOOT_REQUESTED)
    assert seen == slurm_state.NodeState(
        "slurm-c2", "MIXED+DRAIN+REBOOT_REQUESTED", "kiln: driver 580.95.05"
    )
    assert (seen.busy, seen.drained) == (frozenset({"MIXED", "REBOOT_REQUESTED"}), True)


def test_a_line_without_state_or_reason():
    assert slurm_state.parse_line("NodeName=n1 Arch=x86_64") == slurm_state.NodeState(
        "n1", "UNKNOWN", ""
    )
    assert slurm_state.parse("") == {}


# One set per purpose: BUSY (in use or changing by itself: nothing against the node) and
# UNAVAILABLE (Slurm cannot run a job there); REBOOTING, in BUSY, is also what the
# driver role counts as out of service (kiln.roles.nvidia_driver.reboots.out_of_service).
# Each state, as validate's plan (idle-only and not) and the scheduled active check take it.
STATES = {
    "IDLE": ("test", "test", "test"),
    "MIXED": ("busy", "test", "skip"),
    "IDLE+RESERVED": ("busy", "test", "skip"),
    "IDLE+REBOOT_REQUESTED": ("busy", "test", "skip"),  # the driver role's reboot, too
    "IDLE+POWER_DOWN": ("busy", "test", "skip"),
    "IDLE+POWERED_DOWN": ("busy", "test", "skip"),
    "IDLE+POWERING_DOWN": ("busy", "test", "skip"),
    "IDLE+CLOUD+POWERED_DOWN": ("busy", "test", "skip"),
    "DOWN+NOT_RESPONDING": ("fail", "fail", "skip"),
    "IDLE+FAIL": ("fail", "fail", "skip"),
    "FUTURE": ("fail", "fail", "skip"),
    "UNKNOWN": ("fail", "fail", "skip"),
}


def validate_takes(state: str, idle_only: bool) -> str:
    plan = drain.plan(f"NodeName=n1 State={state}", ["n1"], idle_only)
    if plan.test:
        return "test"
    return "busy" if plan.skipped["n1"].startswith("busy") else "fail"


@pytest.mark.parametrize("state", STATES)
def test_which_nodes_each_run_takes(state):
    active = health_active.plan(slurm_state.parse(f"NodeName=n1 State={state}"), ["n1"])
    found = (
        validate_takes(state, idle_only=True),
        validate_takes(state, idle_only=False),
        "test" if active.test else "skip",
    )
    assert found == STATES[state]
    # A node that is only busy is not held against it; an unavailable one is.
    verdicts = {"busy": "warn", "fail": "fail"}
    for taken in found[:2]:
        if taken in verdicts:
            why = drain.plan(f"NodeName=n1 State={state}", ["n1"], taken == "busy").skipped["n1"]
            assert drain.skipped_verdict(why).value == verdicts[taken]


# --- srun and reservations -------------------------------------------------------------


def test_a_step_with_every_setting():
    step = slurm_jobs.Srun(
        ["a"], "j", "r", 2, 5, 120, mpi="pmix", nice=10, kill_on_bad_exit=True, label=True,
        quiet=True,
    )  # fmt: skip
    assert step.argv("cmd", "--flag") == [
        "srun", "--nodes=1", "--nodelist=a", "--ntasks-per-node=2", "--mpi=pmix",
        "--reservation=r", "--time=5", "--nice=10", "--immediate=120", "--kill-on-bad-exit=1",
        "--label", "--quiet", "--job-name=j", "cmd", "--flag",
    ]  # fmt: skip
    assert slurm_jobs.Srun(["a"], "j", immediate_s=None).argv() == [
        "srun", "--nodes=1", "--nodelist=a", "--ntasks-per-node=1", "--job-name=j",
    ]  # fmt: skip
    assert step.but(nodes=["a", "b"]).nodes == ("a", "b")


def test_reservations():
    offered = filters("kiln_node")
    held = ["scontrol", "create", "ReservationName=kiln_x", "Nodes=gpu001,gpu002", "Users=root"]
    assert offered["kiln_node_reserve"]("kiln_x", ["gpu001", "gpu002"], "90") == [
        *held, "Flags=MAINT", "StartTime=now", "Duration=90",
    ]  # fmt: skip
    assert offered["kiln_node_reserve"]("kiln_x", ["gpu001", "gpu002"], 90, ignore_jobs=True) == [
        *held, "Flags=MAINT,IGNORE_JOBS", "StartTime=now", "Duration=90",
    ]  # fmt: skip
    assert offered["kiln_node_release"]("kiln_x") == [
        "scontrol", "delete", "ReservationName=kiln_x",
    ]  # fmt: skip


def test_reading_draining_resuming_and_rebooting_nodes():
    """The argv the node programs run; no shell, so a reason with quotes, `;` or Jinja
    reaches Slurm as it is."""
    reason = "kiln-health: gpu: XID 79 'fallen off the bus'; {{ x }}"
    assert slurm_jobs.show_nodes() == ["scontrol", "--oneliner", "show", "node"]
    assert slurm_jobs.show_nodes(["gpu001", "gpu002"]) == [
        "scontrol", "--oneliner", "show", "node", "gpu001,gpu002",
    ]  # fmt: skip
    assert slurm_jobs.drain("gpu001", reason) == [
        "scontrol", "update", "NodeName=gpu001", "State=DRAIN", f"Reason={reason}",
    ]  # fmt: skip
    assert slurm_jobs.resume("gpu001") == [
        "scontrol", "update", "NodeName=gpu001", "State=RESUME",
    ]  # fmt: skip
    assert slurm_jobs.reboot(["gpu001", "gpu002"], "kiln: driver 570.195.03") == [
        "scontrol", "reboot", "ASAP", "nextstate=RESUME", "reason=kiln: driver 570.195.03",
        "gpu001,gpu002",
    ]  # fmt: skip
    assert slurm_jobs.reboot_to_drain("gpu001", reason) == [
        "scontrol", "reboot", "ASAP", "nextstate=DRAIN", f"reason={reason}", "gpu001",
    ]  # fmt: skip


def test_the_node_state_filters_take_a_name_a_list_or_none():
    offered = filters("kiln_node")
    every = ["scontrol", "--oneliner", "show", "node"]
    assert offered["kiln_node_show_nodes"](None) == every
    assert offered["kiln_node_show_nodes"]([]) == every
    assert offered["kiln_node_show_nodes"]("gpu001") == [*every, "gpu001"]
    # What the role hands it: a dict's keys.
    assert offered["kiln_node_show_nodes"]({"gpu001": "r", "gpu002": "r"}.keys()) == [
        *every, "gpu001,gpu002",
    ]  # fmt: skip
    assert offered["kiln_node_drain"]("gpu001", "kiln: storage.mount /shared") == [
        "scontrol", "update", "NodeName=gpu001", "State=DRAIN",
        "Reason=kiln: storage.mount /shared",
    ]  # fmt: skip
    assert offered["kiln_node_drain"]("gpu001", "") == [
        "scontrol", "update", "NodeName=gpu001", "State=DRAIN", "Reason=",
    ]  # fmt: skip
    assert offered["kiln_node_resume"]("gpu001") == [
        "scontrol", "update", "NodeName=gpu001", "State=RESUME",
    ]  # fmt: skip
    assert offered["kiln_node_reboot"]("gpu001", "kiln: driver 570.195.03") == [
        "scontrol", "reboot", "ASAP", "nextstate=RESUME", "reason=kiln: driver 570.195.03",
        "gpu001",
    ]  # fmt: skip
    # kiln rollout's: the node is drained and idle already, and stays out until checked.
    assert offered["kiln_node_reboot_drained"](["gpu001", "gpu002"]) == [
        "scontrol", "reboot", "gpu001,gpu002",
    ]  # fmt: skip


# --- nvidia-smi ------------------------------------------------------------------------

H100 = FIXTURES / "gpu" / "h100-80gb-hbm3-vm"  # a real H100 VM (its README)


def test_nvidia_smi_xml_read_whole():
    assert nvidia_smi.parse_xml((H100 / "nvidia-smi-q.xml").read_text()) == nvidia_smi.SmiLog(
        "580.159.04",
        "13.0",
        [
            nvidia_smi.SmiGpu(
                bus_id="00000000:00:06.0",
                name="NVIDIA H100 80GB HBM3",
                architecture="Hopper",
                uuid="GPU-320a3b5b-5f8b-e47d-48a5-f808c0da1f70",
                vbios="96.00.DA.00.0C",
                driver="580.159.04",
                persistence="Enabled",
                uncorrectable_volatile=0,
                remap_pending=False,
                remap_failure=False,
                unrepairable_memory=False,
                clock_events=("gpu_idle",),
                width_current=16,
                width_max=16,
                fabric_state="N/A",
                fabric_status="N/A",
                clique_id="N/A",
                cluster_uuid="N/A",
                temperature_c=36.0,
                power_w=70.94,
                power_limit_w=700.0,
                sm_clock_mhz=345.0,
                memory_clock_mhz=2619.0,
                utilization_pct=0.0,
                memory_used_mib=0.0,
                correctable_volatile=0,
                clock_event_states=tuple((r, r == "gpu_idle") for r in CLOCK_REASONS),
            )
        ],
    )
    for bad, why in [
        ("", "nvidia-smi -q -x printed no XML (no element found: line 1, column 0)"),
        ("<log/>", "nvidia-smi -q -x printed <log>, not <nvidia_smi_log>"),
    ]:
        with pytest.raises(ValueError) as raised:
            nvidia_smi.parse_xml(bad)
        assert str(raised.value) == why


def test_nvidia_smi_csv_read_whole():
    assert nvidia_smi.parse_csv((H100 / "query-remapped-rows.csv").read_text()) == [
        {
            "gpu_bus_id": "00000000:00:06.0",
            "remapped_rows.correctable": "0",
            "remapped_rows.uncorrectable": "0",
            "remapped_rows.pending": "No",
            "remapped_rows.failure": "No",
        }
    ]
    (row,) = nvidia_smi.parse_csv((H100 / "query-gpu.csv").read_text())
    assert (row["memory.total"], row["power.draw"], row["retired_pages.pending"]) == (
        "81559 MiB",
        "110.16 W",
        "[N/A]",
    )
    assert nvidia_smi.parse_csv("") == []


def test_xids_and_the_catalogue():
    # The recorded boot log has NVRM lines but no XID.
    assert nvidia_smi.parse_xids((H100 / "dmesg-nvrm.txt").read_text()) == []
    log = (
        "[ 8012.345678] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.\n"
        "[ 9600.200000] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000010\n"
    )
    assert nvidia_smi.parse_xids(log) == [("0000:00:06", 79), ("0000:3b:00", 31)]
    # The critical XIDs of GUIDE.md drain (their step is a reset or a reboot).
    assert {x for x, e in nvidia_smi.XIDS.items() if e.step in nvidia_smi.DRAINING_STEPS} == {
        46, 48, 61, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143,
    }  # fmt: skip
    assert {e.step for e in nvidia_smi.XIDS.values()} == set(nvidia_smi.XID_STEPS)
    assert (nvidia_smi.XIDS[79], nvidia_smi.xid_step(149)) == (
        nvidia_smi.Xid("GPU fell off the bus", "gpu-hardware", "reboot"),
        "watch",
    )
    assert [nvidia_smi.xid_name(x) for x in (79, 63, 13, 149)] == [
        "XID 79 GPU fell off the bus",
        "XID 63 row remapping pending",
        "XID 13 graphics engine exception",
        "XID 149 (not in Kiln's table)",
    ]


def test_the_kernel_logs_xid_lines_as_printed():
    """kiln-burn-stress keeps these lines before and after a round; kiln burn-in compares."""
    boot = (H100 / "dmesg-nvrm.txt").read_text()
    xid = "[ 8012.345678] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>"
    assert nvidia_smi.xid_lines(boot) == []
    assert nvidia_smi.xid_lines(f"{boot}{xid}\n[ 8013.1] eth0: link up\n") == [xid]


# --- metrics and commands --------------------------------------------------------------


def test_the_textfile_metrics(tmp_path):
    up = metrics.Gauge("kiln_x", "1 when x.")
    up.add(1, node="gpu001", check='say "hi"\\\n')
    up.add(0.25, node="gpu002", check="y")
    when = metrics.Gauge("kiln_x_timestamp_seconds", "When.")
    when.add(1795000000)
    metrics.write(str(tmp_path / "new"), "kiln_x.prom", [up, when])
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["kiln_x.prom"]
    assert (tmp_path / "new" / "kiln_x.prom").read_text() == (
        "# HELP kiln_x 1 when x.\n"
        "# TYPE kiln_x gauge\n"
        'kiln_x{node="gpu001",check="say \\"hi\\"\\\\\\n"} 1\n'
        'kiln_x{node="gpu002",check="y"} 0.25\n'
        "# HELP kiln_x_timestamp_seconds When.\n"
        "# TYPE kiln_x_timestamp_seconds gauge\n"
        "kiln_x_timestamp_seconds 1795000000\n"
    )


def test_a_command_with_a_deadline(tmp_path):
    done = commands.run(["sh", "-c", "cat; echo err >&2; exit 3"], 10, stdin="in\n")
    assert (done.rc, done.stdout, done.stderr, done.timed_out, done.start_error) == (
        3, "in\n", "err\n", False, None,
    )  # fmt: skip
    missing = commands.run([str(tmp_path / "absent")], 10)
    assert (missing.rc, missing.start_error.strerror) == (None, "No such file or directory")


def test_past_its_time_the_whole_process_group_is_killed(tmp_path):
    """A child that keeps the output pipe open (a grandchild) does not hold the caller."""
    pid_file = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    done = commands.run(["sh", "-c", script], 1)
    assert (done.rc, done.timed_out, done.stdout) == (None, True, "")
    assert done.seconds < 10
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # killed, reaped by init: gone within moments
        if not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"{grandchild} still runs")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_the_record_the_validation_probes_keep(tmp_path):
    done = commands.record(["sh", "-c", "echo out; echo ' err ' >&2; exit 2"], 10)
    assert done | {"seconds": 0} == {"rc": 2, "stdout": "out\n", "stderr": "err", "seconds": 0}
    late = commands.record(["sleep", "5"], 0.5)
    assert late | {"seconds": 0} == {
        "rc": None, "stdout": "", "stderr": "no answer within 0.5s", "seconds": 0,
    }  # fmt: skip
    absent = str(tmp_path / "absent")
    assert commands.record([absent], 10) == {
        "rc": 127,
        "stdout": "",
        "stderr": f"[Errno 2] No such file or directory: '{absent}'",
        "seconds": 0.0,
    }


def test_a_commands_stdout_or_nothing(tmp_path):
    """What the fact programs read: a field whose command fails stays empty."""
    assert commands.stdout(["sh", "-c", "echo 580.159.04"], 10) == "580.159.04\n"
    assert commands.stdout(["sh", "-c", "echo half; exit 3"], 10) == ""
    assert commands.stdout([str(tmp_path / "absent")], 10) == ""
    assert commands.stdout(["sleep", "5"], 0.3) == ""


def test_reading_a_nodes_file(tmp_path):
    (tmp_path / "fw_ver").write_text("28.39.1002\n")
    (tmp_path / "raw").write_bytes(b"ok\xff\n")
    assert [node_files.read(str(tmp_path / n)) for n in ("fw_ver", "raw", "absent", ".")] == [
        "28.39.1002\n",
        "ok\ufffd\n",
        None,
        None,  # a directory, like a file the kernel refuses (EINVAL): unreadable
    ]


DRY_RUN = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The base role's import
      ansible.builtin.import_role:
        name: {role}
    - name: A later role's include, skipped
      ansible.builtin.include_role:
        name: {role}
      when: node_library_dir is not defined
    - name: Run a probe as the nvidia_driver role does
      ansible.builtin.script:
        cmd: {probe}
        executable: {python} -S
      environment:
        KILN_NODE_LIBRARY: "{{{{ node_library_dir }}}}"
      register: probe
      check_mode: false
    - name: Show it
      ansible.builtin.debug:
        msg: {{dir: "{{{{ node_library_dir }}}}", probe: "{{{{ probe.stdout | from_json }}}}"}}
"""


@pytest.mark.skipif(
    Path(kiln_node.INSTALL_DIR).exists(), reason="this machine has Kiln's node library installed"
)
def test_a_dry_run_writes_nothing_and_its_probes_read_a_copy_it_replaces(tmp_path):
    """Check mode on a node without the library: nothing installed, the later role's
    import skipped, and the probe (no site-packages: no other kiln) runs on the copy in
    the dry run's one place (node_library.DRY_RUN_DIR; here under tmp_path), which the
    next dry run replaces whole: no directory per run is left behind."""
    from tests.collection import local_playbook

    playbook = tmp_path / "dry.yml"
    playbook.write_text(
        DRY_RUN.format(
            role=LIBRARY_ROLE,
            probe=REPO / "roles" / "nvidia_driver" / "files" / "kiln-gpu-detect",
            python=sys.executable,
        )
    )
    copy = tmp_path / "run" / "kiln-node-library"
    # The last dry run's copy, of another version: a module since removed
    (copy / "kiln" / "node").mkdir(parents=True)
    (copy / "kiln" / "node" / "gone.py").write_text("")
    report = local_playbook(
        playbook,
        "--check",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-e",
        f"node_library_dry_run_dir={copy}",
        timeout=300,
    )
    tasks = report["plays"][0]["tasks"]
    shown = tasks[-1]["hosts"]["localhost"]["msg"]
    assert not Path(kiln_node.INSTALL_DIR).exists()
    assert shown["dir"] == str(copy)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*.py")) == sorted(
        node_library.shipped_files()
    )
    assert sorted(p.name for p in copy.iterdir()) == ["kiln_node"]
    assert set(shown["probe"]) == {
        "pci", "proc_version", "modinfo_version", "packages", "fabric_manager",
    }  # fmt: skip
    # (task, changed, skipped): the dry run reports the library as a change; its
    # copy is not one; the later role's include is one skipped task.
    install = [
        ("Look at the node library's manifest", False),
        ("Install the library where its manifest differs", False),  # the include
        ("Install Kiln's node library", True),
        ("Remove the node library's earlier layout", False),  # none there
        ("Copy the node library for a dry run's probes", False),  # the include
        ("Remove the last dry run's copy", False),
        ("Copy the library's files there", False),
        ("Say where the node programs find the library for the rest of this run", False),
    ]
    assert [
        (t["task"]["name"], t["hosts"]["localhost"].get("changed", False),
         t["hosts"]["localhost"].get("skipped", False))
        for t in tasks[:-2]
    ] == [
        *((f"{LIBRARY_ROLE} : {name}", changed, False) for name, changed in install),
        ("A later role's include, skipped", False, True),
    ]  # fmt: skip


def test_every_textfile_kiln_writes_passes_promtool(tmp_path, promtool):
    """One sample of every metric of the catalogue, file by file, as promtool reads it."""
    by_file: dict[str, list[metrics.Gauge]] = {}
    for metric in metrics.CATALOGUE.values():
        gauge = metric.gauge()
        gauge.add(1, **{label: "x" for label in metric.labels})
        by_file.setdefault(metric.file, []).append(gauge)
    for name, gauges in by_file.items():
        checked = subprocess.run(
            [promtool, "check", "metrics"],
            input=metrics.text(gauges),
            capture_output=True,
            text=True,
        )
        assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), name


def test_a_catalogued_metric_refuses_labels_it_does_not_take():
    gauge = metrics.gauge("kiln_health_check")
    with pytest.raises(ValueError, match=r"kiln_health_check takes labels \('node', 'check'\)"):
        gauge.add(1, node="gpu001")


def test_the_reason_times_are_read_from_slurms_stamp():
    text = (FIXTURES / "slurm" / "show-node-oneliner-24.11.txt").read_text()
    assert slurm_state.reason_times(text) == {
        "kiln-compute01": "2026-11-26T17:21:39",
        "kiln-compute02": "2026-11-26T17:21:38",
    }
