"""Which cloud a node runs in, from the names its firmware gives (/sys/class/dmi/id:
sys_vendor, product_name), and how that cloud's metadata service is asked for the
machine type. The one home of both: kiln.roles.nccl_env judges a node's probe with it, and the
nccl_env role asks a node's metadata service only where this module names one (the
kiln_nccl_metadata filter); the node probe (roles/nccl_env/files/kiln-nccl-probe)
decides nothing, it reads DMI and fetches the URL it is given.

Standard library only, importing nothing of Kiln's, so that node-side code can import
it once Kiln's node library ships to the nodes.
"""

# Each cloud's metadata service: the URL that answers the machine type and the header
# it requires (a request without it is refused, so no proxy or page answers instead).
METADATA = {
    "azure": (
        "http://169.254.169.254/metadata/instance/compute/vmSize?api-version=2021-02-01&format=text",
        "Metadata: true",
    ),
    "gcp": (
        "http://metadata.google.internal/computeMetadata/v1/instance/machine-type",
        "Metadata-Flavor: Google",
    ),
}


def cloud_of(dmi: dict[str, str]) -> str:
    """aws, azure, gcp or "" (bare metal, or a cloud Kiln does not know)."""
    vendor = (dmi.get("sys_vendor") or "").strip()
    product = (dmi.get("product_name") or "").strip()
    if vendor == "Amazon EC2" or product.startswith("Amazon EC2"):
        return "aws"
    if vendor == "Microsoft Corporation" and product == "Virtual Machine":
        return "azure"
    if vendor == "Google" or product == "Google Compute Engine":
        return "gcp"
    return ""


def metadata_request(dmi: dict[str, str]) -> dict[str, str]:
    """{url, header} of the metadata service that names the node's machine type, or {}
    where there is none to ask (bare metal; AWS, whose instance type DMI already names)."""
    service = METADATA.get(cloud_of(dmi))
    return {"url": service[0], "header": service[1]} if service else {}


def machine_type(cloud: str, answer: str) -> str:
    """The machine type in a metadata service's answer: Google's is a path
    (projects/123/machineTypes/a3-megagpu-8g), Azure's the size itself."""
    answer = answer.strip()
    return answer.rsplit("/", 1)[-1] if cloud == "gcp" else answer
