"""`kiln monitoring show`'s library: the alerts firing now, node by node, read from Prometheus's
HTTP API: /api/v1/alerts (firing ones; pending ones wait out their `for:`) and
/api/v1/query?query=up (every scrape target, so a node with none shows "ok").

An alert belongs to the node its `node` label names: the metric's own node, which
Prometheus renames `exported_node` where the target's label of the same name wins
(`honor_labels: false`, e.g. the controller's kiln_slurm_node_drain_info about a
compute node); else to the node of its target (`instance`); else to the cluster (an
`absent()` rule carries no label)."""

import http.client
import ipaddress
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pydantic

from kiln import files, hostlist, redact
from kiln.errors import ExitCode, InputError, KilnError
from kiln.inventory import ClusterSpec
from kiln.printable import printable
from kiln.validation.verdicts import Verdict, exit_code

DEFAULT_PORT = 9090
CLUSTER = "(cluster)"  # the line of alerts that name no node
TIMEOUT_S = 10.0  # each step: connecting, each read
# The whole of one answer, however slowly it trickles in (a byte every few seconds
# never trips TIMEOUT_S), and its size: about 8 times the `up` answer of a
# 100,000-node cluster, with room for its firing alerts.
ANSWER_S = 30.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024
UP = "up"


@dataclass
class Target:
    job: str
    instance: str
    up: bool


@dataclass
class Alert:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    active_at: str


@dataclass
class NodeAlerts:
    node: str
    alerts: list[Alert] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """The firing alerts' names, each once, sorted."""
        return sorted({a.name for a in self.alerts})


@dataclass
class Shown:
    prometheus: str
    nodes: list[NodeAlerts]

    @property
    def firing(self) -> int:
        return sum(len(n.alerts) for n in self.nodes)

    @property
    def exit_code(self) -> ExitCode:
        """As a failed node's (5) while an alert fires: something needs a look; else 0."""
        return exit_code(Verdict.FAIL if self.firing else Verdict.PASS)

    def rows(self) -> list[tuple[str, str]]:
        """(node, its firing alerts' names or "ok"), a row each."""
        return [(n.node, ", ".join(n.names) or "ok") for n in self.nodes]

    def to_json(self) -> dict[str, Any]:
        return {"prometheus": self.prometheus, "firing": self.firing, **asdict(self)}


# --- where Prometheus is ------------------------------------------------------------------


def url_from_inventory(spec: ClusterSpec) -> str:
    """http://ADDRESS:PORT of the first `monitoring` host, else the first controller:
    its ansible_host and monitoring_prometheus_port (default 9090)."""
    # The inventory's reader refuses one without a controller.
    host = spec.hosts[(spec.group("monitoring") or spec.group("slurm_controller"))[0]]
    # The inventory's checks refused a port that is none (kiln.roles.monitoring.settings).
    port = host.vars.get("monitoring_prometheus_port", DEFAULT_PORT)
    # Where the role has Prometheus listen (roles/monitoring/vars/main.yml); a wildcard
    # (0.0.0.0, ::) is every address of that host, and from here it would be this
    # machine: then the host's own address.
    listen = str(host.vars.get("monitoring_listen_address") or "")
    if _wildcard(listen):
        listen = ""
    address = listen or host.vars.get("kiln_address") or host.address
    if ":" in address:  # an IPv6 address
        address = f"[{address}]"
    return check_url(f"http://{address}:{port}", f"{host.name}'s address")


def _wildcard(address: str) -> bool:
    """0.0.0.0, ::, [::] and their other spellings (0:0::0): no one host's address."""
    try:
        return ipaddress.ip_address(address.strip("[]")).is_unspecified
    except ValueError:  # a name
        return False


def check_url(url: str, what: str) -> str:
    """URL as given, without a trailing slash: http(s), a host, no query, no user or
    password; WHAT names where it came from in the error, which never shows a password."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        parts = None
    if parts is not None and "@" in parts.netloc:
        # urllib sends no credentials: it would ask the resolver for "user:PW@host".
        host = parts.netloc.rpartition("@")[2]
        shown = url.replace(parts.netloc, f"{redact.HIDDEN}@{host}", 1)
        raise InputError(
            f"{what} {shown!r}: a user or password in the URL is refused (Kiln sends "
            "Prometheus no credentials)"
        )
    try:
        port = parts.port if parts else 0  # ValueError: not a number, or past 65535
    except ValueError:
        parts, port = None, 0
    if (
        parts is None
        or port == 0
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or any(c.isspace() or not c.isprintable() for c in url)
    ):
        raise InputError(
            f"{what} {redact.text(url)!r}: expected Prometheus's address, e.g. http://ctl1:9090 "
            "(http or https, a host, an optional port and path)"
        )
    return url.rstrip("/")


# --- its answers ---------------------------------------------------------------------------


class _Answer(pydantic.BaseModel):
    status: Literal["success", "error"]
    data: Any = None
    errorType: str = ""
    error: str = ""


class _AlertIn(pydantic.BaseModel):
    labels: dict[str, str]
    annotations: dict[str, str] = {}
    state: str
    activeAt: str = ""


class _Alerts(pydantic.BaseModel):
    alerts: list[_AlertIn]


class _Sample(pydantic.BaseModel):
    metric: dict[str, str]
    value: tuple[float, str]


class _Vector(pydantic.BaseModel):
    resultType: Literal["vector"]
    result: list[_Sample]


def _get(base: str, path: str, query: dict[str, str] | None = None) -> Any:
    """The `data` of Prometheus's answer to GET BASE/PATH; KilnError (exit 1) when it
    cannot be reached, refuses, or answers what its API never does."""
    url = f"{base}/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    try:
        body = _download(url)
    except _Cut as exc:
        raise KilnError(f"Prometheus at {base} answered {path} {exc}", ExitCode.FAILED) from None
    except urllib.error.HTTPError as exc:  # the API's own errors come with a JSON body
        body = getattr(exc, "body", b"")
        refused = _envelope(body)
        why = f"{refused.errorType}: {refused.error}" if refused else exc.reason
        raise KilnError(
            f"Prometheus at {base} refused {path}: HTTP {exc.code} {printable(why)}",
            ExitCode.FAILED,
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise KilnError(
            f"Prometheus at {base} cannot be reached: {printable(str(reason))}", ExitCode.FAILED
        ) from None
    found = _envelope(body)
    if found is None:
        raise KilnError(
            f"Prometheus at {base} answered {path} with something other than its API's JSON",
            ExitCode.FAILED,
        )
    if found.status == "error":
        raise KilnError(
            f"Prometheus at {base} refused {path}: "
            + printable(f"{found.errorType}: {found.error}"),
            ExitCode.FAILED,
        )
    return found.data


class _Cut(Exception):
    """An answer cut off: too slow or too large (the message says which)."""


def _download(url: str) -> bytes:
    """The whole answer to GET url, within ANSWER_S and MAX_ANSWER_BYTES. Read in a
    thread of its own, so that the wait for the whole answer is bounded, not each read:
    one left reading past its time is a daemon thread, gone when kiln ends. Raises what
    urlopen raises (an HTTPError with its body, bounded too, as `.body`), or _Cut."""
    box: dict[str, Any] = {}

    def fetch() -> None:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
                box["body"] = _bounded(answer)
        except urllib.error.HTTPError as exc:
            try:
                exc.body = _bounded(exc)  # type: ignore[attr-defined]
            except (_Cut, OSError):
                exc.body = b""  # type: ignore[attr-defined]
            box["error"] = exc
        except Exception as exc:  # raised again in kiln's own thread, as urlopen's own
            box["error"] = exc

    worker = threading.Thread(target=fetch, name="kiln-prometheus", daemon=True)
    worker.start()
    worker.join(ANSWER_S)
    if worker.is_alive():
        raise _Cut(f"too slowly: not whole within {ANSWER_S:g} s")
    if "error" in box:
        raise box["error"]
    return box["body"]


def _bounded(answer: Any) -> bytes:
    """An HTTP answer's body, refused past MAX_ANSWER_BYTES (its Content-Length says so
    at once; else, once that much has come)."""
    too_large = _Cut(f"with over {MAX_ANSWER_BYTES // 2**20} MiB (Kiln's limit)")
    length = answer.headers.get("Content-Length", "")
    if length.isdigit() and len(length) < 20 and int(length) > MAX_ANSWER_BYTES:
        raise too_large
    chunks, size = [], 0
    while chunk := answer.read(1024 * 1024):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _envelope(body: bytes) -> _Answer | None:
    try:
        return _Answer.model_validate(files.loads(body, strict=True))
    except (ValueError, pydantic.ValidationError):  # not JSON, too deep, bad UTF-8 too
        return None


def _read(model: type[pydantic.BaseModel], data: Any, base: str, path: str) -> Any:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "data"
        raise KilnError(
            f"Prometheus at {base} answered {path} with something other than its API's "
            f"JSON (data.{where}: {error['msg']})",
            ExitCode.FAILED,
        ) from None


def show(base: str) -> Shown:
    """Every target's node and every firing alert, node by node (hostlist order; the
    cluster's line first)."""
    alerts = _read(_Alerts, _get(base, "api/v1/alerts"), base, "api/v1/alerts").alerts
    up = _read(_Vector, _get(base, "api/v1/query", {"query": UP}), base, "api/v1/query").result
    nodes: dict[str, NodeAlerts] = {}
    by_instance: dict[str, str] = {}
    for sample in up:
        labels = sample.metric
        instance = labels.get("instance", "")
        node = labels.get("node") or instance
        by_instance.setdefault(instance, node)
        target = Target(labels.get("job", ""), instance, sample.value[1] == "1")
        nodes.setdefault(node, NodeAlerts(node)).targets.append(target)
    for alert in alerts:
        if alert.state != "firing":
            continue
        labels = alert.labels
        node = (
            labels.get("exported_node")
            or labels.get("node")
            or by_instance.get(labels.get("instance", ""))
            or CLUSTER
        )
        found = Alert(labels.get("alertname", ""), labels, alert.annotations, alert.activeAt)
        nodes.setdefault(node, NodeAlerts(node)).alerts.append(found)
    order = sorted(nodes, key=lambda n: (n != CLUSTER, hostlist.sort_key(n)))
    return Shown(base, [nodes[n] for n in order])
