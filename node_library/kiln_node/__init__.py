"""Kiln's node library: what the node programs (roles/*/files) and the control side
both know about the nodes' own outputs, in one place.

It lives apart from `kiln` (node_library/ in the tree, a package of its own) because it
ships to the nodes: standard library only, importing nothing of `kiln`. The
node_library role copies it to INSTALL_DIR on every host (what it ships:
kiln.roles.node_library), where the node programs run it with the system python3
(3.10 on Ubuntu 22.04 at the oldest); the control side imports the same modules.
"""

# Where the roles install the package on the nodes: each node program puts this (or the
# copy KILN_NODE_LIBRARY names) first on sys.path (it runs without Kiln) before
# `import kiln_node`.
INSTALL_DIR = "/usr/local/lib/kiln"


# Shared: kiln-health's GPU checks (gpu_checks) and the control side's messages.
def counted(number: int, noun: str, plural: str = "") -> str:
    """A count and its noun as a message says it: 1 GPU, 0 GPUs, 8 GPUs (`plural` where
    it is not the noun and an s)."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"
