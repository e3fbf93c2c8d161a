"""NVIDIA IMEX on multi-node NVLink systems (GB200/GB300 NVL72): which nodes run it,
each IMEX domain and its nodes_config.cfg, and the package at the driver's version.
The nvidia_driver role calls it through plugins/filter/kiln_imex.py; the slurm role
asks it which compute nodes run IMEX (SwitchType=switch/nvidia_imex)."""

import ipaddress
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from kiln import hostlist
from kiln.roles.nvidia_driver import versions
from kiln.topology.shape import TopologyError
from kiln.topology.sources import read_nvlink

SETTINGS = ("auto", "required", "off")
# What the role caches on each node (cacheable, so a --limit run still lists every
# node of a domain): {nvlink: [nvidia-smi lines], address, setting, domain}.
NODE_FACT = "nvidia_driver_imex_node"
CONFIG_FILE = "/etc/nvidia-imex/nodes_config.cfg"
# From branch 580 on NVIDIA's CUDA repository names the package without the branch.
UNVERSIONED_FROM = 580


class ImexError(ValueError):
    """IMEX domains that cannot be configured as the nodes report them."""


def package(version: str) -> str:
    """nvidia-imex-570 for a 570 driver, nvidia-imex from 580 on."""
    major = versions.branch(version)
    return "nvidia-imex" if int(major) >= UNVERSIONED_FROM else f"nvidia-imex-{major}"


@dataclass
class Member:
    host: str
    address: str
    cluster_uuid: str
    clique_id: str
    declared: str  # nvidia_driver_imex_domain, or ""


@dataclass
class Domain:
    """One IMEX domain: the nodes of one NVLink partition (clusterUuid + cliqueId), or
    the nodes the inventory names one domain (nvidia_driver_imex_domain)."""

    name: str
    members: list[Member] = field(default_factory=list)

    def nodes_config(self) -> str:
        """nodes_config.cfg: one IP address per line, the same file on every node of the
        domain (IMEX refuses a peer whose node map differs)."""
        return "".join(f"{m.address}\n" for m in sorted(self.members, key=lambda m: m.host))


@dataclass
class HostPlan:
    imex: bool = False  # install, configure and run IMEX here
    domain: str = ""
    nodes_config: str = ""
    skip: str = ""  # why IMEX is not set up here (a note)
    fail: str = ""  # why this node cannot have what its settings ask for

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _members(nodes: dict[str, dict[str, Any]]) -> tuple[list[Member], dict[str, str]]:
    """The nodes IMEX runs on, and the others with the reason. nodes: host -> the
    NODE_FACT each node cached."""
    members, left_out = [], {}
    for host, data in sorted(nodes.items()):
        if data.get("setting", "auto") == "off":
            left_out[host] = "nvidia_driver_imex is off"
            continue
        lines = "\n".join(f"{host}: {line}" for line in data.get("nvlink") or [])
        try:
            domain = read_nvlink(lines, f"nvidia-smi on {host}").get(host)
        except TopologyError as exc:
            raise ImexError(str(exc)) from None
        if domain is None:
            left_out[host] = "no NVLink domain reported (fabric clusterUuid N/A)"
            continue
        address = str(data.get("address") or "")
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ImexError(
                f"{host}: IMEX needs the node's IP address, got {address!r}: set "
                "nvidia_driver_imex_address, or gather facts so its default IPv4 is known"
            ) from None
        members.append(Member(host, address, *domain, str(data.get("domain") or "")))
    return members, left_out


def domains(nodes: dict[str, dict[str, Any]]) -> dict[str, Domain]:
    """Every IMEX domain, by name. Nodes of a declared domain must share one clusterUuid
    (one NVLink domain); their cliqueIds may differ (NVIDIA's domain-wide deployment)."""
    members, _ = _members(nodes)
    found: dict[str, Domain] = {}
    for member in members:
        name = member.declared or f"{member.cluster_uuid}/{member.clique_id}"
        found.setdefault(name, Domain(name)).members.append(member)
    for domain in found.values():
        by_uuid: dict[str, list[str]] = defaultdict(list)
        for member in domain.members:
            by_uuid[member.cluster_uuid].append(member.host)
        if len(by_uuid) > 1:
            listed = "; ".join(
                f"{hostlist.compress(hosts)} {'reports' if len(hosts) == 1 else 'report'} {uuid}"
                for uuid, hosts in by_uuid.items()
            )
            raise ImexError(
                f"IMEX domain {domain.name}: its nodes disagree on clusterUuid ({listed}): "
                "one IMEX domain is one NVLink domain; fix nvidia_driver_imex_domain"
            )
        addresses: dict[str, str] = {}
        for member in domain.members:
            if member.address in addresses:
                raise ImexError(
                    f"IMEX domain {domain.name}: {addresses[member.address]} and "
                    f"{member.host} have the same address {member.address}"
                )
            addresses[member.address] = member.host
    return found


def host_plan(nodes: dict[str, dict[str, Any]], host: str, source: str) -> HostPlan:
    """What the role does about IMEX on `host`. source: nvidia_driver_source."""
    all_domains = domains(nodes)
    _, left_out = _members(nodes)
    setting = (nodes.get(host) or {}).get("setting", "auto")
    for domain in all_domains.values():
        if any(m.host == host for m in domain.members):
            if source == "debian":
                return HostPlan(
                    fail=f"{host} is in NVLink domain {domain.name} and needs IMEX, which "
                    "Debian does not package: use nvidia_driver_source cuda-repo, or set "
                    "nvidia_driver_imex off"
                )
            return HostPlan(True, domain.name, domain.nodes_config())
    why = left_out.get(host, "no NVLink domain data (the driver is not loaded yet)")
    if setting == "required":
        return HostPlan(fail=f"nvidia_driver_imex is required, but {host} has {why}")
    return HostPlan(skip=f"IMEX not set up: {why}")


def imex_hosts(nodes: dict[str, dict[str, Any]], hosts: list[str]) -> list[str]:
    """The hosts among `hosts` that run IMEX."""
    members = {m.host for d in domains(nodes).values() for m in d.members}
    return [h for h in hosts if h in members]
