"""Kiln's node library: what the node programs (roles/*/files) and the control side
both know about the nodes' own outputs, in one place.

Standard library only, and no import of the rest of `kiln`: the node_library role
copies this package to INSTALL_DIR on every host (what it ships: kiln.roles.node_library),
where the node programs run it with the system python3 (3.11 on Debian 12, 3.13 on 13).
"""

# Where the roles install the package on the nodes: each node program puts this (or the
# copy KILN_NODE_LIBRARY names) first on sys.path (it runs without Kiln) before
# `import kiln.node`.
INSTALL_DIR = "/usr/local/lib/kiln"


# Shared: kiln-health's GPU checks (gpu_checks) and the control side's messages.
def counted(number: int, noun: str, plural: str = "") -> str:
    """A count and its noun as a message says it: 1 GPU, 0 GPUs, 8 GPUs (`plural` where
    it is not the noun and an s)."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"
