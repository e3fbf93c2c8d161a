"""YAML that Kiln is given (inventories, variables, profiles, topologies, `-e @FILE`):
read as one operator-facing step, with every problem on one line naming the file.

Stricter than a plain safe load where a plain load gives a wrong answer or hangs: a key
written twice is refused (the loader would keep the last one silently), and aliases
may not add more than MAX_NODES values nor refer to themselves (a "billion laughs"
document is a few lines that expand to 10^9 values).
"""

from pathlib import Path
from typing import Any

import yaml

from kiln.errors import InputError
from kiln.files import read_text

# Far above any real inventory (16k hosts with their variables) or topology.
MAX_NODES = 1_000_000


class VaultValue(str):
    """An `!vault` encrypted value: Ansible decrypts it at run time; Kiln only sees
    that it is there (its type is a string, its content unknown)."""


class UnsafeValue(str):
    """An `!unsafe` value: a string Ansible never renders as a template. Kept apart so
    that an inventory written again (an image build's) keeps the mark."""


# libyaml's parser where PyYAML has it (its wheels do): the pure-Python one takes three
# to four times as long (a 100,000-host hosts.yml: 15 s against 4). libyaml refuses nesting deeper
# than 1,000 levels itself; Python's stops at its recursion limit.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOO_DEEP = "exceeded maximum nesting depth"


class Loader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """A safe loader that refuses repeated keys and knows Ansible's !vault and !unsafe."""

    def construct_mapping(self, node, deep=False):
        # A key written twice keeps only its last value (Ansible only warns): a second
        # `slurm_compute:` would silently drop the first one's hosts.
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                raise yaml.MarkedYAMLError(
                    problem="a key must be a plain value, not a list or mapping",
                    problem_mark=key_node.start_mark,
                ) from None
            if first is not None:
                raise yaml.MarkedYAMLError(
                    problem=f"{key!r} appears twice (first on line {first + 1})",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


Loader.add_constructor("!vault", lambda loader, node: VaultValue(loader.construct_scalar(node)))
Loader.add_constructor("!unsafe", lambda loader, node: UnsafeValue(loader.construct_scalar(node)))


class Dumper(yaml.SafeDumper):
    """A safe dumper that writes VaultValue and UnsafeValue back with their tags: what
    Kiln writes of an operator's values (an image build's inventory, a setting shown
    beside a proposed one) reads in Ansible as the operator's own did."""


Dumper.add_representer(
    VaultValue, lambda dumper, value: dumper.represent_scalar("!vault", str(value), style="|")
)
Dumper.add_representer(
    UnsafeValue, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value))
)


def load(path: Path, label: str | None = None) -> Any:
    """The YAML document in `path` (None when empty)."""
    label = label or str(path)
    return parse(read_text(path, label), label)


def parse(text: str, label: str) -> Any:
    try:
        data = yaml.load(text, Loader=Loader)
        if "*" in text:  # an alias is written *name: without one, nothing to expand
            _check_size(data, label)
    except RecursionError:
        raise InputError(f"{label}: YAML nested too deeply to read") from None
    except yaml.MarkedYAMLError as exc:
        if exc.problem == _TOO_DEEP:
            raise InputError(f"{label}: YAML nested too deeply to read") from None
        mark = exc.problem_mark
        where = f"{label}:{mark.line + 1}" if mark else label
        raise InputError(f"{where}: YAML does not parse: {exc.problem}") from None
    except yaml.reader.ReaderError as exc:
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        raise InputError(
            f"{label}: YAML does not parse: character 0x{code:02x} at position "
            f"{exc.position} is not allowed"
        ) from None
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines() or ["unknown error"]
        raise InputError(f"{label}: YAML does not parse: {first[0]}") from None
    except ValueError as exc:
        # A scalar the loader cannot turn into its type: an integer of more than the
        # 4,300 digits Python's int() reads, a date such as 2026-13-01.
        why = str(exc).split(";")[0]
        raise InputError(f"{label}: YAML does not parse: a value cannot be read ({why})") from None
    return data


def _check_size(data: Any, label: str) -> None:
    """Count the values `data` holds once aliases are expanded, without expanding them:
    an alias is the same object, so each object's size is computed once. What aliases
    add to the values as written may not pass MAX_NODES; a document that is merely
    long (a 300,000-host hosts.yml) is bounded by the size of its file."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    written = 0

    def size(value: Any) -> int:
        nonlocal written
        if not isinstance(value, (dict, list)):
            written += 1
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]  # an alias: counted again in the total, not as written
        if key in open_:
            raise InputError(f"{label}: an alias refers to the value that contains it")
        open_.add(key)
        written += 1
        children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for child in children:
            total += size(child)
        open_.discard(key)
        sizes[key] = total
        return total

    if size(data) - written > MAX_NODES:
        raise InputError(
            f"{label}: aliases expand to over {MAX_NODES:,} values; refused"
            " (a 'billion laughs' document?)"
        )
