"""kiln-metrics (the monitoring role's node program) on the live machine: its kiln_gpu_*
series against nvidia-smi's own query and `nvidia-smi nvlink -e`, and the file in
Prometheus's text format."""

import json
import re
import shutil
import subprocess

from kiln_node import metrics, nvidia_smi
from tests.gpu import machine as gm
from tests.gpu.conftest import run_program

# Each per-GPU series and the --query-gpu field that states the same fact, with the
# factor from nvidia-smi's unit (nounits) to Prometheus's base unit.
QUERY_OF = {
    "kiln_gpu_temperature_celsius": ("temperature.gpu", 1),
    "kiln_gpu_power_watts": ("power.draw", 1),
    "kiln_gpu_power_limit_watts": ("power.limit", 1),
    "kiln_gpu_sm_clock_hertz": ("clocks.sm", 1_000_000),
    "kiln_gpu_memory_clock_hertz": ("clocks.mem", 1_000_000),
    "kiln_gpu_utilization_ratio": ("utilization.gpu", 0.01),
    "kiln_gpu_memory_used_bytes": ("memory.used", 1 << 20),
    "kiln_gpu_ecc_uncorrected_errors": ("ecc.errors.uncorrected.volatile.total", 1),
    "kiln_gpu_ecc_corrected_errors": ("ecc.errors.corrected.volatile.total", 1),
}
# What may move between kiln-metrics' reading and the query's on an idle GPU: the
# rest must be equal.
MOVES = {
    "kiln_gpu_temperature_celsius": 3,
    "kiln_gpu_power_watts": 30,
    "kiln_gpu_sm_clock_hertz": 2000e6,
    "kiln_gpu_memory_clock_hertz": 4000e6,
    "kiln_gpu_utilization_ratio": 1,
    "kiln_gpu_memory_used_bytes": 512 << 20,
}
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match, line
        labels = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match["labels"]))
        found[(match["name"], labels)] = float(match["value"])
    return found


def check_format(text: str) -> str:
    """promtool where the machine has it, else prometheus_client's parser (the GPU
    image's Python has it); '' when neither is there."""
    promtool = shutil.which("promtool")
    if promtool:
        done = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout + done.stderr) == (0, "")
        return "promtool check metrics"
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return ""
    families = list(text_string_to_metric_families(text))
    # The parser names a counter's family without its _total.
    assert [f.name for f in families] == [
        n.removesuffix("_total") if m.type == "counter" else n
        for n, m in metrics.CATALOGUE.items()
        if m.file == metrics.GPU
    ]
    return "prometheus_client's parser"


def test_kiln_metrics_gpu_file_matches_nvidia_smi(gpu_machine, record, summary, tmp_path):
    config = tmp_path / "metrics.json"
    config.write_text(
        json.dumps(
            {
                "node": "gpu-test-host",
                "metrics_dir": str(tmp_path / "textfile"),
                "temperature_ceiling": 85,
                "sysfs_infiniband": str(tmp_path / "no-infiniband"),
            }
        )
    )
    masks_before = gm.event_masks()
    done = run_program("metrics", "--config", str(config), timeout=90)
    masks_after = gm.event_masks()
    assert (done.returncode, done.stderr) == (0, "")
    text = (tmp_path / "textfile" / metrics.GPU).read_text()
    rows = gm.query((*(f for f, _ in QUERY_OF.values()), "index", "uuid", "name"))
    remap = gm.smi(
        "--query-remapped-rows=remapped_rows.pending,remapped_rows.failure",
        "--format=csv,noheader",
    ).splitlines()
    record.write("kiln_gpu.prom", text, "kiln-metrics (kiln_gpu.prom)")
    found = samples(text)
    node = ("node", "gpu-test-host")

    expected_keys = {("kiln_gpu_temperature_ceiling_celsius", (node,))}
    for row, remapped in zip(rows, remap, strict=True):
        gpu = ("gpu", row["index"])
        info = next(k for k in found if k[0] == "kiln_gpu_info" and gpu in k[1])
        assert dict(info[1])["uuid"] == row["uuid"] and dict(info[1])["name"] == row["name"]
        expected_keys.add(info)
        pending, failure = (v.strip() for v in remapped.split(","))
        for name, wanted in (
            ("kiln_gpu_remapped_rows_pending", pending == "Yes"),
            ("kiln_gpu_remap_failure", failure == "Yes"),
        ):
            assert found[(name, (node, gpu))] == int(wanted), name
            expected_keys.add((name, (node, gpu)))
        for name, (field, factor) in QUERY_OF.items():
            if not re.fullmatch(r"[0-9.]+", row[field]):
                continue  # N/A: no sample
            key = (name, (node, gpu))
            expected_keys.add(key)
            assert abs(found[key] - float(row[field]) * factor) <= MOVES.get(name, 0), (
                name,
                found[key],
                row[field],
            )
    # Clock event reasons: one series per GPU and reason, 1 where the reason's bit is in
    # nvidia-smi's mask; a reason whose bit changed between the two readings around
    # kiln-metrics' (the GPU idling after burn-in) may be either.
    for i, (before, after) in enumerate(zip(masks_before, masks_after, strict=True)):
        for reason, bit in gm.EVENT_BITS.items():
            key = ("kiln_gpu_clock_event_reason", (node, ("gpu", str(i)), ("reason", reason)))
            expected_keys.add(key)
            if before & bit == after & bit:
                assert found.get(key) == int(bool(after & bit)), (key, hex(after))
    # XIDs: one series per GPU and XID the kernel log names; none on a healthy boot.
    dmesg = subprocess.run(["dmesg"], capture_output=True, text=True)
    xid_lines = len(re.findall(r"NVRM: Xid \(", dmesg.stdout))
    xids = {k: v for k, v in found.items() if k[0] == "kiln_gpu_xid_errors_total"}
    assert sum(xids.values()) == xid_lines
    # NVLink: one series per GPU, link and counter `nvidia-smi nvlink -e` prints (none
    # without NVLink); a counter can only have grown since kiln-metrics read it.
    printed = {
        ("kiln_gpu_nvlink_errors_total",
         (node, ("gpu", str(c.gpu)), ("link", str(c.link)), ("counter", c.counter))): c.value
        for c in nvidia_smi.parse_nvlink_errors(gm.smi(*nvidia_smi.NVLINK_ERRORS))
    }  # fmt: skip
    nvlink = {k: v for k, v in found.items() if k[0] == "kiln_gpu_nvlink_errors_total"}
    assert set(nvlink) == set(printed)
    assert all(nvlink[k] <= printed[k] for k in nvlink), (nvlink, printed)
    expected_keys |= set(nvlink)
    assert set(found) - set(xids) == expected_keys
    checked = check_format(text)
    summary.append(
        f"- kiln-metrics: {len(found)} kiln_gpu_* samples, each equal to nvidia-smi's "
        f"query (within an idle GPU's drift), {xid_lines} XID line(s) in dmesg, "
        f"{len(nvlink)} NVLink counter(s) as `nvidia-smi nvlink -e` printed them"
        + (f"; the file passes {checked}." if checked else ".")
    )
