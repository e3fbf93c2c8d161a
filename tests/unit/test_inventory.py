"""Inventory loading and every validation case the Foundation issue names."""

import pytest

from kiln import inventory, yaml_input
from kiln.errors import ExitCode, InputError
from kiln.inventory import reader
from tests.conftest import cluster_inventory


def load_error(path) -> str:
    with pytest.raises(InputError) as info:
        inventory.load(path)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return info.value.message


def test_loads_groups_hosts_and_roles(write_inventory):
    hosts = cluster_inventory(compute=("gpu[001:003]",))
    hosts["all"]["children"]["slurm_login"] = {"hosts": {"login1": None}}
    spec = inventory.load(write_inventory(hosts))
    assert spec.group("slurm_compute") == ["gpu001", "gpu002", "gpu003"]
    assert spec.kiln_roles("ctl1") == ["slurm_controller"]
    assert spec.kiln_roles("login1") == ["slurm_login"]
    assert sorted(spec.hosts) == ["ctl1", "gpu001", "gpu002", "gpu003", "login1"]


def test_variable_precedence_all_then_group_then_host(write_inventory):
    hosts = cluster_inventory(host_vars={"gpu002": {"base_apt_proxy": "http://host"}})
    spec = inventory.load(
        write_inventory(
            hosts,
            {
                "group_vars/all.yml": {"base_apt_proxy": "http://all", "base_set_hostname": True},
                "group_vars/slurm_compute/apt.yml": {"base_apt_proxy": "http://compute"},
            },
        )
    )
    assert spec.hosts["ctl1"].vars["base_apt_proxy"] == "http://all"
    assert spec.hosts["gpu001"].vars["base_apt_proxy"] == "http://compute"
    assert spec.hosts["gpu002"].vars["base_apt_proxy"] == "http://host"


def test_accepts_hosts_yml_path_directly(write_inventory):
    directory = write_inventory()
    assert inventory.load(directory / "hosts.yml").path == directory


def test_missing_path(tmp_path):
    assert load_error(tmp_path / "nope") == f"inventory not found: {tmp_path / 'nope'}"


def test_directory_without_hosts_file(tmp_path):
    assert "no hosts.yml in this inventory directory" in load_error(tmp_path)


def test_yaml_that_does_not_parse_names_file_and_line(write_inventory):
    directory = write_inventory("all:\n  children:\n    slurm_controller: [unclosed\n")
    message = load_error(directory)
    assert message.startswith("hosts.yml:4: YAML does not parse:")


def test_bad_yaml_in_group_vars(write_inventory):
    directory = write_inventory(files={"group_vars/all.yml": "base_packages: [a\nfoo: : :\n"})
    assert load_error(directory).startswith("group_vars/all.yml:")


def test_no_controller_group(write_inventory):
    hosts = cluster_inventory()
    del hosts["all"]["children"]["slurm_controller"]
    assert load_error(write_inventory(hosts)) == (
        "inventory: no slurm_controller group (expected 1 host, or 2 for a backup)"
    )


def test_three_controllers(write_inventory):
    hosts = cluster_inventory(controllers=("c1", "c2", "c3"))
    assert load_error(write_inventory(hosts)) == (
        "inventory: slurm_controller has 3 hosts (c1, c2, c3);"
        " expected 1, or 2 for a backup controller"
    )


def test_two_controllers_are_fine(write_inventory):
    spec = inventory.load(write_inventory(cluster_inventory(controllers=("c1", "c2"))))
    assert spec.group("slurm_controller") == ["c1", "c2"]


def test_empty_compute_group(write_inventory):
    hosts = cluster_inventory()
    hosts["all"]["children"]["slurm_compute"] = {"hosts": {}}
    assert load_error(write_inventory(hosts)) == (
        "inventory: slurm_compute is empty (expected at least 1 host)"
    )


def test_wrong_type_names_file_variable_and_expectation(write_inventory):
    directory = write_inventory(files={"group_vars/all/base.yml": {"base_packages": "curl"}})
    assert load_error(directory) == (
        "group_vars/all/base.yml: base_packages must be a list, got a string 'curl' (role base)"
    )


def test_wrong_type_in_host_vars_inside_hosts_yml(write_inventory):
    hosts = cluster_inventory(host_vars={"gpu001": {"base_set_hostname": "maybe"}})
    assert load_error(write_inventory(hosts)) == (
        "hosts.yml (host gpu001): base_set_hostname must be true or false,"
        " got a string 'maybe' (role base)"
    )


def test_every_problem_is_reported_one_per_line(write_inventory):
    hosts = cluster_inventory(controllers=())
    hosts["all"]["children"]["slurm_controller"] = {"hosts": {}}
    directory = write_inventory(hosts, {"host_vars/gpu001.yml": {"base_sysctl": [1]}})
    lines = load_error(directory).splitlines()
    assert len(lines) == 2
    assert (
        lines[1]
        == "host_vars/gpu001.yml: base_sysctl must be a mapping, got a list [1] (role base)"
    )


def test_host_reference_must_exist(write_inventory):
    directory = write_inventory(files={"group_vars/all.yml": {"base_ntp_server_host": "ntp9"}})
    assert load_error(directory) == (
        "group_vars/all.yml: base_ntp_server_host names 'ntp9',"
        " which is not a host in the inventory"
    )


def test_stray_group_vars_is_a_warning(write_inventory):
    directory = write_inventory(files={"group_vars/slurm_comptue.yml": {"base_packages": []}})
    spec = inventory.load(directory)
    assert spec.warnings == [
        "group_vars/slurm_comptue: no group named slurm_comptue in the inventory; ignored"
    ]


def test_unknown_group_keys(write_inventory):
    hosts = cluster_inventory()
    hosts["all"]["children"]["slurm_compute"]["host"] = {"x": None}
    assert "group slurm_compute has unknown keys host" in load_error(write_inventory(hosts))


def test_the_lab_settings_validate(write_inventory, tmp_path):
    """The inventory `kiln lab up` writes, with the committed lab settings."""
    import shutil

    from kiln import paths
    from kiln.lab import cluster

    lab = cluster.plan("kiln", 3, "trixie")
    directory = write_inventory(cluster.inventory_data(lab, tmp_path / "key", None))
    shutil.copytree(
        paths.packaged_lab_settings() / "group_vars", directory / "group_vars", dirs_exist_ok=True
    )
    inventory.load(directory)


def test_example_inventories_validate():
    from kiln import paths

    root = paths.content_root() / "inventories" / "examples"
    examples = sorted(hosts.parent for hosts in root.rglob("hosts.yml"))
    assert len(examples) >= 3
    for example in examples:
        # The examples `kiln inventory new` wrote wait for `kiln inventory pins`.
        spec = inventory.load(example, unpinned_ok=True)
        assert spec.group("slurm_compute"), example
    spec = inventory.load(paths.content_root() / "inventories" / "examples" / "h100-2su")
    assert len(spec.group("slurm_compute")) == 64
    assert spec.hosts["gpu040"].groups == ["slurm_compute", "su2"]


def test_vault_encrypted_values_load_and_are_not_judged(write_inventory):
    vaulted = (
        "base_apt_proxy: !vault |\n"
        "  $ANSIBLE_VAULT;1.1;AES256\n"
        "  6162636465666768696a6b6c6d6e6f70\n"
        "enroot_squash_options: !unsafe '{{ not a template }}'\n"
    )
    spec = inventory.load(write_inventory(files={"group_vars/all.yml": vaulted}))
    assert isinstance(spec.hosts["gpu001"].vars["base_apt_proxy"], yaml_input.VaultValue)
    assert isinstance(spec.hosts["gpu001"].vars["enroot_squash_options"], yaml_input.UnsafeValue)


def test_an_unsafe_value_is_judged_by_its_text_which_ansible_never_renders(write_inventory):
    unsafe = "base_packages: !unsafe '{{ not a template }}'\n"
    assert load_error(write_inventory(files={"group_vars/all.yml": unsafe})) == (
        "group_vars/all.yml: base_packages must be a list, "
        "got a string '{{ not a template }}' (role base)"
    )


# --- what Ansible reads: every file of the inventory directory ------------------------


def test_every_inventory_file_is_checked_like_hosts_yml(write_inventory):
    """Ansible reads extra.yml too: a host it declares is checked, and named."""
    extra = {"slurm_compute": {"hosts": {"gpu999": {"slurm_node_shape": "not a dict"}}}}
    message = load_error(write_inventory(files={"extra.yml": extra}))
    assert "gpu999" in message and "slurm_node_shape" in message
    assert message.startswith("extra.yml (host gpu999): slurm_node_shape")


def test_files_ansible_reads_but_kiln_cannot_are_refused(write_inventory, tmp_path):
    ini = write_inventory(files={"more": "[slurm_compute]\ngpu999\n"}, name="ini")
    assert load_error(ini).startswith(f"{ini}/more: Ansible reads every file in an inventory")
    plugin = write_inventory(files={"aws_ec2.yml": {"plugin": "amazon.aws.aws_ec2"}}, name="p")
    assert load_error(plugin) == (
        "aws_ec2.yml: expected a YAML inventory (groups with hosts, children, vars); Kiln "
        "cannot check an inventory plugin's configuration or other content"
    )
    script = write_inventory(files={"dynamic.py": "print('{}')\n"}, name="script")
    assert load_error(script).startswith(f"{script}/dynamic.py: Ansible reads every file")
    conf = write_inventory(files={"fabric/topology.conf": "SwitchName=s1 Nodes=n1\n"}, name="c")
    assert load_error(conf).startswith(f"{conf}/fabric/topology.conf: Ansible reads")


def test_files_ansible_skips_are_skipped(write_inventory):
    skipped = {
        "README.md": "# notes\n",
        "fabric/ibnetdiscover.txt": "not yaml: [\n",
        "map.cfg": "0x1 x\n",
        "hosts.yml.bak": "::\n",
        ".hidden.yml": "::\n",
    }
    spec = inventory.load(write_inventory(files=skipped))
    assert sorted(spec.hosts) == ["ctl1", "gpu001", "gpu002"]


def _ansible_view(directory) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """Groups and each host's variables as ansible-core itself reads the directory."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(directory)])
    variables = VariableManager(loader=loader, inventory=manager)
    groups = {
        name: sorted(h.name for h in group.get_hosts())
        for name, group in manager.groups.items()
        if name not in ("all", "ungrouped")
    }
    hostvars = {h.name: variables.get_vars(host=h) for h in manager.get_hosts()}
    return groups, hostvars


def test_kiln_reads_the_same_hosts_groups_and_variables_as_ansible(write_inventory):
    """Several files, a top-level group outside `all`, the same group in two files,
    skipped files and group_vars: Kiln's view equals ansible-core's."""
    hosts = cluster_inventory(host_vars={"gpu001": {"site_node_weight": 5}})
    files = {
        "extra.yml": {
            "slurm_compute": {
                "hosts": {"gpu[003:004]": {"base_apt_proxy": "http://extra"}},
                "vars": {"base_set_hostname": False},
            },
            "all": {"children": {"slurm_login": {"hosts": {"login1": None}}}},
        },
        "zz-more.yaml": {"all": {"hosts": {"gpu004": {"base_apt_proxy": "http://later"}}}},
        "notes.md": "# not read\n",
        "group_vars/all.yml": {"base_apt_proxy": "http://all"},
        "group_vars/slurm_compute.yml": {"site_timezone": "UTC"},
        "host_vars/gpu003.yml": {"site_timezone": "Europe/Paris"},
    }
    directory = write_inventory(hosts, files)
    spec = inventory.load(directory)
    groups, hostvars = _ansible_view(directory)
    assert spec.groups == groups
    assert sorted(spec.hosts) == sorted(hostvars)
    for name, host in spec.hosts.items():
        assert host.vars == {k: hostvars[name][k] for k in host.vars}, name
    assert spec.hosts["gpu004"].vars["base_apt_proxy"] == "http://later"


def test_ignored_names_match_ansible_core():
    from ansible.inventory.manager import IGNORED

    names = ["a.pyc", "b~", "c.md", "d.txt", "e.cfg", "f.retry", ".g", "group_vars", "h.yml"]
    names += ["host_vars", "vars_plugins", "i.orig", "j.bak", "k.swp", "l.rst", "m.rpm", "n"]
    for name in names:
        ours = bool(reader.IGNORED_NAMES.search(name)) or name.endswith(reader.IGNORED_SUFFIXES)
        assert ours == bool(IGNORED.search(name.encode())), name


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("gpu[9:1]", "host gpu[9:1]: reversed range 9-1 in 'gpu[9:1]'"),
        ("gpu[0:99999999]", "host gpu[0:99999999]: range 0-99999999 in 'gpu[0:99999999]' names"),
    ],
)
def test_reversed_and_unbounded_host_ranges_are_refused(write_inventory, pattern, message):
    assert load_error(write_inventory(cluster_inventory(compute=(pattern,)))).startswith(message)


def test_a_key_written_twice_is_refused_not_half_read(write_inventory):
    text = (
        "all:\n  children:\n    slurm_controller:\n      hosts: {ctl1: }\n"
        "    slurm_compute:\n      hosts: {gpu001: }\n"
        "    slurm_compute:\n      hosts: {gpu002: }\n"
    )
    assert load_error(write_inventory(text)) == (
        "hosts.yml:7: YAML does not parse: 'slurm_compute' appears twice (first on line 5)"
    )


def test_host_keys_are_checked_everywhere_but_the_lab(tmp_path):
    """ansible.cfg (which Kiln points every run at) checks host keys; only the lab's
    generated inventory turns the check off."""
    import configparser

    from kiln import paths
    from kiln.lab import cluster

    config = configparser.ConfigParser()
    config.read(paths.content_root() / "ansible.cfg")
    assert config.getboolean("defaults", "host_key_checking") is True
    lab = cluster.inventory_data(cluster.plan("kiln", 2, "trixie"), tmp_path / "key", None)
    assert lab["all"]["vars"]["ansible_host_key_checking"] is False
    for hosts in (paths.content_root() / "inventories" / "examples").rglob("hosts.yml"):
        spec = inventory.load(hosts.parent, unpinned_ok=True)
        assert not any("host_key_checking" in str(h.vars) for h in spec.hosts.values())


@pytest.mark.parametrize("name", ["gpu;reboot", "gpu 1", "gpu$(id)", "[/bold]gpu", "-gpu"])
def test_host_names_that_would_reach_a_shell_are_refused(write_inventory, name):
    hosts = cluster_inventory()
    hosts["all"]["children"]["slurm_compute"]["hosts"][name] = None
    assert load_error(write_inventory(hosts)) == (
        f"host {name!r}: names may hold only letters, digits, '.', '_' and '-'"
    )


def test_a_cluster_name_that_would_reach_a_shell_is_refused(write_inventory):
    files = {"group_vars/all.yml": {"slurm_cluster_name": "kiln'; rm -rf /; '"}}
    assert load_error(write_inventory(files=files)) == (
        "group_vars/all.yml: slurm_cluster_name \"kiln'; rm -rf /; '\" may hold only "
        "letters, digits, '.', '_' and '-'"
    )


def test_ansible_is_given_what_kiln_checked(write_inventory):
    """A directory: all of it. One file named: that file, not the directory around it
    (whose other files Kiln did not read)."""
    directory = write_inventory(files={"other.yml": {"all": {"hosts": {"ghost": None}}}})
    whole = inventory.load(directory)
    assert (whole.source, whole.path) == (directory, directory)
    assert "ghost" in whole.hosts
    one = inventory.load(directory / "hosts.yml")
    assert (one.source, one.path) == (directory / "hosts.yml", directory)
    assert "ghost" not in one.hosts


def test_hosts_of_the_same_groups_are_judged_once(write_inventory, monkeypatch):
    """A rack written as a host range shares one dict of variables, and each role's
    settings are judged once per dict: a 1,000,000-host inventory is judged per rack,
    not per host (docs/performance.md)."""
    from kiln.roles import nvidia_driver  # the module the registry names for the role

    judged = []
    real = nvidia_driver.settings_problems
    monkeypatch.setattr(nvidia_driver, "settings_problems", lambda s: judged.append(s) or real(s))
    racks = {f"rack{r}": {"hosts": {f"gpu[{r}000:{r}499]": None}} for r in (1, 2, 3)}
    racks["rack3"]["hosts"]["gpu3500"] = {"nvidia_driver_version": "550"}
    hosts = cluster_inventory(compute=())
    hosts["all"]["children"]["slurm_compute"] = {"children": racks}
    spec = inventory.load(write_inventory(hosts))
    assert len(spec.group("slurm_compute")) == 1501
    assert spec.hosts["gpu1000"].vars is spec.hosts["gpu1499"].vars
    assert spec.hosts["gpu3000"].vars is not spec.hosts["gpu3500"].vars
    assert judged == [{}, {}, {}, {"version": "550"}]  # three racks, and gpu3500's own


def test_only_what_aliases_add_is_bounded(monkeypatch):
    """A long document is bounded by its file's size; aliases may add at most MAX_NODES
    values (here 1,000): a hosts.yml listing 300,000 hosts with their addresses, over
    1,000,000 values as written, is read."""
    monkeypatch.setattr(yaml_input, "MAX_NODES", 1000)
    long = "".join(f"gpu{i:04d}: {{ansible_host: 10.0.{i // 256}.{i % 256}}}\n" for i in range(600))
    assert len(yaml_input.parse(long, "long")) == 600  # 2,401 values as written
    shared = "base: &base {a: 1, b: 2}\n" + "".join(f"h{i}: *base\n" for i in range(150))
    assert len(yaml_input.parse(shared, "shared")) == 151  # the aliases add 150 x 5
    more = "base: &base {a: 1, b: 2, c: 3, d: 4}\n" + "".join(f"h{i}: *base\n" for i in range(150))
    with pytest.raises(InputError) as info:
        yaml_input.parse(more, "more")
    assert info.value.message == (
        "more: aliases expand to over 1,000 values; refused (a 'billion laughs' document?)"
    )
