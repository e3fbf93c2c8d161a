"""`kiln inventory diff A B` through the real `kiln` process: a region migration where
only endpoints, host names and secrets change."""

import json

from kiln.errors import ExitCode
from tests.conftest import REPO, run_kiln

KEY_A = "a2lsbi1tdW5nZS1rZXktQS0xMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNA=="
KEY_B = "a2lsbi1tdW5nZS1rZXktQi0xMjM0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNA=="


def site(write_inventory, name, *, prefix, mirror, address, key, extra=None):
    hosts = {
        "all": {
            "children": {
                "slurm_controller": {"hosts": {"head01": {"ansible_host": address}}},
                "slurm_compute": {
                    "hosts": {f"{prefix}[001:002]": {}},
                    "vars": {"nccl_env_overrides": {"NCCL_IB_HCA": "mlx5_0"}},
                },
            }
        }
    }
    settings = {
        "base_apt_proxy": mirror,
        "munge_key_b64": key,
        "validate_profile": "h100-sxm-8x-ib400",
        **(extra or {}),
    }
    return write_inventory(hosts, {"group_vars/all/site.yml": settings}, name=name)


def test_only_endpoints_names_and_secrets_differ(write_inventory):
    old = site(
        write_inventory,
        "us-east",
        prefix="gpu",
        mirror="http://mirror.us-east:3142",
        address="10.1.0.11",
        key=KEY_A,
        extra={"registry_password": "hunter2-old"},
    )
    new = site(
        write_inventory,
        "eu-west",
        prefix="gpx",
        mirror="http://mirror.eu-west:3142",
        address="10.2.0.11",
        key=KEY_B,
        extra={"registry_password": "hunter2-new"},
    )
    shown = run_kiln("inventory", "diff", str(old), str(new))
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert shown.stdout.splitlines() == [
        f"inventory diff: {old} -> {new}",
        "group all:",
        "  hosts removed: gpu[001-002]",
        "  hosts added: gpx[001-002]",
        "  base_apt_proxy: 'http://mirror.us-east:3142' -> 'http://mirror.eu-west:3142'",
        "  munge_key_b64: differs (secret, not shown)",
        "  registry_password: differs (secret, not shown)",
        "group slurm_compute:",
        "  hosts removed: gpu[001-002]",
        "  hosts added: gpx[001-002]",
        "group slurm_controller:",  # one host: its address is the group's
        "  ansible_host: '10.1.0.11' -> '10.2.0.11'",
    ]
    for secret in (KEY_A, KEY_B, "hunter2"):
        assert secret not in shown.stdout + shown.stderr

    as_json = run_kiln("inventory", "diff", str(old), str(new), "--json")
    assert as_json.returncode == ExitCode.OK, as_json.stderr
    data = json.loads(as_json.stdout)
    secret = {"before": "(secret)", "after": "(secret)", "secret": True}
    assert data == {
        "before": str(old),
        "after": str(new),
        "same": False,
        "groups": [
            {
                "group": "all",
                "hosts_added": ["gpx001", "gpx002"],
                "hosts_removed": ["gpu001", "gpu002"],
                "variables": [
                    {
                        "name": "base_apt_proxy",
                        "before": "http://mirror.us-east:3142",
                        "after": "http://mirror.eu-west:3142",
                        "secret": False,
                    },
                    {"name": "munge_key_b64", **secret},
                    {"name": "registry_password", **secret},
                ],
            },
            {
                "group": "slurm_compute",
                "hosts_added": ["gpx001", "gpx002"],
                "hosts_removed": ["gpu001", "gpu002"],
                "variables": [],
            },
            {
                "group": "slurm_controller",
                "hosts_added": [],
                "hosts_removed": [],
                "variables": [
                    {
                        "name": "ansible_host",
                        "before": "10.1.0.11",
                        "after": "10.2.0.11",
                        "secret": False,
                    }
                ],
            },
        ],
    }
    for value in (KEY_A, KEY_B, "hunter2"):
        assert value not in as_json.stdout


def test_the_same_settings_and_group_changes(write_inventory):
    args = dict(prefix="gpu", mirror="http://m:3142", address="10.1.0.11", key=KEY_A)
    old = site(write_inventory, "one", **args)
    same = site(write_inventory, "two", **args)
    shown = run_kiln("inventory", "diff", str(old), str(same))
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert shown.stdout.splitlines() == [
        f"inventory diff: {old} -> {same}",
        "no difference in effect",
    ]
    changed = site(write_inventory, "three", **args)
    (changed / "group_vars" / "slurm_compute.yml").write_text("nccl_env_overrides: {}\n")
    shown = run_kiln("inventory", "diff", str(old), str(changed))
    assert shown.stdout.splitlines()[1:] == [
        "group slurm_compute:",
        "  nccl_env_overrides: {'NCCL_IB_HCA': 'mlx5_0'} -> {}",
    ]


def test_an_invalid_inventory_is_refused(write_inventory, tmp_path):
    good = site(
        write_inventory, "good", prefix="gpu", mirror="http://m:3142", address="a", key=KEY_A
    )
    shown = run_kiln("inventory", "diff", str(good), str(tmp_path / "missing"))
    assert shown.returncode == ExitCode.BAD_INPUT
    assert shown.stderr.startswith("kiln: error: ") and len(shown.stderr.splitlines()) == 1


def test_the_two_region_example_differs_only_in_endpoints_and_names():
    """inventories/examples/two-regions: both regions link the same cluster.yml; the
    diff is the site layers and the host lists, nothing of the cluster's settings."""
    example = REPO / "inventories" / "examples" / "two-regions"
    old, new = example / "us-east", example / "eu-west"
    assert (old / "group_vars/all/cluster.yml").resolve() == example / "cluster.yml"
    assert (new / "group_vars/all/cluster.yml").resolve() == example / "cluster.yml"
    shown = run_kiln("inventory", "diff", str(old), str(new), "--json")
    assert shown.returncode == ExitCode.OK, shown.stderr
    found = json.loads(shown.stdout)
    changed = {g["group"]: {v["name"] for v in g["variables"]} for g in found["groups"]}
    assert changed == {
        "all": {
            "autofs_mounts",
            "base_apt_proxy",
            "base_ntp_servers",
            "nccl_env_overrides",
            "slurm_topology_fabric_hosts",
        },
        "slurm_compute": set(),
        "slurm_controller": {"ansible_host"},
    }
    moved = {g["group"]: (g["hosts_removed"], g["hosts_added"]) for g in found["groups"]}
    gpu, gpx = [f"gpu00{i}" for i in range(1, 5)], [f"gpx00{i}" for i in range(1, 5)]
    assert moved == {
        "all": ([*gpu, "head01"], ["ctl01", *gpx]),
        "slurm_compute": (gpu, gpx),
        "slurm_controller": (["head01"], ["ctl01"]),
    }


def secrets_site(write_inventory, name, *, region, password, vaulted):
    """A site whose Ansible connection secrets, proxy credentials and a vault value in
    a nested setting change with the region."""
    hosts = {
        "all": {
            "children": {
                "slurm_controller": {"hosts": {"head01": {"ansible_ssh_pass": f"ssh-{password}"}}},
                "slurm_compute": {"hosts": {"gpu[001:002]": {}}},
            }
        }
    }
    settings = f"""\
ansible_become_pass: become-{password}
ansible_become_password: become-{password}
ansible_password: login-{password}
ansible_ssh_private_key_passphrase: phrase-{password}
base_apt_proxy: http://kiln:{password}@proxy.{region}:3142
site_proxy: http://kiln:{password}@proxy:3128
site_mirrors:
  - name: debian
    urls: ["https://mirror:{password}@deb.{region}/debian", "https://deb.debian.org/debian"]
    AccountingStoragePass: {password}
site_registry:
  user: kiln
  login: !vault |
    $ANSIBLE_VAULT;1.1;AES256
    {vaulted}
"""
    return write_inventory(hosts, {"group_vars/all/site.yml": settings}, name=name)


def test_ansible_connection_secrets_url_credentials_and_nested_secrets_are_hidden(
    write_inventory,
):
    old = secrets_site(write_inventory, "one", region="us", password="PW-one", vaulted="6162")
    new = secrets_site(write_inventory, "two", region="eu", password="PW-two", vaulted="6364")
    shown = run_kiln("inventory", "diff", str(old), str(new))
    assert shown.returncode == ExitCode.OK, shown.stderr
    hidden = "differs (secret, not shown)"
    assert shown.stdout.splitlines() == [
        f"inventory diff: {old} -> {new}",
        "group all:",
        f"  ansible_become_pass: {hidden}",
        f"  ansible_become_password: {hidden}",
        f"  ansible_password: {hidden}",
        f"  ansible_ssh_private_key_passphrase: {hidden}",
        "  base_apt_proxy: 'http://(secret)@proxy.us:3142' -> 'http://(secret)@proxy.eu:3142'",
        "  site_mirrors: [{'name': 'debian', 'urls': ['https://(secret)@deb.us/debian', "
        "'https://deb.debian.org/debian'], 'AccountingStoragePass': '(secret)'}] -> "
        "[{'name': 'debian', 'urls': ['https://(secret)@deb.eu/debian', "
        "'https://deb.debian.org/debian'], 'AccountingStoragePass': '(secret)'}]",
        f"  site_proxy: {hidden}",  # only its password changed
        f"  site_registry: {hidden}",  # only its vault value changed
        "group slurm_controller:",
        f"  ansible_ssh_pass: {hidden}",
    ]
    as_json = run_kiln("inventory", "diff", str(old), str(new), "--json")
    assert as_json.returncode == ExitCode.OK, as_json.stderr
    secret = {"before": "(secret)", "after": "(secret)", "secret": True}

    def mirrors(region):
        urls = [f"https://(secret)@deb.{region}/debian", "https://deb.debian.org/debian"]
        return [{"name": "debian", "urls": urls, "AccountingStoragePass": "(secret)"}]

    assert json.loads(as_json.stdout)["groups"] == [
        {
            "group": "all",
            "hosts_added": [],
            "hosts_removed": [],
            "variables": [
                {"name": "ansible_become_pass", **secret},
                {"name": "ansible_become_password", **secret},
                {"name": "ansible_password", **secret},
                {"name": "ansible_ssh_private_key_passphrase", **secret},
                {
                    "name": "base_apt_proxy",
                    "before": "http://(secret)@proxy.us:3142",
                    "after": "http://(secret)@proxy.eu:3142",
                    "secret": False,
                },
                {
                    "name": "site_mirrors",
                    "before": mirrors("us"),
                    "after": mirrors("eu"),
                    "secret": False,
                },
                {"name": "site_proxy", **secret},
                {"name": "site_registry", **secret},
            ],
        },
        {
            "group": "slurm_controller",
            "hosts_added": [],
            "hosts_removed": [],
            "variables": [{"name": "ansible_ssh_pass", **secret}],
        },
    ]
    for output in (shown, as_json):
        assert "PW-" not in output.stdout + output.stderr


def receivers(secret: str, opsgenie_host: str) -> list[dict]:
    """Alertmanager receivers with every <secret> field of its configuration reference
    set to SECRET (its own value per field), and OpsGenie's api_url, which is no secret."""
    http = {
        "basic_auth": {"username": "kiln", "password": f"{secret}-basic"},
        "authorization": {"type": "Bearer", "credentials": f"{secret}-credentials"},
        "oauth2": {"client_id": "kiln", "client_secret": f"{secret}-oauth", "token_url": "x"},
        "bearer_token": f"{secret}-bearer",
        "proxy_connect_header": {"Proxy-Authorization": [f"{secret}-proxy"]},
        "http_headers": {"X-Key": {"secrets": [f"{secret}-header"]}},
    }
    return [
        {
            "name": "ops",
            "slack_configs": [{"api_url": f"https://hooks.slack.com/services/{secret}-slack",
                               "channel": "#ops", "http_config": http}],
            "webhook_configs": [{"url": f"https://hook.example/{secret}-webhook"}],
            "discord_configs": [{"webhook_url": f"https://discord.example/{secret}-discord"}],
            "msteams_configs": [{"webhook_url": f"https://teams.example/{secret}-teams"}],
            "msteamsv2_configs": [{"webhook_url": f"https://flow.example/{secret}-teams2"}],
            "pagerduty_configs": [{"routing_key": f"{secret}-routing",
                                   "service_key": f"{secret}-service"}],
            "opsgenie_configs": [{"api_key": f"{secret}-opsgenie", "api_url": opsgenie_host}],
            "victorops_configs": [{"api_key": f"{secret}-victorops", "routing_key": "team"}],
            "pushover_configs": [{"user_key": f"{secret}-user", "token": f"{secret}-token"}],
            "rocketchat_configs": [{"token": f"{secret}-rc", "token_id": f"{secret}-rcid"}],
            "telegram_configs": [{"bot_token": f"{secret}-telegram", "chat_id": 1}],
            "wechat_configs": [{"api_secret": f"{secret}-wechat", "corp_id": "kiln"}],
            "email_configs": [{"to": "ops@example", "auth_password": f"{secret}-smtp",
                               "auth_secret": f"{secret}-cram"}],
            "sns_configs": [{"sigv4": {"access_key": "AKIA", "secret_key": f"{secret}-aws"}}],
        }
    ]  # fmt: skip


def test_alertmanager_receivers_show_no_secret(write_inventory):
    """Every field Alertmanager's configuration types <secret> is hidden in a diff: a
    Slack webhook's secret is its URL. What differs only in secrets says only that."""
    args = dict(prefix="gpu", mirror="http://m:3142", address="10.1.0.11", key=KEY_A)
    old = site(
        write_inventory, "old", **args,
        extra={"monitoring_alertmanager_receivers": receivers("OLDSECRET", "https://og/")},
    )  # fmt: skip
    new = site(
        write_inventory, "new", **args,
        extra={"monitoring_alertmanager_receivers": receivers("NEWSECRET", "https://og/")},
    )  # fmt: skip
    shown = run_kiln("inventory", "diff", str(old), str(new))
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "group all:",
        "  monitoring_alertmanager_receivers: differs (secret, not shown)",
    ]
    # A setting that is no secret changes too: shown, with every secret hidden.
    moved = site(
        write_inventory, "moved", **args,
        extra={"monitoring_alertmanager_receivers": receivers("NEWSECRET", "https://og.eu/")},
    )  # fmt: skip
    for json_mode in ([], ["--json"]):
        shown = run_kiln("inventory", "diff", str(old), str(moved), *json_mode)
        assert shown.returncode == ExitCode.OK, shown.stderr
        assert "SECRET" not in shown.stdout + shown.stderr
        assert "https://og.eu/" in shown.stdout and "#ops" in shown.stdout
    data = json.loads(shown.stdout)
    [change] = data["groups"][0]["variables"]
    after = change["after"][0]
    assert after["slack_configs"][0]["api_url"] == "(secret)"
    assert after["webhook_configs"][0] == {"url": "(secret)"}
    assert after["opsgenie_configs"][0] == {"api_key": "(secret)", "api_url": "https://og.eu/"}
    assert after["rocketchat_configs"][0] == {"token": "(secret)", "token_id": "(secret)"}
    assert after["slack_configs"][0]["http_config"]["basic_auth"] == {
        "username": "kiln",
        "password": "(secret)",
    }
