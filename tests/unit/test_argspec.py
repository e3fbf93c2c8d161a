import pytest
import yaml

from kiln import argspec, paths, yaml_input


def errors(name, value, spec):
    return list(argspec.check_value(name, value, spec))


def test_catalogue_reads_the_roles_argument_specs():
    catalogue = argspec.load_catalogue(paths.roles_dir())
    assert catalogue["base_packages"].role == "base"
    assert catalogue["base_packages"].spec["type"] == "list"


def test_types():
    assert errors("x", "curl", {"type": "list"}) == ["x must be a list, got a string 'curl'"]
    assert errors("x", 3, {"type": "bool"}) == ["x must be true or false, got an integer 3"]
    assert errors("x", True, {"type": "int"}) == ["x must be an integer, got a boolean True"]
    assert errors("x", 3, {"type": "int"}) == []
    assert errors("x", 3, {"type": "str"}) == []  # Ansible stringifies numbers too
    assert errors("x", ["a"], {"type": "dict"}) == ["x must be a mapping, got a list ['a']"]


def test_templates_are_left_to_ansible():
    assert errors("x", "{{ groups['all'] }}", {"type": "list"}) == []


def test_an_unsafe_string_is_judged_by_its_text():
    """Ansible never renders `!unsafe` text: braces in it are characters, not a template."""
    value = yaml_input.UnsafeValue("{{ groups['all'] }}")
    assert not argspec.is_template(value)
    assert errors("x", value, {"type": "list"}) == [
        "x must be a list, got a string \"{{ groups['all'] }}\""
    ]
    assert errors("x", value, {"type": "str"}) == []


def test_choices_and_list_elements():
    spec = {"type": "list", "elements": "str", "choices": ["a", "b"]}
    assert errors("x", ["a", "c"], spec) == ["x[1] must be one of a, b, got 'c'"]
    assert errors("x", ["a", 5.5, []], {"type": "list", "elements": "str"}) == [
        "x[2] must be a string, got a list []"
    ]


def test_list_of_dicts_checks_keys_and_required():
    spec = argspec.load_catalogue(paths.roles_dir())["base_limits"].spec
    good = [{"domain": "*", "type": "-", "item": "nofile", "value": 1024}]
    assert errors("base_limits", good, spec) == []
    bad = [{"domain": "*", "type": "both", "item": "nofile", "valu": 1}]
    assert errors("base_limits", bad, spec) == [
        "base_limits[0].valu is not a known key (known: domain, item, type, value)",
        "base_limits[0].type must be one of soft, hard, -, got 'both'",
        "base_limits[0].value is required",
    ]


def test_no_error_shows_a_secrets_value():
    """no_log variables (declared so by their role), secret names, and whatever is
    nested in them: the error names the variable and the kind, never the value."""
    catalogue = argspec.load_catalogue(paths.roles_dir())
    dbd = catalogue["slurm_dbd_password"].spec
    assert errors("slurm_dbd_password", ["hunter2-db"], dbd) == [
        "slurm_dbd_password must be a string, got a list (secret)"
    ]
    munge = catalogue["munge_key_b64"].spec
    assert errors("munge_key_b64", {"k": "hunter2-munge"}, munge) == [
        "munge_key_b64 must be a string, got a mapping (secret)"
    ]
    # by name alone, with choices, and nested under a secret
    assert errors("registry_token", "hunter2", {"type": "str", "choices": ["a"]}) == [
        "registry_token must be one of a, got (secret)"
    ]
    spec = {"type": "dict", "no_log": True, "options": {"user": {"type": "int"}}}
    assert errors("site_login", {"user": "hunter2"}, spec) == [
        "site_login.user must be an integer, got a string (secret)"
    ]
    nested = {"type": "dict", "options": {"password": {"type": "str"}}}
    assert errors("site", {"password": [1]}, nested) == [
        "site.password must be a string, got a list (secret)"
    ]
    # Other values are shown, URL credentials hidden.
    assert errors("base_apt_proxy", ["http://kiln:hunter2@proxy"], {"type": "str"}) == [
        "base_apt_proxy must be a string, got a list ['http://(secret)@proxy']"
    ]


def stated_defaults(spec_file) -> dict[str, dict]:
    """Each entry point's `default:`s, by variable, as meta/argument_specs.yml states them."""
    specs = yaml.safe_load(spec_file.read_text())["argument_specs"]
    return {
        entry: {
            name: option["default"]
            for name, option in (spec.get("options") or {}).items()
            if "default" in option
        }
        for entry, spec in specs.items()
    }


@pytest.mark.parametrize("role", sorted(p.name for p in paths.roles_dir().iterdir()))
def test_argument_spec_defaults_are_the_roles_defaults(role):
    """Ansible never applies an argument spec's `default:` (the role's value comes from
    defaults/main.yml); the spec only states it. So every default it states is, as
    written, the one in defaults/main.yml, and a variable it gives a default has one."""
    role_dir = paths.roles_dir() / role
    defaults_file = role_dir / "defaults" / "main.yml"
    defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else {}
    stated = stated_defaults(role_dir / "meta" / "argument_specs.yml")
    assert stated == {
        entry: {name: defaults.get(name, "(not in defaults/main.yml)") for name in values}
        for entry, values in stated.items()
    }
