"""Data is never a template: text from dumps, Slurm reasons and node output reaches the
commands Kiln's playbooks run verbatim, and no Jinja in it runs on the control node.

Real runs of Kiln's playbooks (accounting.yml, validate_drain.yml) on a controller
reached by a local connection. sacctmgr, scontrol and scancel are stand-ins on PATH
that record their whole argv and answer as Slurm would; they are always used, so a
test never changes the Slurm of the machine it runs on. `kiln validate` and `kiln
burn-in` run whole in this process; only their suites' playbooks (validate.yml,
burn_in.yml, which need Slurm, srun and GPUs) are replaced by what they write."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from kiln import inventory
from kiln.accounting import QOS_FIELDS
from kiln.campaigns import burn_in, validate
from kiln.errors import ExitCode
from kiln.run import execute
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation import results as layout
from tests.conftest import LOCAL, cluster_inventory, run_kiln
from tests.results_files import Written
from tests.unit.test_burn_in import write_round
from tests.unit.test_validation_run import mount, scontrol_line, storage_result

FAKE = """#!{python}
import json, os, sys
from pathlib import Path

here = Path(__file__).parent
call = {{"argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]]}}
for arg in sys.argv[1:]:
    if arg.startswith("file="):  # sacctmgr load file=...: what it was given to load
        call["file"] = Path(arg[5:]).read_text()
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(call) + "\\n")
answers = json.loads((here / "answers.json").read_text())
sys.stdout.write(answers.get(" ".join(call["argv"]), ""))
"""


class FakeSlurm:
    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.answers: dict[str, str] = {}

    def answer(self, argv: str, stdout: str) -> None:
        self.answers[argv] = stdout
        (self.bin / "answers.json").write_text(json.dumps(self.answers))

    def calls(self) -> list[dict]:
        log = self.bin / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def slurm(tmp_path, monkeypatch) -> FakeSlurm:
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    for name in ("sacctmgr", "scontrol", "scancel"):
        (bin_dir / name).write_text(FAKE.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    fake = FakeSlurm(bin_dir)
    fake.answer("", "")
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    return fake


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "rendered"


def jinja(marker: Path, quote: str = "'") -> str:
    """A lookup that leaves MARKER behind if Ansible ever renders it."""
    return f"{{{{ lookup({quote}pipe{quote}, {quote}touch {marker}{quote}) }}}}"


BLOCK = "{% if true %}X{% endif %}"


def write_cluster(
    tmp_path: Path, compute=("gpu001", "gpu002"), files=None
) -> inventory.ClusterSpec:
    """An inventory whose controller is this machine (a local connection)."""
    directory = tmp_path / "inv"
    directory.mkdir()
    hosts = cluster_inventory(("local-ctl",), compute, {"local-ctl": LOCAL})
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    for rel, data in (files or {}).items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(yaml.safe_dump(data))
    return inventory.load(directory)


def test_accounting_load_passes_names_and_descriptions_from_the_dump_as_they_are(
    tmp_path, slurm, marker
):
    """The dump's accounts, QOS names and descriptions in sacctmgr's argv and load file,
    byte for byte; none rendered (the issue's dump ran `touch` and added QOS '')."""
    account = jinja(marker, quote='"')  # sacctmgr's dump quotes names with '
    associations = (
        "Cluster - 'old':Fairshare=1:QOS='normal'\n"
        "Parent - 'root'\n"
        f"Account - '{account}':Description='{BLOCK}':Organization='lab':Fairshare=1\n"
        f"Parent - '{account}'\n"
        f"User - 'alice':DefaultAccount='{account}':Fairshare=1\n"
    )
    qos = [
        {"Name": "normal", "Priority": "0"},
        {"Name": BLOCK, "Description": jinja(marker), "Priority": "10"},
        {"Name": "{{ 6 * 7 }}", "Flags": "DenyOnLimit"},
    ]
    dump = tmp_path / "old.json"
    dump.write_text(json.dumps({"kiln_accounting": 1, "associations": associations, "qos": qos}))
    spec = write_cluster(tmp_path, files={"group_vars/all.yml": {"slurm_accounting_enabled": True}})
    settings = "format=" + ",".join(QOS_FIELDS)
    slurm.answer("sacctmgr -n -P show qos format=Name", "normal\n")
    slurm.answer(f"sacctmgr -n -P show qos {settings}", "normal||0||00:00:00|cluster||1.000000\n")

    done = run_kiln("accounting", "load", "-i", str(spec.path), str(dump))

    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"loaded cluster old: 1 account, 1 user, 3 QOS from {dump}"
    )
    assert not marker.exists()
    calls = slurm.calls()
    load = calls[-1]["argv"][3]
    assert load.startswith("file=/") and load.endswith(".cfg")
    assert [c["argv"] for c in calls] == [
        ["sacctmgr", "-n", "-P", "show", "qos", "format=Name"],
        ["sacctmgr", "-i", "add", "qos", BLOCK],
        ["sacctmgr", "-i", "add", "qos", "{{ 6 * 7 }}"],
        ["sacctmgr", "-n", "-P", "show", "qos", settings],
        ["sacctmgr", "-i", "modify", "qos", "where", f"name={BLOCK}", "set",
         f"Description={jinja(marker)}", "Priority=10"],
        ["sacctmgr", "-i", "modify", "qos", "where", "name={{ 6 * 7 }}", "set",
         "Flags=DenyOnLimit"],
        ["sacctmgr", "-i", "load", load, "cluster=kiln"],
    ]  # fmt: skip
    assert calls[-1]["file"] == associations


def real_acts(monkeypatch, suites):
    """run_playbook as Kiln's: SUITES (playbook -> stand-in) for the suites' playbooks,
    the real run for validate_drain.yml."""
    real = execute.run_playbook
    ran = []

    def run(request):
        ran.append(request.playbook)
        if request.playbook == "validate_drain.yml":
            return real(request)
        return suites[request.playbook](request)

    monkeypatch.setattr(execute, "run_playbook", run)
    return ran


def test_a_canceled_validate_drains_again_with_the_reason_slurm_gave_verbatim(
    tmp_path, slurm, marker, monkeypatch
):
    """A Reason anyone with `scontrol update` rights can set, handed back by the release
    (validate_release.redrain) as it was."""
    reason = f"kiln: {BLOCK} {jinja(marker)}"
    scontrol = "\n".join([scontrol_line("gpu001"), scontrol_line("gpu002", "IDLE+DRAIN", reason)])

    def canceled_suites(request):
        plan = drain.plan(scontrol, ["gpu001", "gpu002"]).to_dict()
        results = Written(Path(request.extravars["validate_results_dir"]))
        results.write(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan})
        return RunSummary(run="r-suites", playbook=request.playbook, status="canceled")

    ran = real_acts(monkeypatch, {"validate.yml": canceled_suites})
    report, code = validate.validate(validate.Request(inventory=write_cluster(tmp_path)))

    assert code == ExitCode.INTERRUPTED
    assert ran == ["validate.yml", "validate_drain.yml"]
    assert report.notes == ["canceled: nothing was judged and no node drained"]
    reservation = f"kiln_validate_{report.id}"
    assert [c["argv"] for c in slurm.calls()] == [
        ["scontrol", "update", "NodeName=gpu002", "State=DRAIN", f"Reason={reason}"],
        ["scancel", f"--reservation={reservation}"],
        ["scontrol", "delete", f"ReservationName={reservation}"],
    ]
    assert not marker.exists()


def test_validate_drains_with_the_reason_a_node_printed_verbatim(
    tmp_path, slurm, marker, monkeypatch
):
    """kiln-mount-check's text on a node, in the drain reason validate_drain.yml sets."""
    nodes = ["gpu001", "gpu002"]
    scontrol = "\n".join(scontrol_line(n) for n in nodes)
    printed = f"{BLOCK} {jinja(marker)}"

    def suites(request):
        store = Written(Path(request.extravars["validate_results_dir"]))
        plan = drain.plan(scontrol, nodes).to_dict()
        store.write(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan})
        ok = layout.Step(rc=0).to_json()
        store.write(layout.STORAGE_STEPS, layout.StorageSteps(storage=ok, cold_import=ok).to_json())
        broken = [mount(status="FAIL", reason=printed)]
        for n in nodes:
            store.write_node("storage", n, storage_result(n, broken if n == "gpu002" else None))
            store.write_node("cold_import", n, {"node": n, "module": "m", "seconds": 2.5})
        return RunSummary(run="r-suites", playbook=request.playbook, status="successful")

    ran = real_acts(monkeypatch, {"validate.yml": suites})
    slurm.answer("scontrol --oneliner show node gpu002", scontrol_line("gpu002") + "\n")
    request = validate.Request(
        inventory=write_cluster(tmp_path), suites=["storage"], suites_named=True
    )
    report, code = validate.validate(request)

    assert code == ExitCode.VALIDATION_FAILED
    assert ran == ["validate.yml", "validate_drain.yml"]
    reason = f"kiln: storage.mount /shared: {printed}; not benchmarked"
    assert report.actions == {"drain": {"gpu002": reason}, "resume": [], "left": {}}
    assert [c["argv"] for c in slurm.calls()] == [
        ["scontrol", "--oneliner", "show", "node", "gpu002"],
        ["scontrol", "update", "NodeName=gpu002", "State=DRAIN", f"Reason={reason}"],
    ]
    assert report.notes == []
    assert not marker.exists()


def test_the_end_of_a_burn_in_hands_back_reasons_and_drains_on_node_output_verbatim(
    tmp_path, slurm, marker, monkeypatch
):
    """gpu001, drained by Kiln with a Reason holding Jinja, is resumed to test and
    drained again at the end with that Reason; gpu002's kiln-health printed Jinja in the
    round and is drained with it."""
    nodes = ["gpu001", "gpu002"]
    held = f"kiln: {jinja(marker)}"
    printed = f"{BLOCK} {jinja(marker)}"
    scontrol = "\n".join([scontrol_line("gpu001", "IDLE+DRAIN", held), scontrol_line("gpu002")])

    def burn(request):
        ev = request.extravars
        store = Written(Path(ev["validate_results_dir"]))
        if ev["validate_burn_in_step"] == "hold":
            plan = drain.plan(scontrol, nodes).to_dict()
            store.write(layout.SLURM_STATE, {"scontrol": scontrol, "plan": plan})
            return RunSummary(run="r-hold", playbook=request.playbook, status="successful")
        write_round(store, nodes, health={"gpu002": ("FAIL", printed)})
        return RunSummary(run="r-round", playbook=request.playbook, status="successful")

    ran = real_acts(monkeypatch, {"burn_in.yml": burn})
    slurm.answer("scontrol --oneliner show node gpu002", scontrol_line("gpu002") + "\n")
    slurm.answer(
        "scontrol --oneliner show node gpu001", scontrol_line("gpu001", "IDLE+DRAIN", held) + "\n"
    )
    request = burn_in.Request(
        inventory=write_cluster(tmp_path), duration_s=0, profile="h100-sxm-8x-ib400"
    )
    report, code = burn_in.burn_in(request)

    assert code == ExitCode.VALIDATION_FAILED
    assert ran == ["burn_in.yml", "burn_in.yml", "validate_drain.yml"]
    reason = f"kiln: burn-in: round 1: gpu: {printed}"
    assert report.actions == {"drain": {"gpu002": reason}, "resume": ["gpu001"], "left": {}}
    reservation = f"kiln_burn_in_{report.id}"
    assert [c["argv"] for c in slurm.calls()] == [
        ["scontrol", "update", "NodeName=gpu001", "State=DRAIN", f"Reason={held}"],
        ["scancel", f"--reservation={reservation}"],
        ["scontrol", "delete", f"ReservationName={reservation}"],
        ["scontrol", "--oneliner", "show", "node", "gpu002"],
        ["scontrol", "update", "NodeName=gpu002", "State=DRAIN", f"Reason={reason}"],
        ["scontrol", "--oneliner", "show", "node", "gpu001"],
        ["scontrol", "update", "NodeName=gpu001", "State=RESUME"],
    ]
    assert not marker.exists()


NODE_OUTPUT = """
- name: What a node printed, kept as Kiln's roles keep it
  hosts: all
  gather_facts: false
  tasks:
    - name: A node prints text and JSON holding Jinja
      ansible.builtin.command: cat {{ said | quote }}
      register: printed
      changed_when: false
      when: not from_cache | bool
    - name: Kept as a fact, and in the fact cache for the next run
      ansible.builtin.set_fact:
        kept: "{{ printed.stdout_lines[0] }}"
        parsed: >-
          {{ printed.stdout_lines[1] | from_json
             | kiln.cluster.kiln_validate_still_ours(['gpu001']) }}
        cacheable: true
      when: not from_cache | bool
    - name: Used in a template (the second run reads the cache)
      ansible.builtin.copy:
        content: "{{ {'kept': kept, 'parsed': parsed} | to_json }}"
        dest: "{{ out }}"
        mode: "0600"
      vars:
        facts: "{{ ansible_facts if from_cache | bool else hostvars[inventory_hostname] }}"
        kept: "{{ facts['kept'] }}"
        parsed: "{{ facts['parsed'] }}"
"""


def test_node_output_stays_text_through_registers_facts_filters_and_the_fact_cache(
    tmp_path, local_inventory, marker
):
    """What the roles do with node output (register, set_fact, a filter of Kiln's, a
    cacheable fact read back by a later run) never renders it: ansible-core marks
    registered results untrusted, and the jsonfile fact cache reads back plain text."""
    said = tmp_path / "printed.txt"
    line = f"NodeName=gpu001 State=IDLE Reason={jinja(marker)}"
    said.write_text(f"{BLOCK} {jinja(marker)}\n{json.dumps(line)}\n")
    playbook = tmp_path / "node-output.yml"
    playbook.write_text(NODE_OUTPUT)
    inv = local_inventory({"local-a": LOCAL})
    for from_cache in ("false", "true"):
        out = tmp_path / f"out-{from_cache}.json"
        extra = ["-e", f"said={said}", "-e", f"out={out}", "-e", f"from_cache={from_cache}"]
        done = run_kiln("run", str(playbook), "-i", inv, "--limit", "local-a", *extra)
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
        assert json.loads(out.read_text()) == {
            "kept": f"{BLOCK} {jinja(marker)}",
            "parsed": ["gpu001"],
        }
    assert not marker.exists()


OPERATOR_VARS = """
- name: The operator's own -e
  hosts: all
  gather_facts: false
  tasks:
    - name: Write what the play sees
      ansible.builtin.copy:
        content: >-
          {{ {'greeting': greeting, 'reboot': nvidia_driver_reboot, 'kiln': kiln_version}
             | to_json }}
        dest: "{{ out }}"
        mode: "0600"
"""


def test_the_operators_e_values_are_rendered_as_ansible_renders_them_and_kiln_wins_a_clash(
    tmp_path, local_inventory
):
    """-e is the operator's own, as the inventory is: Ansible's usual rendering. Kiln's
    variables (--no-reboot's) come after and win."""
    from kiln import __version__

    playbook, out = tmp_path / "operator.yml", tmp_path / "out.json"
    playbook.write_text(OPERATOR_VARS)
    inv = local_inventory({"local-a": LOCAL})
    extra = ["-e", "greeting={{ 'hi' | upper }}", "-e", "nvidia_driver_reboot=true"]
    done = run_kiln(
        "run", str(playbook), "-i", inv, "--limit", "local-a", "--no-reboot", *extra,
        "-e", f"out={out}",
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert json.loads(out.read_text()) == {"greeting": "HI", "reboot": False, "kiln": __version__}
