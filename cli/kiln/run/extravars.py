"""How a run's extra variables reach ansible-playbook: data is never a template.

What a Kiln command passes to a playbook (RunRequest.extravars) holds text Kiln read
from elsewhere: accounting dumps, Slurm reasons, what nodes printed, reports. Ansible
renders `{{ }}` and `{% %}` in the extra variables it trusts, on the control node, as
root. So all of Kiln's go to ansible-playbook as one YAML mapping tagged `!unsafe`:
every string in it, at any depth and dict keys included, is plain text to Ansible.
Only the operator's own `-e` values (RunRequest.operator_extravars) keep Ansible's
usual rendering: they are the operator's, as the inventory is.
"""

import re
from typing import Any

import yaml

UNSAFE = "!unsafe"

_Base = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper


class _Unsafe(dict):
    """A mapping written with the `!unsafe` tag."""


class _Dumper(_Base):  # type: ignore[misc,valid-type]
    pass


def _represent_unsafe(dumper: yaml.SafeDumper, data: _Unsafe) -> yaml.Node:
    node = dumper.represent_dict(data)
    node.tag = UNSAFE
    return node


# Half of a UTF-16 pair, as Python's surrogateescape leaves a byte that is not UTF-8:
# no YAML can carry it. Text for people (a reason, a name) shows U+FFFD there instead.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    return _Base.represent_str(dumper, _LONE_SURROGATE.sub("\ufffd", data))


_Dumper.add_representer(_Unsafe, _represent_unsafe)
_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(tuple, _Base.represent_list)  # as JSON writes them


def unsafe_yaml(values: dict[str, Any]) -> str:
    """VALUES as a YAML document that ansible-core reads as one `!unsafe` mapping.

    The tag is on the mapping, not on each string: ansible-core reads `!unsafe '123'`
    as the number 123 and `!unsafe 'yes'` as true, while a quoted scalar inside an
    `!unsafe` mapping stays the string it was. Non-ASCII and control characters are
    escaped, so any text reads back as it was."""
    return yaml.dump(_Unsafe(values), Dumper=_Dumper, sort_keys=False, allow_unicode=False)
