"""Role argument specs (roles/*/meta/argument_specs.yml) as Kiln's variable catalogue.

Each role declares its variables once, for Ansible; Kiln reads the same declarations
to check an inventory before anything runs, so a wrong type is caught with the file
and variable named instead of halfway through a play.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kiln import redact

_TYPE_NAMES = {
    "str": "a string",
    "path": "a path string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
}


@dataclass(frozen=True)
class VariableSpec:
    name: str
    role: str
    spec: dict[str, Any]


def main_options(role: str, roles_dir: Path) -> dict[str, Any]:
    """The options of the role's `main` entry point, as Ansible reads them (none without
    a spec)."""
    spec_file = roles_dir / role / "meta" / "argument_specs.yml"
    data = (yaml.safe_load(spec_file.read_text()) or {}) if spec_file.exists() else {}
    return (data.get("argument_specs", {}).get("main", {}) or {}).get("options", {}) or {}


def load_catalogue(roles_dir: Path) -> dict[str, VariableSpec]:
    """Every variable declared in the main entry point of every role."""
    catalogue: dict[str, VariableSpec] = {}
    for spec_file in sorted(roles_dir.glob("*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        for name, spec in main_options(role, roles_dir).items():
            catalogue[name] = VariableSpec(name=name, role=role, spec=spec or {})
    return catalogue


def is_template(value: Any) -> bool:
    # A Jinja expression is resolved by Ansible at run time; its type is not ours to judge.
    # An `!unsafe` string is never rendered: its text is the value.
    from kiln.yaml_input import UnsafeValue

    if not isinstance(value, str) or isinstance(value, UnsafeValue):
        return False
    return "{{" in value or "{%" in value


def is_opaque(value: Any) -> bool:
    """A value Kiln cannot look into before Ansible runs: a template or a vault secret."""
    from kiln.yaml_input import VaultValue

    return is_template(value) or isinstance(value, VaultValue)


def _type_ok(kind: str, value: Any) -> bool:
    match kind:
        case "str" | "path":
            # Ansible turns numbers into strings without complaint; so do we.
            return isinstance(value, str | int | float) and not isinstance(value, bool)
        case "int":
            return isinstance(value, int) and not isinstance(value, bool)
        case "float":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "bool":
            return isinstance(value, bool)
        case "list":
            return isinstance(value, list)
        case "dict":
            return isinstance(value, dict)
        case _:  # raw and anything we do not model
            return True


def check_value(name: str, value: Any, spec: dict[str, Any], secret: bool = False) -> Iterator[str]:
    """Yield one message per problem, each naming the variable (dotted for nesting).
    The value of a secret (kiln.redact: no_log, a secret name, or inside one) is never
    in a message, only its kind."""
    if is_opaque(value) or (value is None and not spec.get("required")):
        return
    secret = secret or redact.secret_variable(name.rsplit(".", 1)[-1], spec)
    kind = spec.get("type", "str")
    if not _type_ok(kind, value):
        yield f"{name} must be {_TYPE_NAMES.get(kind, kind)}, got {_describe(value, secret)}"
        return
    choices = spec.get("choices")
    if choices is not None and not isinstance(value, list) and value not in choices:
        allowed = ", ".join(str(c) for c in choices)
        shown = redact.HIDDEN if secret else repr(redact.hide(value))
        yield f"{name} must be one of {allowed}, got {shown}"
    if kind == "list":
        element_spec = {"type": spec.get("elements", "raw"), "options": spec.get("options")}
        if choices is not None:
            element_spec["choices"] = choices
        for index, item in enumerate(value):
            yield from check_value(f"{name}[{index}]", item, element_spec, secret)
    elif kind == "dict" and spec.get("options"):
        yield from _check_options(name, value, spec["options"], secret)


def _check_options(
    name: str, value: dict[str, Any], options: dict[str, Any], secret: bool
) -> Iterator[str]:
    for key in value:
        if key not in options:
            known = ", ".join(sorted(options))
            yield f"{name}.{key} is not a known key (known: {known})"
    for key, sub in options.items():
        if key in value:
            yield from check_value(f"{name}.{key}", value[key], sub or {}, secret)
        elif sub and sub.get("required"):
            yield f"{name}.{key} is required"


def _describe(value: Any, secret: bool) -> str:
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)
    if isinstance(value, str):  # an `!unsafe` one too
        kind = "a string"
    if secret:
        return f"{kind} {redact.HIDDEN}"
    text = repr(redact.hide(value))
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"
