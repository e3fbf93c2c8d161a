"""The repair loop's out-of-band step: a node's power cycle through its BMC's Redfish
API, with the `sushy` client library (imported only here, only when a cycle runs), and
the BMC settings kiln-repair reads from a root-only file (/etc/kiln/repair-bmc.json,
written by the repair role from the vault).

The password is never in a message: every error is one line with the password cut out,
whatever the BMC or the library put in it."""

import ipaddress
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# The Redfish reset types tried, best first: one cycle of the power; a hard restart;
# else off, then on once the BMC reports the system off.
PREFERRED = ("PowerCycle", "ForceRestart")
OFF, ON = "ForceOff", "On"
_HOST = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")  # fmt: skip
KEYS = {"username", "password", "verify_tls", "ca_file", "timeout_s", "nodes"}


class BmcError(Exception):
    """Bad BMC settings (kiln-repair exits 2) or a failed power cycle (a failed step):
    one line, never the password."""


@dataclass(frozen=True)
class BmcSettings:
    username: str = ""
    password: str = field(default="", repr=False)
    verify_tls: bool = True
    ca_file: str = ""  # a CA bundle for BMCs with their own certificates; beats verify_tls
    timeout_s: int = 300  # the whole cycle, off to on
    nodes: dict[str, str] = field(default_factory=dict)  # node -> its BMC's base URL

    @property
    def verify(self) -> bool | str:
        return self.ca_file or self.verify_tls

    def address(self, node: str) -> str:
        return self.nodes.get(node, "")


def base_url(address: str) -> str:
    """A BMC address as the inventory gives it (`https://host[:port]` or a bare host or
    IP) as the base URL the client takes; BmcError when it is neither."""
    text = address.strip() if isinstance(address, str) else ""
    parts = urlsplit(text if "://" in text else f"https://{text}")
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:
        host, port = "", None
    valid = _HOST.fullmatch(host) is not None
    if not valid:
        try:
            ipaddress.ip_address(host)
            valid = True
        except ValueError:
            pass
    if (not text or parts.scheme not in ("http", "https") or not valid
            or parts.username or parts.password or parts.path not in ("", "/")
            or parts.query or parts.fragment):  # fmt: skip
        raise BmcError(f"bmc_address {address!r} is not an http(s) URL or a host name")
    netloc = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{netloc}{f':{port}' if port else ''}"


def load(path: str) -> BmcSettings:
    """The settings file; BmcError (one line) for anything wrong in it."""
    try:
        values = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BmcError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise BmcError(f"{path}: not JSON") from None  # the text may hold the password
    if not isinstance(values, dict):
        raise BmcError(f"{path}: not a JSON object")
    return settings(values, path)


def settings(values: dict, where: str = "BMC settings") -> BmcSettings:
    unknown = sorted(set(values) - KEYS)
    if unknown:
        known = ", ".join(sorted(KEYS))
        raise BmcError(f"{where}: unknown setting {unknown[0]}: known are {known}")
    nodes = values.get("nodes", {})
    if not isinstance(nodes, dict):
        raise BmcError(f"{where}: nodes is not a mapping of node to bmc_address")
    urls = {}
    for node, address in sorted(nodes.items()):
        try:
            urls[node] = base_url(address)
        except BmcError as exc:
            raise BmcError(f"{where}: {node}: {exc}") from None
    for key in ("username", "password", "ca_file"):
        if not isinstance(values.get(key, ""), str):
            raise BmcError(f"{where}: {key} is not a string")
    if urls and not (values.get("username") and values.get("password")):
        missing = "username" if not values.get("username") else "password"
        raise BmcError(f"{where}: a bmc_address is set but repair_bmc_{missing} is empty")
    verify = values.get("verify_tls", True)
    if not isinstance(verify, bool):
        raise BmcError(f"{where}: verify_tls {verify!r} is not true or false")
    timeout = values.get("timeout_s", 300)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise BmcError(f"{where}: timeout_s {timeout!r} is not a whole number of 1 or more")
    return BmcSettings(values.get("username", ""), values.get("password", ""), verify,
                       values.get("ca_file", ""), timeout, urls)  # fmt: skip


def plan(allowed: set[str]) -> tuple[str, ...]:
    """The reset types to send, in order, from the ones the system allows."""
    for one in PREFERRED:
        if one in allowed:
            return (one,)
    if {OFF, ON} <= allowed:
        return (OFF, ON)
    raise BmcError(
        f"the system allows no power cycle (PowerCycle, ForceRestart or ForceOff and On): "
        f"{', '.join(sorted(allowed)) or 'no reset types'}"
    )


def _name(value) -> str:
    """A reset type or power state as Redfish names it (sushy gives enums)."""
    return str(getattr(value, "value", value))


def _cycle(url: str, bmc: BmcSettings, deadline: float) -> str:
    import inspect

    import sushy  # only on a controller with BMC repair configured (python3-sushy)

    logging.getLogger("sushy").setLevel(logging.CRITICAL)  # errors come back as one line
    # sushy 5 retries a refused connection for half a minute by default (4.3 has no knob).
    known = inspect.signature(sushy.Sushy).parameters
    quick = {k: 1 for k in ("server_side_retries", "server_side_retries_delay") if k in known}
    client = sushy.Sushy(
        url, username=bmc.username, password=bmc.password, verify=bmc.verify, **quick
    )
    members = client.get_system_collection().get_members()
    if len(members) != 1:
        names = ", ".join(m.identity for m in members) or "none"
        raise BmcError(f"the BMC manages {len(members)} systems ({names}), not one")
    system = members[0]
    allowed = {_name(v): v for v in system.get_allowed_reset_system_values()}
    steps = plan(set(allowed))
    for i, step in enumerate(steps):
        if i:  # ForceOff, then On once the system is off
            while _name(system.power_state) != "Off":
                if time.monotonic() > deadline:
                    raise BmcError(f"the system did not power off within {bmc.timeout_s}s")
                time.sleep(2)
                system.refresh()
        system.reset_system(allowed[step])
    return "+".join(steps)


def power_cycle(node: str, bmc: BmcSettings) -> str:
    """Power-cycle the node through its BMC: the reset types sent (`ForceRestart`,
    `ForceOff+On`), or BmcError with one line that never holds the password. Bounded by
    timeout_s even when the BMC never answers (the client has no timeout of its own)."""
    url = bmc.address(node)
    if not url:
        raise BmcError(f"no bmc_address for {node}")
    done: dict[str, object] = {}

    def attempt() -> None:
        try:
            done["sent"] = _cycle(url, bmc, time.monotonic() + bmc.timeout_s)
        except Exception as exc:  # the library's errors, all made one line below
            done["error"] = exc

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(bmc.timeout_s)
    if worker.is_alive():
        raise BmcError(f"{url}: no answer within {bmc.timeout_s}s")
    if "error" in done:
        raise BmcError(f"{url}: {_one_line(done['error'], bmc.password)}")
    return str(done["sent"])


def _one_line(exc: object, password: str) -> str:
    """The error as one line of at most 200 characters, the password cut out first."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if password:
        text = text.replace(password, "***")
    status = getattr(exc, "status_code", None)
    if status in (401, 403):
        return f"the BMC refused the credentials (HTTP {status})"
    if not isinstance(exc, BmcError):
        text = f"{type(exc).__name__}: {text}"
    return text[:200]
