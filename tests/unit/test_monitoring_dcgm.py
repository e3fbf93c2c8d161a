"""GPU metrics from dcgm-exporter (kiln.roles.monitoring.dcgm): the `dcgm` scrape job's
relabelling and the recording rules, checked with Prometheus's own tools on
dcgm-exporter's output format (tests/fixtures/monitoring/dcgm-exporter-metrics.txt),
and, where the prometheus binary is installed, by a real Prometheus scraping that output
through the scrape config the monitoring role writes."""

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from kiln.roles.monitoring import dcgm, rules
from kiln_node import gpu_metrics, metrics
from tests.conftest import REPO
from tests.unit.test_filter_plugins import filters
from tests.unit.test_monitoring_role import ROLE, render

FIXTURES = REPO / "tests" / "fixtures" / "monitoring"
EXPORTER_OUTPUT = FIXTURES / "dcgm-exporter-metrics.txt"
PROMTOOL_TESTS = FIXTURES / "dcgm_rules_test.yml"


def test_the_relabelling_renames_the_identity_labels_and_drops_the_host_label():
    assert dcgm.relabel_configs() == [
        {"source_labels": ["UUID"], "regex": "(.+)", "target_label": "uuid"},
        {"source_labels": ["modelName"], "regex": "(.+)", "target_label": "name"},
        {"source_labels": ["pci_bus_id"], "regex": "(.+)", "target_label": "bus_id"},
        {"source_labels": ["DCGM_FI_DRIVER_VERSION"], "regex": "(.+)", "target_label": "driver"},
        {
            "action": "labeldrop",
            "regex": "UUID|modelName|pci_bus_id|DCGM_FI_DRIVER_VERSION|Hostname|hostname",
        },
    ]


def test_one_recording_rule_per_kiln_metric_with_its_unit_conversion():
    keep = "max by (job, instance, node, gpu)"
    assert dcgm.recording_rules() == [
        {"record": "kiln_gpu_temperature_celsius",
         "expr": f'{keep} (DCGM_FI_DEV_GPU_TEMP{{job="dcgm"}})'},
        {"record": "kiln_gpu_power_watts",
         "expr": f'{keep} (DCGM_FI_DEV_POWER_USAGE{{job="dcgm"}})'},
        {"record": "kiln_gpu_power_limit_watts",
         "expr": f'{keep} (DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{job="dcgm"}})'},
        {"record": "kiln_gpu_sm_clock_hertz",
         "expr": f'1000000 * {keep} (DCGM_FI_DEV_SM_CLOCK{{job="dcgm"}})'},
        {"record": "kiln_gpu_memory_clock_hertz",
         "expr": f'1000000 * {keep} (DCGM_FI_DEV_MEM_CLOCK{{job="dcgm"}})'},
        {"record": "kiln_gpu_utilization_ratio",
         "expr": f'0.01 * {keep} (DCGM_FI_DEV_GPU_UTIL{{job="dcgm"}})'},
        {"record": "kiln_gpu_memory_used_bytes",
         "expr": f'1048576 * {keep} (DCGM_FI_DEV_FB_USED{{job="dcgm"}})'},
        {"record": "kiln_gpu_ecc_uncorrected_errors",
         "expr": f'{keep} (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{job="dcgm"}})'},
        {"record": "kiln_gpu_ecc_corrected_errors",
         "expr": f'{keep} (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{job="dcgm"}})'},
        {"record": "kiln_gpu_remapped_rows_pending",
         "expr": f'{keep} (DCGM_FI_DEV_ROW_REMAP_PENDING{{job="dcgm"}})'},
        {"record": "kiln_gpu_remap_failure",
         "expr": f'{keep} (DCGM_FI_DEV_ROW_REMAP_FAILURE{{job="dcgm"}})'},
        {"record": "kiln_gpu_info",
         "expr": "group by (job, instance, node, gpu, uuid, name, bus_id, driver)"
                 ' (DCGM_FI_DEV_GPU_TEMP{job="dcgm"})'},
    ]  # fmt: skip


def test_each_field_converts_from_the_unit_kiln_metrics_reads_from_nvidia_smi():
    """nvidia-smi and DCGM give each quantity in the same unit (MHz, %, MiB, W, C):
    the factors to Kiln's units agree with kiln-metrics' own, metric by metric."""
    assert {f.kiln: f.factor for f in dcgm.FIELDS} == {
        name: factor for name, (_field, factor) in gpu_metrics._PER_GPU.items()
    }
    for name in dcgm.from_dcgm():
        assert metrics.CATALOGUE[name].file == metrics.GPU, name


def test_what_stays_with_kiln_metrics_on_a_dcgm_exporter_host():
    """The XID counts (DCGM gives only the last XID's number) and the ceiling, and any GPU
    metric the mapping does not cover (kiln_gpu_nvlink_errors_total, once catalogued; the
    clock event reasons, which DCGM gives as one bitmask)."""
    kept = [name for name, m in metrics.CATALOGUE.items()
            if m.file == metrics.GPU and name not in dcgm.from_dcgm()]  # fmt: skip
    assert {"kiln_gpu_temperature_ceiling_celsius", "kiln_gpu_xid_errors_total"} <= set(kept)
    assert set(kept) - {"kiln_gpu_temperature_ceiling_celsius", "kiln_gpu_xid_errors_total"} <= {
        "kiln_gpu_nvlink_errors_total",
        "kiln_gpu_clock_event_reason",
    }


def test_the_sources_are_the_argument_specs_choices():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    assert tuple(options["monitoring_gpu_source"]["choices"]) == dcgm.SOURCES
    assert dcgm.source_problem("dcgm-exporter") == ""
    assert dcgm.source_problem("dcgm") == (
        "'dcgm' is not a GPU metrics source (kiln or dcgm-exporter)"
    )


def test_the_filters_give_the_mapping():
    offered = filters("kiln_monitoring")
    assert offered["kiln_monitoring_dcgm_relabel_configs"]() == dcgm.relabel_configs()
    assert offered["kiln_monitoring_dcgm_metrics"]() == dcgm.from_dcgm()
    assert offered["kiln_monitoring_rules"]("30s", "dcgm-exporter") == rules.rules_text(
        "30s", "dcgm-exporter"
    )


def test_the_rules_file_has_the_recording_rules_only_with_dcgm_exporter():
    assert [g["name"] for g in rules.rules(15)["groups"]] == ["kiln"]
    groups = rules.rules(15, "dcgm-exporter")["groups"]
    assert [g["name"] for g in groups] == ["kiln", "kiln-dcgm"]
    assert groups[0] == rules.rules(15)["groups"][0]
    assert groups[1]["rules"] == dcgm.recording_rules()
    with pytest.raises(ValueError, match=r"^'dcgm' is not a GPU metrics source"):
        rules.rules_text(15, "dcgm")


def test_the_recording_rules_pass_promtool_and_its_tests(tmp_path, promtool):
    """promtool runs dcgm_rules_test.yml against the rules file: dcgm-exporter's fields as
    Prometheus stores them after the relabelling, in, Kiln's series and alerts, out."""
    path = tmp_path / "kiln.rules.yml"
    path.write_text(rules.rules_text(15, "dcgm-exporter"))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    count = len(rules.ALERTS) + len(dcgm.recording_rules())
    assert (done.returncode, done.stdout) == (
        0,
        f"Checking {path}\n  SUCCESS: {count} rules found\n\n",
    ), done.stderr
    shutil.copy(PROMTOOL_TESTS, tmp_path / "dcgm_rules_test.yml")
    done = subprocess.run(
        [promtool, "test", "rules", "dcgm_rules_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (
        0,
        "Unit Testing:  dcgm_rules_test.yml\n  SUCCESS\n\n",
    ), done.stdout + done.stderr


def test_the_recorded_exporter_output_parses_as_prometheus_reads_it(promtool):
    """promtool parses dcgm-exporter's output (exit 3: lint findings only, no parse
    error); what it finds is dcgm-exporter's naming, which Kiln does not change: counters
    without _total and camelCase labels (modelName, pci_bus_id's neighbours)."""
    text = EXPORTER_OUTPUT.read_text()
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True
    )
    findings = {line.split(" ", 1)[1] for line in (done.stdout + done.stderr).splitlines()}
    assert (done.returncode, findings) == (
        3,
        {
            'counter metrics should have "_total" suffix',
            "label names should be written in 'snake_case' not 'camelCase'",
            "metric name should not include type 'counter'",
        },
    )
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert {f.dcgm for f in dcgm.FIELDS} <= set(families)
    assert sum(1 for line in text.splitlines() if not line.startswith("#")) == 8 * len(families)


def test_the_docs_give_the_counters_file_and_the_mapping():
    docs = (REPO / "docs" / "monitoring.md").read_text()
    section = docs.split("## GPU metrics from DCGM", 1)[1].split("\n## ", 1)[0]
    assert f"```\n{dcgm.counters_csv()}```" in section
    header = "| DCGM field | its unit | Kiln metric | factor |\n|---|---|---|---|\n"
    table = section.split(header)[1]
    rows = [row for row in table.splitlines() if row.startswith("|")]
    assert rows[: len(dcgm.FIELDS)] == [
        f"| `{f.dcgm}` | {f.unit} | `{f.kiln}` | {dcgm._number(f.factor)} |" for f in dcgm.FIELDS
    ]


# --- a real Prometheus scraping the recorded output --------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self):
        body = EXPORTER_OUTPUT.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["data"]["result"]


def _by_gpu(results: list[dict]) -> dict[str, float]:
    return {r["metric"]["gpu"]: float(r["value"][1]) for r in results}


BUSY, IDLE = "01234567", "5"  # GPU 5 is the idle, faulty one


def _per_gpu(busy: float, idle: float) -> dict[str, float]:
    return {gpu: idle if gpu == IDLE else busy for gpu in BUSY}


# Kiln's series from the recorded output, in Kiln's units, GPU by GPU.
EXPECTED = {
    "kiln_gpu_temperature_celsius": dict(zip(BUSY, [62, 60, 63, 59, 64, 71, 61, 58], strict=True)),
    "kiln_gpu_power_watts": dict(
        zip(
            BUSY,
            [652.451, 640.118, 661.873, 633.902, 668.245, 97.336, 649.587, 637.014],
            strict=True,
        )
    ),
    "kiln_gpu_power_limit_watts": _per_gpu(700, 700),
    "kiln_gpu_sm_clock_hertz": _per_gpu(1.98e9, 3.45e8),
    "kiln_gpu_memory_clock_hertz": _per_gpu(2.619e9, 2.619e9),
    "kiln_gpu_utilization_ratio": _per_gpu(1, 0),
    "kiln_gpu_memory_used_bytes": _per_gpu(74563 * 2**20, 0),
    "kiln_gpu_ecc_uncorrected_errors": _per_gpu(0, 1),
    "kiln_gpu_ecc_corrected_errors": _per_gpu(0, 12),
    "kiln_gpu_remapped_rows_pending": _per_gpu(0, 1),
    "kiln_gpu_remap_failure": _per_gpu(0, 0),
}
BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
UUIDS = [
    "GPU-5ad7f5d0-41f3-2b6b-3d6f-2f3c9f0e1a01",
    "GPU-0c3e8c4b-6a4e-7f1d-92b1-6d0e4f7a2b02",
    "GPU-9f2a1d7e-3b5c-4e8f-a1d2-7c6b5a4e3d03",
    "GPU-e4b7c2a9-8d1f-4a6e-b3c5-2d9f8e7a6b04",
    "GPU-71c5e3f8-2a9d-4b7c-8e1f-5a3d2c9b8e05",
    "GPU-3d8f6b2e-9c4a-4e1d-b7f5-8a2c6e4d1f06",
    "GPU-b2e9d4c7-5f3a-4d8b-9c2e-1f7a4b6d3e07",
    "GPU-6a4c8e1d-7b2f-4c9a-a5e3-9d1b7f2c4a08",
]


def test_prometheus_scrapes_dcgm_exporter_into_kilns_series(tmp_path):
    """Prometheus (the Debian package's binary, scripts/setup-host.sh) with the
    prometheus.yml the role writes for dcgm-exporter on gpu001 and the rules file it
    writes, scraping the recorded output every second: Kiln's series in Kiln's units,
    kiln_gpu_info with the identity labels, DCGM's own fields relabelled, and Kiln's
    uncorrectable-ECC alert firing on GPU 5."""
    prometheus = shutil.which("prometheus")
    if not prometheus:
        pytest.skip("the prometheus binary is not installed: run scripts/setup-host.sh")
    exporter = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    exporter_port, port = exporter.server_address[1], _free_port()
    rules_file = tmp_path / "kiln-rules.yml"
    rules_file.write_text(rules.rules_text("1s", "dcgm-exporter"))
    config = render(
        "prometheus.yml.j2",
        "ctl1",
        monitoring_gpu_source="dcgm-exporter",
        monitoring_dcgm_exporter_hosts=["gpu001"],
        monitoring_dcgm_exporter_port=exporter_port,
        monitoring_listen_address="127.0.0.1",
        monitoring_scrape_hosts=[],
        monitoring_scrape_interval="1s",
        _monitoring_rules_file=str(rules_file),
        _monitoring_dcgm_relabel_configs=dcgm.relabel_configs(),
    )
    (tmp_path / "prometheus.yml").write_text(config)
    server = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        deadline = time.monotonic() + 20
        firing: list[dict] = []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                firing = _query(port, 'ALERTS{alertstate="firing"}')
                info = _query(port, "kiln_gpu_info")
            except OSError:
                continue
            if firing and len(info) == 8:
                break
        else:
            pytest.fail("no alert within 20 s:\n" + (tmp_path / "prometheus.log").read_text())
        instance = f"127.0.0.1:{exporter_port}"
        target = {"job": "dcgm", "instance": instance, "node": "gpu001"}
        assert [r["metric"] for r in firing] == [
            {"__name__": "ALERTS", "alertname": "KilnGpuUncorrectableEcc",
             "alertstate": "firing", "severity": "critical", **target, "gpu": "5"}
        ]  # fmt: skip
        for name, expected in EXPECTED.items():
            found = _query(port, name)
            assert _by_gpu(found) == pytest.approx(expected), name
            assert {frozenset(r["metric"]) for r in found} == {
                frozenset({"__name__", "job", "instance", "node", "gpu"})
            }, name
        assert sorted((r["metric"] for r in info), key=lambda m: m["gpu"]) == [
            {"__name__": "kiln_gpu_info", **target, "gpu": str(i), "uuid": uuid,
             "name": "NVIDIA H100 80GB HBM3", "bus_id": f"00000000:{bus}:00.0",
             "driver": "580.159.04"}
            for i, (uuid, bus) in enumerate(zip(UUIDS, BUSES, strict=True))
        ]  # fmt: skip
        (xid,) = _query(port, 'DCGM_FI_DEV_XID_ERRORS{gpu="5"}')
        assert xid["metric"] == {
            "__name__": "DCGM_FI_DEV_XID_ERRORS", **target, "gpu": "5", "device": "nvidia5",
            "uuid": UUIDS[5], "name": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:AB:00.0",
            "driver": "580.159.04", "err_code": "48", "err_msg": "Double Bit ECC Error",
        }  # fmt: skip
        assert xid["value"][1] == "48"
    finally:
        server.terminate()
        server.wait(timeout=10)
        exporter.shutdown()
