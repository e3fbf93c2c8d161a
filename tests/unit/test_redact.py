"""kiln.redact: the one rule for what Kiln never shows."""

from pathlib import Path

import ansible
from ansible.utils.plugin_docs import read_docstring

from kiln import argspec, paths, redact
from kiln.yaml_input import VaultValue

# The options of Ansible's connection and become plugins that hold a secret.
SECRET_OPTIONS = {
    "password",
    "remote_password",
    "become_pass",
    "private_key",
    "private_key_passphrase",
}


def test_every_secret_of_ansibles_connection_and_become_plugins_is_secret_by_name():
    """Read from the ansible-core Kiln runs: every variable that sets one of those
    options is hidden, and none of the others (ansible_host, ansible_user,
    ansible_ssh_private_key_file...) is, so a diff still shows them."""
    plugins = Path(ansible.__file__).parent / "plugins"
    secret, shown = set(), set()
    for kind in ("connection", "become"):
        for path in sorted((plugins / kind).glob("[!_]*.py")):
            doc = read_docstring(str(path))["doc"] or {}
            for option, spec in (doc.get("options") or {}).items():
                names = {v["name"] for v in spec.get("vars") or []}
                (secret if option in SECRET_OPTIONS else shown).update(names)
    assert {"ansible_become_pass", "ansible_ssh_pass", "ansible_password"} <= secret
    assert {"ansible_ssh_private_key_passphrase", "ansible_private_key"} <= secret
    assert {"ansible_host", "ansible_user", "ansible_ssh_private_key_file"} <= shown
    assert {n for n in secret if not redact.secret_name(n)} == set()
    assert {n for n in shown - secret if redact.secret_name(n)} == set()


def test_names_and_declared_no_log_variables():
    secret = [
        "munge_key_b64",
        "slurm_dbd_password",
        "enroot_credentials",
        "registry_token",
        "client_secret",
        "api_key",
        "AccountingStoragePass",
        "slurm_jwt_key",
    ]
    other = ["base_apt_proxy", "ansible_host", "keyboard_layout", "monkey", "health_ib_ports"]
    assert [name for name in secret + other if redact.secret_variable(name)] == secret
    # A role's no_log declaration counts whatever the name.
    catalogue = argspec.load_catalogue(paths.roles_dir())
    assert sorted(n for n, d in catalogue.items() if redact.secret_variable(n, d.spec)) == [
        "enroot_credentials",
        "munge_key_b64",
        "repair_bmc_password",
        "slurm_dbd_password",
    ]
    assert redact.secret_variable("anything", {"type": "str", "no_log": True})
    assert not redact.secret_variable("anything", {"type": "str"})


def test_url_credentials_anywhere_in_text():
    assert redact.text(
        "proxy http://kiln:PW@proxy:3142, mirror https://u:p@ss@deb.example/debian and "
        "ssh://git@forge/x.git; plain https://deb.debian.org/debian?x=1 and a@b"
    ) == (
        "proxy http://(secret)@proxy:3142, mirror https://(secret)@deb.example/debian and "
        "ssh://(secret)@forge/x.git; plain https://deb.debian.org/debian?x=1 and a@b"
    )
    assert redact.text("'http://kiln:PW@proxy'") == "'http://(secret)@proxy'"


def test_values_hide_their_secrets_through_nesting():
    value = {
        "url": "http://kiln:PW@proxy:3142",
        "token": "abc",
        "servers": [{"name": "a", "password": "x"}, "https://u:p@host/", 7, None],
        "login": VaultValue("$ANSIBLE_VAULT;1.1;AES256\n6162\n"),
    }
    assert redact.hide(value) == {
        "url": "http://(secret)@proxy:3142",
        "token": "(secret)",
        "servers": [{"name": "a", "password": "(secret)"}, "https://(secret)@host/", 7, None],
        "login": "(secret)",
    }
    assert redact.shown("munge_key_b64", "c2VjcmV0") == "(secret)"
    assert redact.shown("base_apt_proxy", "http://k:PW@p") == "'http://(secret)@p'"
