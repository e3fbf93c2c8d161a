"""What Kiln never shows: the one rule for which values are secret, and how a value is
shown with its secrets hidden. Inventory diffs, inventory errors, drift diffs and run
failure messages all go through here.

Secret, shown only as HIDDEN:
- a variable a role declares `no_log`;
- a variable whose name says so: it ends in password, passwd, pass, passphrase,
  secret, token or credentials, or its last word is key (`munge_key_b64` too). This
  covers every secret of Ansible's connection and become plugins (ansible_password,
  ansible_ssh_pass, ansible_become_pass, ansible_ssh_private_key,
  ansible_ssh_private_key_passphrase, ...) and keys inside a value
  (`{AccountingStoragePass: ...}`);
- an ansible-vault value, anywhere in a value;
- the userinfo of a URL, anywhere in any text (`http://user:PW@proxy` is shown as
  `http://(secret)@proxy`);
- a task result Ansible censored (`no_log`): whatever it held, its diff included.
"""

import re
from typing import Any

HIDDEN = "(secret)"
_SECRET_NAME = re.compile(
    r"(pass|passwd|password|passphrase|secret|token|credentials?|(^|[_-]|api)key|[_-]key[_-]b64)$",
    re.IGNORECASE,
)
# scheme://userinfo@host: everything up to the last @ before the path (a password may
# hold an unescaped @); over-hiding a query's @ is the safe side.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"]*@")


def secret_name(name: str) -> bool:
    """Whether a variable (or a key inside a value) is secret by its name alone."""
    return bool(_SECRET_NAME.search(name))


def secret_variable(name: str, spec: dict[str, Any] | None = None) -> bool:
    """Whether a variable's value is never shown: its argument spec (SPEC, where a role
    declares it) says no_log, or its name is secret."""
    return bool(spec and spec.get("no_log")) or secret_name(name)


def censored(result: dict[str, Any]) -> bool:
    """A task result Ansible replaced for no_log: only that it ran, ok or changed, is
    known (drift shows that it would change, never what)."""
    return "censored" in result


def text(value: str) -> str:
    """Free text (a message, a diff) with the userinfo of every URL in it hidden."""
    return _URL_USERINFO.sub(rf"\1{HIDDEN}@", value)


def hide(value: Any) -> Any:
    """A value as Kiln may show it: vault values, the values of secret-named keys and
    URL userinfo hidden, through nested lists and mappings."""
    from kiln.yaml_input import VaultValue

    if isinstance(value, VaultValue):
        return HIDDEN
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {k: HIDDEN if secret_name(str(k)) else hide(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [hide(v) for v in value]
    return value


def shown(name: str, value: Any, spec: dict[str, Any] | None = None) -> str:
    """A variable's value for a message: its repr with secrets hidden, or HIDDEN."""
    return HIDDEN if secret_variable(name, spec) else repr(hide(value))
