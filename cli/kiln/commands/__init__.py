"""Click commands: each parses options, calls the library and renders the result."""

from collections.abc import Callable
from typing import Any


def stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Apply a group of Click options (listed top to bottom) as one decorator."""

    def apply(func: Any) -> Any:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply
