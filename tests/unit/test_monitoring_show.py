"""`kiln monitoring show` against a local HTTP server that answers as Prometheus did
(tests/fixtures/monitoring-show: answers recorded from a real Prometheus 2.42), or
answers garbage, or is not there at all."""

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kiln import inventory
from kiln.commands.monitoring import alerts as show
from kiln.errors import ExitCode, KilnError
from tests.cli.test_bad_input import kiln
from tests.conftest import REPO, cluster_inventory

RECORDED = REPO / "tests" / "fixtures" / "monitoring-show"
JSON = "application/json"


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


class Prometheus:
    """Answers by path and query: {"/api/v1/alerts": (status, content type, body)}."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, str, bytes]] = {
            "/api/v1/alerts": (200, JSON, recorded("alerts.json")),
            "/api/v1/query?query=up": (200, JSON, recorded("up.json")),
        }
        self.asked: list[str] = []
        self.url = ""
        self.no_length = False


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    fake = Prometheus()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake.asked.append(self.path)
            status, kind, body = fake.answers.get(
                self.path, (404, "text/plain; charset=utf-8", b"404 page not found\n")
            )
            self.send_response(status)
            self.send_header("Content-Type", kind)
            if not fake.no_length:  # else the body ends when the connection does
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # Kiln stopped reading
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_line_per_node_with_its_firing_alerts(prometheus, capsys):
    """Each target's node, then its firing alerts (each name once: two GPUs with XID 79),
    pending ones left out (KilnPendingForever), the absent() alert on the cluster's line,
    and exit 5 while any fires."""
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    assert out.splitlines() == [
        "(cluster)  KilnActiveCheckMissing",
        "ctl1       KilnActiveCheckLate",
        "gpu001     ok",
        "gpu002     KilnGpuXid, KilnNodeDrained",
        "gpu003     KilnTargetDown",
    ]
    assert prometheus.asked == ["/api/v1/alerts", "/api/v1/query?query=up"]


def test_json_has_each_alert_its_labels_annotations_and_each_target(prometheus, capsys):
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url + "/", "--json"], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    shown = json.loads(out)
    assert (shown["prometheus"], shown["firing"]) == (prometheus.url, 6)
    nodes = {n["node"]: n for n in shown["nodes"]}
    assert list(nodes) == ["(cluster)", "ctl1", "gpu001", "gpu002", "gpu003"]
    assert nodes["gpu001"] == {
        "node": "gpu001",
        "alerts": [],
        "targets": [{"job": "node", "instance": "127.0.0.1:19102", "up": True}],
    }
    assert nodes["gpu003"]["targets"] == [
        {"job": "node", "instance": "127.0.0.1:19199", "up": False}
    ]
    assert nodes["gpu002"]["alerts"][0] == {
        "name": "KilnNodeDrained",
        "labels": {
            "alertname": "KilnNodeDrained",
            "by": "kiln",
            "instance": "127.0.0.1:19101",
            "job": "node",
            "node": "gpu002",
            "reason": "kiln: storage.mount /shared: not mounted",
            "severity": "warning",
        },
        "annotations": {
            "runbook": "kiln health --nodes gpu002",
            "summary": "gpu002 drained by Kiln",
        },
        "active_at": "2026-11-27T11:32:04.493345377Z",
    }
    assert nodes["(cluster)"]["targets"] == []


def test_the_metrics_own_node_wins_over_the_targets(prometheus, capsys):
    """Scraped without honor_labels, the controller's drain info about gpu002 carries
    node=ctl1 and exported_node=gpu002: the alert is gpu002's."""
    prometheus.answers["/api/v1/alerts"] = (200, JSON, recorded("alerts-exported-node.json"))
    found = show.show(prometheus.url)
    assert found.rows() == [
        ("ctl1", "KilnActiveCheckLate"),
        ("gpu001", "ok"),
        ("gpu002", "KilnGpuXid, KilnNodeDrained"),
        ("gpu003", "KilnTargetDown"),
    ]


def test_nothing_firing_is_ok_and_exit_0(prometheus, capsys):
    answer = json.loads(recorded("alerts.json"))
    answer["data"]["alerts"] = [a for a in answer["data"]["alerts"] if a["state"] == "pending"]
    prometheus.answers["/api/v1/alerts"] = (200, JSON, json.dumps(answer).encode())
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out, err) == (
        ExitCode.OK,
        "ctl1    ok\ngpu001  ok\ngpu002  ok\ngpu003  ok\n",
        "",
    )


def test_an_alert_of_an_instance_with_no_node_label_goes_to_the_targets_node(prometheus):
    answer = {
        "status": "success",
        "data": {
            "alerts": [
                {
                    "labels": {"alertname": "KilnTargetDown", "instance": "127.0.0.1:19199"},
                    "annotations": {},
                    "state": "firing",
                    "activeAt": "2026-11-27T11:32:02Z",
                    "value": "1e+00",
                }
            ]
        },
    }
    prometheus.answers["/api/v1/alerts"] = (200, JSON, json.dumps(answer).encode())
    assert show.show(prometheus.url).rows()[-1] == ("gpu003", "KilnTargetDown")


def test_an_empty_prometheus_says_so(prometheus, capsys):
    empty = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    prometheus.answers["/api/v1/query?query=up"] = (200, JSON, empty)
    prometheus.answers["/api/v1/alerts"] = (200, JSON, b'{"status":"success","data":{"alerts":[]}}')
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out, err) == (
        ExitCode.OK,
        f"no scrape target and no alert firing at {prometheus.url}\n",
        "",
    )


def test_nothing_listening_is_one_line_and_exit_1(capsys):
    url = f"http://127.0.0.1:{closed_port()}"
    code, out, err = kiln(["monitoring", "show", "--url", url], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert (
        err
        == f"kiln: error: Prometheus at {url} cannot be reached: [Errno 111] Connection refused\n"
    )


NOT_API = "answered api/v1/alerts with something other than its API's JSON"
GARBAGE = [
    ("html", (200, "text/html", b"<html><body>Grafana</body></html>"), ""),
    ("not-utf8", (200, JSON, bytes(range(128, 256))), ""),
    ("a-json-list", (200, JSON, b"[1, 2]"), ""),
    ("no-status", (200, JSON, b'{"data": {"alerts": []}}'), ""),
    (
        "alerts-not-a-list",
        (200, JSON, b'{"status":"success","data":{"alerts":{}}}'),
        " (data.alerts: Input should be a valid list)",
    ),
    (
        "alert-without-labels",
        (200, JSON, b'{"status":"success","data":{"alerts":[{"state":"firing"}]}}'),
        " (data.alerts.0.labels: Field required)",
    ),
    # What Python's json cannot hold: a crash before (RecursionError, ValueError)
    ("nested-100000-deep", (200, JSON, b"[" * 100_000 + b"]" * 100_000), ""),
    ("an-integer-of-5000-digits", (200, JSON, b'{"status": ' + b"1" * 5000 + b"}"), ""),
    ("nan", (200, JSON, b'{"status": "success", "data": NaN}'), ""),
]


@pytest.mark.parametrize(
    ("answer", "detail"), [g[1:] for g in GARBAGE], ids=[g[0] for g in GARBAGE]
)
def test_garbage_is_one_line_and_exit_1(prometheus, answer, detail, capsys):
    prometheus.answers["/api/v1/alerts"] = answer
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == f"kiln: error: Prometheus at {prometheus.url} {NOT_API}{detail}\n"


def test_a_refusal_names_prometheus_error(prometheus, capsys):
    """Prometheus's own error answer (recorded: HTTP 400 with its JSON) in the line."""
    prometheus.answers["/api/v1/query?query=up"] = (400, JSON, recorded("bad-query.json"))
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        f"kiln: error: Prometheus at {prometheus.url} refused api/v1/query: HTTP 400 bad_data: "
        'invalid parameter "query": 1:4: parse error: unclosed left parenthesis\n'
    )


def test_a_path_that_is_not_prometheus_api(prometheus, capsys):
    """An address that is some other web server: its 404 page, not the API's JSON."""
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url + "/grafana"], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        f"kiln: error: Prometheus at {prometheus.url}/grafana refused api/v1/alerts: "
        "HTTP 404 Not Found\n"
    )


@pytest.fixture
def dribbling() -> Iterator[str]:
    """A server that sends its headers at once, then a byte of the body every 0.1 s for
    ever: no single read waits long, the whole answer never comes."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", JSON)
            self.end_headers()
            while not stop.wait(0.1):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    stop.set()
    server.shutdown()
    server.server_close()


def test_an_answer_that_trickles_is_cut_off_at_the_whole_answers_time(
    dribbling, monkeypatch, capsys
):
    monkeypatch.setattr(show, "ANSWER_S", 1.0)
    started = time.monotonic()
    code, out, err = kiln(["monitoring", "show", "--url", dribbling], capsys)
    assert time.monotonic() - started < 5  # each read was quick; the whole was not
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        f"kiln: error: Prometheus at {dribbling} answered api/v1/alerts too slowly: not whole "
        "within 1 s\n"
    )


@pytest.mark.parametrize("length", [True, False], ids=["said", "streamed"])
def test_an_answer_too_large_is_refused_without_reading_it_all(
    prometheus, monkeypatch, capsys, length
):
    """Past the bound: at once when Content-Length says so, else once that much came
    (1 GiB of answer in the probe; a small bound here)."""
    monkeypatch.setattr(show, "MAX_ANSWER_BYTES", 2 * 1024 * 1024)
    body = b'{"status": "success", "data": {"alerts": [' + b" " * 3 * 1024 * 1024 + b"]}}"
    prometheus.answers["/api/v1/alerts"] = (200, JSON, body)
    if not length:
        prometheus.no_length = True
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        f"kiln: error: Prometheus at {prometheus.url} answered api/v1/alerts with over 2 MiB "
        "(Kiln's limit)\n"
    )


# --- where Prometheus is, from the inventory ------------------------------------------------


def spec(write_inventory, hosts=None, files=None):
    return inventory.load(write_inventory(hosts=hosts, files=files))


def test_the_first_controller_by_default(write_inventory):
    hosts = cluster_inventory(("ctl1", "ctl2"), host_vars={"ctl1": {"ansible_host": "10.0.0.5"}})
    assert show.url_from_inventory(spec(write_inventory, hosts)) == "http://10.0.0.5:9090"


def test_the_first_monitoring_host_and_its_port(write_inventory):
    hosts = cluster_inventory()
    hosts["all"]["children"]["monitoring"] = {
        "hosts": {"mon1": {"ansible_host": "fd00::7", "monitoring_prometheus_port": 19090}}
    }
    assert show.url_from_inventory(spec(write_inventory, hosts)) == "http://[fd00::7]:19090"


def test_the_port_from_group_vars(write_inventory):
    files = {"group_vars/all.yml": {"monitoring_prometheus_port": 9091}}
    assert show.url_from_inventory(spec(write_inventory, files=files)) == "http://ctl1:9091"


@pytest.mark.parametrize(
    "port, why",
    [
        ("9090", "must be an integer, got a string '9090' (role monitoring)"),
        (0, "0: not a port (1-65535)"),
        (65536, "65536: not a port (1-65535)"),
    ],
)
def test_a_port_that_is_no_port_is_refused_with_the_inventory(write_inventory, port, why):
    """Before any URL is made: the inventory's checks (kiln.roles.monitoring.settings)."""
    files = {"group_vars/all.yml": {"monitoring_prometheus_port": port}}
    with pytest.raises(KilnError) as raised:
        spec(write_inventory, files=files)
    assert raised.value.message == f"group_vars/all.yml: monitoring_prometheus_port {why}"


def test_the_inventory_names_prometheus(prometheus, write_inventory, capsys):
    """No --url: the first controller's address and monitoring_prometheus_port."""
    port = int(prometheus.url.rsplit(":", 1)[1])
    host_vars = {"ctl1": {"ansible_host": "127.0.0.1", "monitoring_prometheus_port": port}}
    inv = write_inventory(hosts=cluster_inventory(host_vars=host_vars))
    code, out, err = kiln(["monitoring", "show", "-i", str(inv)], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    assert out.splitlines()[3] == "gpu002     KilnGpuXid, KilnNodeDrained"
    assert prometheus.asked == ["/api/v1/alerts", "/api/v1/query?query=up"]


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", "[::]", "0:0::0"])
def test_a_wildcard_listen_address_asks_the_hosts_own_address(write_inventory, wildcard):
    """Prometheus listening on every address of its host is asked at that host's
    address: http://0.0.0.0:9090 would be this machine, not the cluster's Prometheus."""
    host_vars = {"ctl1": {"ansible_host": "10.0.0.5", "monitoring_listen_address": wildcard}}
    hosts = cluster_inventory(host_vars=host_vars)
    assert show.url_from_inventory(spec(write_inventory, hosts)) == "http://10.0.0.5:9090"
    host_vars["ctl1"]["kiln_address"] = "fd00::5"  # its cluster address, where set
    hosts = cluster_inventory(host_vars=host_vars)
    assert show.url_from_inventory(spec(write_inventory, hosts)) == "http://[fd00::5]:9090"


def test_a_listen_address_of_one_interface_is_asked(write_inventory):
    host_vars = {"ctl1": {"ansible_host": "10.0.0.5", "monitoring_listen_address": "10.9.0.5"}}
    hosts = cluster_inventory(host_vars=host_vars)
    assert show.url_from_inventory(spec(write_inventory, hosts)) == "http://10.9.0.5:9090"


# Labels as anyone who can set a Slurm reason or a metric's label can write them.
CLEAR_SCREEN = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;owned\x07"
FORGED = "\rkiln: all clear\nok"


def test_labels_from_prometheus_print_their_control_characters_escaped(prometheus, capsys):
    """An alert's name and node reach the terminal with every control character shown
    as its escape: no cleared screen, no window title, no forged line."""
    alert = {
        "labels": {"alertname": f"Kiln{CLEAR_SCREEN}Drained{TITLE}", "node": f"gpu009{FORGED}"},
        "annotations": {},
        "state": "firing",
        "activeAt": "2026-11-27T11:32:04Z",
    }
    body = {"status": "success", "data": {"alerts": [alert]}}
    prometheus.answers["/api/v1/alerts"] = (200, JSON, json.dumps(body).encode())
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    prometheus.answers["/api/v1/query?query=up"] = (200, JSON, json.dumps(empty).encode())
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, err) == (ExitCode.VALIDATION_FAILED, "")
    assert out == ("gpu009\\rkiln: all clear\\nok  Kiln\\x1b[2J\\x1b[HDrained\\x1b]0;owned\\x07\n")
    # --json keeps the labels as Prometheus gave them, in JSON's escapes.
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url, "--json"], capsys)
    assert json.loads(out)["nodes"][0]["alerts"][0]["labels"] == alert["labels"]
    assert "\x1b" not in out and "\r" not in out


def test_an_error_from_prometheus_is_one_line_with_its_controls_escaped(prometheus, capsys):
    """Error text is Prometheus's (or a proxy's): escaped in Kiln's one error line."""
    said = {"status": "error", "errorType": "bad\x1b]0;owned\x07", "error": f"x{FORGED}"}
    prometheus.answers["/api/v1/alerts"] = (400, JSON, json.dumps(said).encode())
    code, out, err = kiln(["monitoring", "show", "--url", prometheus.url], capsys)
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        f"kiln: error: Prometheus at {prometheus.url} refused api/v1/alerts: HTTP 400 "
        "bad\\x1b]0;owned\\x07: x\\rkiln: all clear\\nok\n"
    )
