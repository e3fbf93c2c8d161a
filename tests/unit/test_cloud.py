"""kiln.cloud: the one rule for which cloud a node's DMI names and what its metadata
service is asked; the node probe fetches what it is told (tested against a local server)."""

import http.server
import json
import subprocess
import sys
import threading

import pytest

from kiln import cloud
from kiln.roles import nccl_env
from tests.conftest import REPO

PROBE = REPO / "roles" / "nccl_env" / "files" / "kiln-nccl-probe"
AZURE = {
    "url": "http://169.254.169.254/metadata/instance/compute/vmSize?api-version=2021-02-01&format=text",
    "header": "Metadata: true",
}
GCP = {
    "url": "http://metadata.google.internal/computeMetadata/v1/instance/machine-type",
    "header": "Metadata-Flavor: Google",
}


@pytest.mark.parametrize(
    ("dmi", "found", "request_"),
    [
        ({"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"}, "aws", {}),
        (
            {"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"},
            "azure",
            AZURE,
        ),
        ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, "gcp", GCP),
        # The control side knew these and the node probe did not, or the other way round:
        # one rule now decides both the cloud and whether its metadata service is asked.
        ({"sys_vendor": "", "product_name": "Google Compute Engine"}, "gcp", GCP),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Surface Pro"}, "", {}),
        ({"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR"}, "", {}),
        ({"sys_vendor": "NVIDIA", "product_name": "DGXH100"}, "", {}),
        ({}, "", {}),
    ],
)
def test_the_cloud_and_its_metadata_request_from_dmi(dmi, found, request_):
    assert (cloud.cloud_of(dmi), cloud.metadata_request(dmi)) == (found, request_)


def test_the_machine_type_in_each_clouds_answer():
    answers = [
        ("gcp", "projects/123456/machineTypes/a3-megagpu-8g\n"),
        ("azure", "Standard_ND96isr_H100_v5"),
        ("", ""),
    ]
    assert [cloud.machine_type(c, a) for c, a in answers] == [
        "a3-megagpu-8g",
        "Standard_ND96isr_H100_v5",
        "",
    ]


@pytest.fixture
def metadata_server():
    """A metadata service on a free local port: answers Google's machine type to a
    request that carries Google's header, 403 to any other (as Google's does)."""
    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append({"path": self.path, "flavor": self.headers.get("Metadata-Flavor")})
            ok = self.headers.get("Metadata-Flavor") == "Google"
            body = b"projects/123456/machineTypes/a3-megagpu-8g" if ok else b"forbidden"
            self.send_response(200 if ok else 403)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/computeMetadata/v1/instance/machine-type", seen
    server.shutdown()
    server.server_close()


def run_probe(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_probe_asks_the_url_it_is_given_and_the_plan_reads_the_machine(metadata_server):
    url, seen = metadata_server
    answer = run_probe("--metadata", url, "--header", GCP["header"])
    assert answer == {"metadata": "projects/123456/machineTypes/a3-megagpu-8g"}
    assert seen == [{"path": "/computeMetadata/v1/instance/machine-type", "flavor": "Google"}]
    # What the role hands kiln.roles.nccl_env: the probe's findings with the answer as "machine".
    probe = {
        "infiniband": {},
        "dmi": {"sys_vendor": "Google", "product_name": "Google Compute Engine"},
        "socket_ifname": "enp0s12",
        "machine": answer["metadata"],
    }
    fabric = nccl_env.fabric_of(probe)
    assert (fabric.cloud, fabric.machine, nccl_env.gcp_plugin(fabric)) == (
        "gcp",
        "a3-megagpu-8g",
        "tcpxo",
    )


def test_a_refused_or_unreachable_metadata_request_answers_nothing(metadata_server):
    url, _ = metadata_server
    assert run_probe("--metadata", url, "--header", "Metadata: true") == {"metadata": ""}
    closed = url.rsplit(":", 1)[0] + ":1/"  # port 1: nothing listens
    assert run_probe("--metadata", closed, "--header", GCP["header"]) == {"metadata": ""}
