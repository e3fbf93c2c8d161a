"""A validation run's result files written as the validate role writes them (JSON at
the paths kiln.validation.results.Layout names), for tests; Kiln itself only reads
them."""

import json
from pathlib import Path
from typing import Any

from kiln.validation.results import Layout


class Written(Layout):
    """A results directory the test writes into."""

    def write(self, name: str, data: Any) -> None:
        _write(self.path(name), data)

    def write_node(self, kind: str, node: str, data: Any) -> None:
        _write(self.node_path(kind, node), data)


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
