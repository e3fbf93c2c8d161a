"""kiln.run.extravars: Kiln's variables reach Ansible whole, and never as a template.

Read back the way ansible-playbook reads `-e @FILE` (its DataLoader, the file trusted
as a template), then rendered by Ansible's own Templar."""

from pathlib import Path

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, is_trusted_as_template, trust_as_template

from kiln.run.extravars import unsafe_yaml


def payloads(marker: Path) -> list[str]:
    return [
        f"{{{{ lookup('pipe', 'touch {marker}') }}}}",
        "{% if true %}X{% endif %}",
        f"kiln: fio: {{{{ lookup('ansible.builtin.pipe', 'touch {marker}') }}}} {{# c #}}",
    ]


def read_as_ansible(tmp_path: Path, values: dict) -> dict:
    path = tmp_path / "extravars.yml"
    path.write_text(unsafe_yaml(values))
    return DataLoader().load_from_file(str(path), trusted_as_template=True)


def strings(value) -> list[str]:
    """Every string of a structure, dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


def test_every_value_reads_back_as_it_was_and_no_string_is_trusted(tmp_path):
    jinja, block, reason = payloads(tmp_path / "marker")
    values = {
        "accounting_associations": f"Cluster - 'old'\nAccount - '{jinja}':Description='{block}'\n",
        "accounting_qos": [{"Name": block, "Priority": "0", "Description": jinja}],
        "validate_drain": {"gpu001": reason},
        "validate_release": {"reservation": "kiln_validate_1", "redrain": {jinja: block}},
        # Strings that read as other types unquoted stay strings; the others keep theirs.
        "looks_typed": ["123", "yes", "null", "~", "1.5", "", " lead", "- a", "k: v", "#c"],
        "typed": [7, 1.5, True, None, float("inf")],
        "text": "two\nlines\ttab\x07bell\x7f é 😀 \u2028 '\"",
        "tuple": ("a", "b"),
    }
    loaded = read_as_ansible(tmp_path, values)
    assert loaded == {**values, "tuple": ["a", "b"]}
    assert [s for s in strings(loaded) if is_trusted_as_template(s)] == []


def test_ansible_renders_no_template_in_them(tmp_path):
    marker = tmp_path / "marker"
    jinja, block, reason = payloads(marker)
    values = {"reason": reason, "names": [jinja, block], "reasons": {jinja: block}}
    templar = Templar(loader=DataLoader(), variables=read_as_ansible(tmp_path, values))
    assert templar.template(trust_as_template("{{ reason }}")) == reason
    assert templar.template(trust_as_template("{{ names | join('|') }}")) == f"{jinja}|{block}"
    assert templar.template(trust_as_template("{{ reasons | dict2items }}")) == [
        {"key": jinja, "value": block}
    ]
    assert templar.template(trust_as_template("{{ names[1] | quote }}")) == f"'{block}'"
    assert not marker.exists()


def test_text_a_yaml_file_cannot_hold_reads_back_marked(tmp_path):
    """A byte that is not UTF-8, as surrogateescape keeps it: U+FFFD, not a crash."""
    assert read_as_ansible(tmp_path, {"reason": "disk \udcff full"}) == {
        "reason": "disk \ufffd full"
    }


def test_only_the_operators_own_e_values_are_passed_for_ansible_to_render():
    """Every other variable a command passes goes through RunRequest.extravars."""
    import kiln

    package = Path(kiln.__file__).parent
    users = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "operator_extravars=" in p.read_text()
    )
    assert users == ["commands/playbook.py"]
