"""The filter that ships Kiln's node library (kiln.node) to the nodes: the roles whose
node programs import it copy these files."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from kiln import node


def kiln_node_library(_=None):
    """{directories: [...], files: [{path, content}]}, absolute paths on the node."""
    root = Path(node.INSTALL_DIR)
    files = node.shipped_files()
    directories = sorted({str((root / name).parent) for name in files})
    return {
        "directories": [str(root), *directories],
        "files": [{"path": str(root / name), "content": text} for name, text in files.items()],
    }


class FilterModule:
    def filters(self):
        return {"kiln_node_library": kiln_node_library}
