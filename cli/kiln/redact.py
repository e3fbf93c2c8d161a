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
- a field Alertmanager's configuration types `<secret>` whose name does not say so
  (a Slack `api_url` or webhook `url` is the secret itself; an OpsGenie `api_url` is
  not), in Alertmanager's receivers wherever they sit in a value;
- the userinfo of a URL, anywhere in any text (`http://user:PW@proxy` is shown as
  `http://(secret)@proxy`);
- a task result Ansible censored (`no_log`): whatever it held, its diff included.
"""

import functools
import re
from typing import Any

HIDDEN = "(secret)"
_SECRET_NAME = re.compile(
    r"(pass|passwd|password|passphrase|secrets?|token|credentials?|(^|[_-]|api)key|[_-]key[_-]b64)$",
    re.IGNORECASE,
)
# Alertmanager's <secret> and <tmpl_secret> fields (its configuration reference) that
# the name rule above misses, by the list of integrations they sit in. The rest of its
# secrets end in password, secret(s), token, credentials or _key (auth_password,
# api_secret, bot_token, routing_key, service_key, user_key, client_secret,
# basic_auth's password, http_headers' secrets, ...).
_SECRET_IN = {
    "slack_configs": {"api_url"},
    "webhook_configs": {"url"},
    "discord_configs": {"webhook_url"},
    "msteams_configs": {"webhook_url"},
    "msteamsv2_configs": {"webhook_url"},
    "rocketchat_configs": {"token_id"},
}
# Alertmanager's global secrets, and proxy headers (every value secret), by name alone.
_SECRET_ANYWHERE = {"slack_api_url", "rocketchat_token_id", "proxy_connect_header"}
# scheme://userinfo@host: everything up to the last @ before the path (a password may
# hold an unescaped @); over-hiding a query's @ is the safe side.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"]*@")


def secret_name(name: str, within: str = "") -> bool:
    """Whether a variable (or a key inside a value) is secret by its name, and for a key
    of Alertmanager's receivers by the list it sits in (WITHIN: slack_configs)."""
    return (
        bool(_SECRET_NAME.search(name))
        or name in _SECRET_ANYWHERE
        or name in _SECRET_IN.get(within, ())
    )


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


def hide(value: Any, within: str = "") -> Any:
    """A value as Kiln may show it: vault values, the values of secret keys and URL
    userinfo hidden, through nested lists and mappings (WITHIN: the key the value sits
    under, which decides which of Alertmanager's fields are secret)."""
    if type(value) is str:  # the common case, first: an inventory diff hides millions
        return text(value)
    if isinstance(value, _vault_value()):
        return HIDDEN
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {
            k: HIDDEN if secret_name(str(k), within) else hide(v, str(k)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [hide(v, within) for v in value]
    return value


@functools.cache
def _vault_value() -> type:
    from kiln.yaml_input import VaultValue  # imports yaml: not for `kiln --help`

    return VaultValue


def shown(name: str, value: Any, spec: dict[str, Any] | None = None) -> str:
    """A variable's value for a message: its repr with secrets hidden, or HIDDEN."""
    return HIDDEN if secret_variable(name, spec) else repr(hide(value))
