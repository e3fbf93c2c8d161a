"""Slurm topology from what the operator has: an InfiniBand fabric dump
(ibnetdiscover), rack/switch labels in the inventory, NVLink domains, or a file
written by hand. Sources build a Topology; writers turn it into topology.conf or
topology.yaml. Pure Python: the CLI and the Ansible roles share it."""

from kiln.topology.shape import Block, Switch, Topology, TopologyError

__all__ = ["Block", "Switch", "Topology", "TopologyError"]
