"""The repair loop's power cycle through a node's BMC (kiln_node.bmc_power, kiln-repair's
power-cycle step) against a real Redfish service: sushy-tools' emulator with its fake
driver (no libvirt), on 127.0.0.1, started once for the module, with HTTP basic auth from
an htpasswd file. Never a real BMC. Slurm's side is the TEST DOUBLES of
test_repair_program."""

import base64
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import bcrypt
import pytest

from kiln_node import bmc_power, repair_records
from kiln_node.bmc_power import BmcError, BmcSettings
from tests.node_scripts import repair as program
from tests.unit.test_repair_program import SHOW, calls, lab, node

USER, PASSWORD = "kiln-repair", "Vault-kept s3cret!"
SYSTEM = "27946b59-9e44-4fa7-8e91-f3527a1ef094"
DEAD = "no evidence: the node does not answer"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """sushy-emulator --fake on a free port; one system, powered on. Its base URL."""
    folder = tmp_path_factory.mktemp("redfish")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (folder / "htpasswd").write_text(f"{USER}:{hashed}\n")
    system = {"uuid": SYSTEM, "name": "kiln-compute01", "power_state": "On"}
    (folder / "emulator.conf").write_text(
        f"SUSHY_EMULATOR_AUTH_FILE = {str(folder / 'htpasswd')!r}\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = [{system!r}]\n"
        # Its own state: the default (/tmp/sushy-emulator) outlives the run.
        f"SUSHY_EMULATOR_STATE_DIR = {str(folder / 'state')!r}\n"
    )
    port = free_port()
    argv = [sys.executable, "-c", "from sushy_tools.emulator.main import main; main()",
            "--fake", "-i", "127.0.0.1", "-p", str(port),
            "--config", str(folder / "emulator.conf")]  # fmt: skip
    log = (folder / "emulator.log").open("w")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/redfish/v1/", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"sushy-emulator ended: {(folder / 'emulator.log').read_text()}")
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def power_state(url: str) -> str:
    """The emulated system's PowerState, read through the emulator's own API."""
    request = urllib.request.Request(f"{url}/redfish/v1/Systems/{SYSTEM}")
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.load(answer)["PowerState"]


def bmc_lab(tmp_path, monkeypatch, url: str, password: str = PASSWORD, **more) -> list[str]:
    """test_repair_program's Slurm doubles and repair.json, with repair-bmc.json as the
    repair role writes it; c1 is DOWN, not responding."""
    args = lab(tmp_path, monkeypatch, [node("c1", "DOWN+NOT_RESPONDING", "Not responding")])
    bmc = {"username": USER, "password": password, "verify_tls": True, "ca_file": "",
           "timeout_s": 20, "nodes": {"c1": url}} | more  # fmt: skip
    (tmp_path / "repair-bmc.json").write_text(json.dumps(bmc))
    config = json.loads((tmp_path / "repair.json").read_text())
    config["bmc_file"] = str(tmp_path / "repair-bmc.json")
    (tmp_path / "repair.json").write_text(json.dumps(config))
    return args


def entries(tmp_path) -> list[tuple[str, str, str, str, str]]:
    history = repair_records.read_history(str(tmp_path / "state" / "history.jsonl"))
    return [(e.node, e.cls, e.step, e.outcome, e.detail) for e in history]


DRAIN = ("scontrol update NodeName=c1 State=DRAIN "
         "Reason=kiln-repair: slurmd: Not responding; power-cycle")  # fmt: skip


def test_a_silent_node_is_power_cycled_through_its_bmc(emulator, tmp_path, monkeypatch, capsys):
    args = bmc_lab(tmp_path, monkeypatch, emulator)
    assert power_state(emulator) == "On"
    # repair_ssh is off: the restart cannot run; the ladder goes on to the BMC at once.
    assert program.main([*args, "c1"]) == 0
    assert program.main([*args, "c1"]) == 0
    # The emulator allows no PowerCycle: ForceRestart, which turns the system off now
    # and on again a few seconds later.
    assert power_state(emulator) == "Off"
    assert entries(tmp_path) == [
        ("c1", "slurmd", "restart-slurmd", "skipped",
         "Slurm cannot reach c1 and repair_ssh is off"),
        ("c1", "slurmd", "power-cycle", "started", f"ForceRestart through its BMC; {DEAD}"),
    ]  # fmt: skip
    retry = "systemd-run --collect --unit=kiln-repair-retry-c1"
    again = f"--timer-property=AccuracySec=1s {os.path.abspath(sys.argv[0])} c1"
    assert [c for c in calls(tmp_path) if not c.startswith(SHOW)] == [
        f"{retry} --on-active=1 {again}",
        DRAIN,
        f"{retry} --on-active=60 {again}",
    ]
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "c1: repair: c1: slurmd, first step",
        "c1: repair: c1: restart-slurmd skipped, next step",
    ]
    assert PASSWORD not in out + (tmp_path / "calls").read_text()
    assert PASSWORD not in (tmp_path / "state" / "history.jsonl").read_text()


def failed_cycle(tmp_path, monkeypatch, capsys, url: str, password: str) -> str:
    """The power cycle's failure as kiln-repair records it (the step comes first)."""
    args = bmc_lab(tmp_path, monkeypatch, url, password)
    history = tmp_path / "state" / "history.jsonl"
    repair_records.append_history(
        str(history), repair_records.Entry("c1", time.time(), "slurmd", "restart-slurmd", "skipped")
    )
    assert program.main([*args, "c1"]) == 1  # an action failed, recorded
    out, err = capsys.readouterr()
    assert (out, err) == ("c1: repair: c1: restart-slurmd skipped, next step\n", "")
    assert password not in history.read_text() + (tmp_path / "calls").read_text()
    (*_, last) = entries(tmp_path)
    assert last[:4] == ("c1", "slurmd", "power-cycle", "failed")
    assert "\n" not in last[4] and "Traceback" not in last[4]
    return last[4]


def test_a_wrong_password_is_a_failed_step_of_one_line_without_it(
    emulator, tmp_path, monkeypatch, capsys
):
    detail = failed_cycle(tmp_path, monkeypatch, capsys, emulator, "Not the vault's password")
    assert detail == f"{emulator}: the BMC refused the credentials (HTTP 401); {DEAD}"


def test_an_unreachable_bmc_is_a_failed_step_of_one_line(tmp_path, monkeypatch, capsys):
    closed = f"http://127.0.0.1:{free_port()}"
    detail = failed_cycle(tmp_path, monkeypatch, capsys, closed, PASSWORD)
    assert detail.startswith(
        f"{closed}: ConnectionError: Unable to connect to {closed}/redfish/v1/"
    )
    assert detail.endswith(f"; {DEAD}")


class Echoing(http.server.BaseHTTPRequestHandler):
    """A BMC that puts the credentials it was sent into its Redfish error message: the
    service root answers (without auth, no session service: basic auth), the rest fail."""

    def do_GET(self):
        if "Authorization" not in self.headers:
            root = {
                "@odata.id": "/redfish/v1/",
                "Id": "RootService",
                "Name": "Root",
                "RedfishVersion": "1.0.0",
                "Systems": {"@odata.id": "/redfish/v1/Systems"},
            }
            return self.answer(200, root)
        sent = base64.b64decode(self.headers["Authorization"].split()[1]).decode()
        message = f"login {sent} locked"
        return self.answer(400, {"error": {"code": "Base.1.0.GeneralError", "message": message}})

    def answer(self, status: int, body: dict) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


def test_an_error_that_echoes_the_password_does_not_show_it():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echoing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        bmc = BmcSettings(USER, PASSWORD, nodes={"c1": url}, timeout_s=20)
        with pytest.raises(BmcError) as raised:
            bmc_power.power_cycle("c1", bmc)
    finally:
        server.shutdown()
    assert PASSWORD not in str(raised.value)
    assert f"login {USER}:*** locked" in str(raised.value)
    assert str(raised.value).startswith(f"{url}: ")
    assert "\n" not in str(raised.value)


def test_the_reset_types_are_chosen_from_what_the_system_allows():
    assert [
        bmc_power.plan({"On", "ForceOff", "PowerCycle", "ForceRestart"}),
        bmc_power.plan({"On", "ForceOff", "ForceRestart", "GracefulRestart"}),
        bmc_power.plan({"On", "ForceOff", "GracefulShutdown"}),
    ] == [("PowerCycle",), ("ForceRestart",), ("ForceOff", "On")]
    with pytest.raises(BmcError) as raised:
        bmc_power.plan({"On", "Nmi"})
    assert str(raised.value) == (
        "the system allows no power cycle (PowerCycle, ForceRestart or ForceOff and On): Nmi, On"
    )


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("10.0.0.5", "https://10.0.0.5"),
        ("bmc-c1.example.org", "https://bmc-c1.example.org"),
        ("https://bmc-c1.example.org:8443/", "https://bmc-c1.example.org:8443"),
        ("http://10.0.0.5", "http://10.0.0.5"),
        ("[fd00::5]", "https://[fd00::5]"),
    ],
)
def test_a_bmc_address_is_a_host_or_an_http_url(address, url):
    assert bmc_power.base_url(address) == url


@pytest.mark.parametrize(
    "address", ["", "ftp://bmc", "https://root:pw@bmc", "bmc/redfish/v1", "not a host", "bmc:99999"]
)
def test_anything_else_is_refused(address):
    with pytest.raises(BmcError) as raised:
        bmc_power.base_url(address)
    assert str(raised.value) == f"bmc_address {address!r} is not an http(s) URL or a host name"


@pytest.mark.parametrize(
    ("bmc", "error"),
    [
        ({"username": USER, "password": PASSWORD, "nodes": {"c1": "ftp://bmc"}},
         "{path}: c1: bmc_address 'ftp://bmc' is not an http(s) URL or a host name"),
        ({"username": USER, "nodes": {"c1": "10.0.0.5"}},
         "{path}: a bmc_address is set but repair_bmc_password is empty"),
        ({"password": PASSWORD, "nodes": {"c1": "10.0.0.5"}},
         "{path}: a bmc_address is set but repair_bmc_username is empty"),
        ({"username": USER, "password": PASSWORD, "verify_tls": "yes"},
         "{path}: verify_tls 'yes' is not true or false"),
        ({"username": USER, "password": PASSWORD, "realm": "x"},
         "{path}: unknown setting realm: known are ca_file, nodes, password, timeout_s, "
         "username, verify_tls"),
    ],
)  # fmt: skip
def test_bad_bmc_settings_exit_2_with_one_line(tmp_path, monkeypatch, capsys, bmc, error):
    args = bmc_lab(tmp_path, monkeypatch, "10.0.0.5")
    path = tmp_path / "repair-bmc.json"
    path.write_text(json.dumps(bmc))
    assert program.main([*args, "c1"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "kiln-repair: " + error.format(path=path) + "\n")
    assert PASSWORD not in err
    path.write_text('{"password": "' + PASSWORD)  # not JSON: the text is not shown
    assert program.main([*args, "c1"]) == 2
    assert capsys.readouterr().err == f"kiln-repair: {path}: not JSON\n"


def test_the_bmc_settings_hide_the_password_and_verify_by_default():
    bmc = bmc_power.settings({"username": USER, "password": PASSWORD, "nodes": {"c1": "bmc1"}})
    assert PASSWORD not in repr(bmc)
    assert (bmc.verify, bmc.address("c1"), bmc.address("c2")) == (True, "https://bmc1", "")
    own_ca = bmc_power.settings({"verify_tls": False, "ca_file": "/etc/kiln/bmc-ca.pem"})
    assert own_ca.verify == "/etc/kiln/bmc-ca.pem"
    assert bmc_power.settings({"verify_tls": False}).verify is False
    assert bmc_power.settings({}) == BmcSettings()


def test_a_power_cycle_not_back_in_time_is_recorded_failed_and_decided_again(
    tmp_path, monkeypatch, capsys
):
    args = bmc_lab(tmp_path, monkeypatch, "10.0.0.5")
    silent = "kiln-repair: slurmd: Not responding; power-cycle"
    (tmp_path / "nodes.txt").write_text(node("c1", "DOWN+DRAIN+NOT_RESPONDING", silent) + "\n")
    history = str(tmp_path / "state" / "history.jsonl")
    started = repair_records.Entry("c1", time.time() - 1000, "slurmd", "power-cycle", "started")
    repair_records.append_history(history, started)
    assert program.main([*args, "c1"]) == 1
    assert entries(tmp_path)[1][:4] == ("c1", "slurmd", "power-cycle", "failed")
    assert entries(tmp_path)[1][4].startswith("c1: power-cycle started 10")
    assert entries(tmp_path)[1][4].endswith("s ago, not back")
    assert capsys.readouterr().out.startswith("c1: late: c1: power-cycle started 10")
    assert [c.split(" --timer")[0] for c in calls(tmp_path) if not c.startswith(SHOW)] == [
        "systemd-run --collect --unit=kiln-repair-retry-c1 --on-active=1"
    ]


def test_a_node_without_a_bmc_address_is_alerted_at_the_power_cycle(tmp_path, monkeypatch):
    args = bmc_lab(tmp_path, monkeypatch, "10.0.0.5")
    bmc = json.loads((tmp_path / "repair-bmc.json").read_text())
    (tmp_path / "repair-bmc.json").write_text(json.dumps(bmc | {"nodes": {"c2": "10.0.0.6"}}))
    failed = repair_records.Entry("c1", time.time(), "slurmd", "restart-slurmd", "failed")
    repair_records.append_history(str(tmp_path / "state" / "history.jsonl"), failed)
    assert program.main([*args, "c1"]) == 0
    assert entries(tmp_path)[1] == (
        "c1", "slurmd", "alert", "alerted", "power-cycle: no bmc_address for c1"
    )  # fmt: skip
    assert [c for c in calls(tmp_path) if not c.startswith(SHOW)] == []
