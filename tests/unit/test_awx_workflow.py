"""kiln.awx_workflow: `kiln provision --slices N` as an `awx import` document, checked
the way awxkit's import reads it (its resources, natural keys and relations) and its
limits resolved by Ansible's own inventory manager."""

import json
from pathlib import Path

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from awxkit.api.pages import (
    Credential,
    CredentialType,
    ExecutionEnvironment,
    Inventory,
    JobTemplate,
    Organization,
    Project,
    WorkflowJobTemplate,
    WorkflowJobTemplateNode,
)
from awxkit.api.pages.api import EXPORTABLE_RESOURCES
from awxkit.api.utils import freeze

from kiln import inventory
from kiln.awx_workflow import Names, export, slice_limits
from kiln.errors import InputError
from tests.conftest import cluster_inventory

ROOT = Path(__file__).resolve().parents[2]
COMPUTE = ("gpu001", "gpu002", "gpu003", "gpu004", "gpu005")
RELATIONS = ("success_nodes", "failure_nodes", "always_nodes")
# Each natural key's fields, as awxkit builds them (its page classes' NATURAL_KEY).
KEYED = {
    "organization": Organization,
    "project": Project,
    "inventory": Inventory,
    "execution_environment": ExecutionEnvironment,
    "credential": Credential,
    "credential_type": CredentialType,
    "job_template": JobTemplate,
    "workflow_job_template": WorkflowJobTemplate,
    "workflow_job_template_node": WorkflowJobTemplateNode,
}


@pytest.fixture
def five(write_inventory):
    hosts = cluster_inventory(compute=COMPUTE)
    hosts["all"]["children"]["storage"] = {"hosts": {"nfs1": None}}
    return write_inventory(hosts)


def org():
    return {"name": "Default", "type": "organization"}


def test_limits_are_kiln_split_as_inclusive_subscripts():
    assert slice_limits(5, 3) == ["slurm_compute[0:1]", "slurm_compute[2:3]", "slurm_compute[4:]"]
    assert slice_limits(64, 4) == [
        "slurm_compute[0:15]",
        "slurm_compute[16:31]",
        "slurm_compute[32:47]",
        "slurm_compute[48:]",
    ]
    assert slice_limits(3, 1) == ["slurm_compute[0:]"]


def test_five_nodes_three_slices_whole_document(five):
    document, note = export(inventory.load(five), 3, Names())
    assert note is None
    assert sorted(document) == ["job_templates", "workflow_job_templates"]
    templates = document["job_templates"]
    assert [
        (t["name"], t["playbook"], t["limit"], json.loads(t["extra_vars"])) for t in templates
    ] == [
        ("kiln slice-1", "playbooks/site.yml", "slurm_compute[0:1]", {"kiln_slice": True}),
        ("kiln slice-2", "playbooks/site.yml", "slurm_compute[2:3]", {"kiln_slice": True}),
        ("kiln slice-3", "playbooks/site.yml", "slurm_compute[4:]", {"kiln_slice": True}),
        ("kiln controllers", "playbooks/site.yml", "all:!slurm_compute", {}),
        ("kiln slurm-1", "playbooks/slurm_state.yml", "slurm_compute[0:1]", {}),
        ("kiln slurm-2", "playbooks/slurm_state.yml", "slurm_compute[2:3]", {}),
        ("kiln slurm-3", "playbooks/slurm_state.yml", "slurm_compute[4:]", {}),
    ]
    # site.yml's leave out what a whole run never needs; slurm_state.yml's the dry run's
    # and the image's steps only.
    site, alone = "kiln_dry_run,kiln_role_alone,kiln_image", "kiln_dry_run,kiln_image"
    assert [t["skip_tags"] for t in templates] == [site] * 4 + [alone] * 3
    # Every template alike but for its name, playbook, limit, variables, description.
    differing = {
        "name",
        "playbook",
        "limit",
        "extra_vars",
        "description",
        "natural_key",
        "skip_tags",
    }
    common = [{k: v for k, v in t.items() if k not in differing} for t in templates]
    assert all(c == common[0] for c in common)
    assert templates[0] == {
        "name": "kiln slice-1",
        "description": "site.yml on slice 1 of 3 of the compute nodes (slurm_compute[0:1])",
        "job_type": "run",
        "inventory": {"organization": org(), "name": "Kiln", "type": "inventory"},
        "project": {"organization": org(), "name": "Kiln", "type": "project"},
        "playbook": "playbooks/site.yml",
        "scm_branch": "",
        "forks": 0,
        "limit": "slurm_compute[0:1]",
        "verbosity": 0,
        "extra_vars": '{"kiln_slice": true}',
        "job_tags": "",
        "skip_tags": "kiln_dry_run,kiln_role_alone,kiln_image",
        "timeout": 0,
        "use_fact_cache": True,
        "execution_environment": {"name": "Kiln", "type": "execution_environment"},
        "diff_mode": False,
        "allow_simultaneous": False,
        "job_slice_count": 1,
        "related": {
            "credentials": [
                {
                    "organization": org(),
                    "name": "Kiln",
                    "credential_type": {
                        "name": "Machine",
                        "kind": "ssh",
                        "type": "credential_type",
                    },
                    "type": "credential",
                }
            ]
        },
        "natural_key": {"organization": org(), "name": "kiln slice-1", "type": "job_template"},
    }
    (workflow,) = document["workflow_job_templates"]
    key = {
        "organization": org(),
        "name": "kiln provision --slices 3",
        "type": "workflow_job_template",
    }
    nodes = workflow.pop("related")["workflow_nodes"]
    assert workflow == {
        "name": "kiln provision --slices 3",
        "description": "kiln provision --slices 3: 3 slices of slurm_compute side by side, "
        "then the controllers, then each slice's Slurm state",
        "organization": org(),
        "extra_vars": "",
        "allow_simultaneous": False,
        "ask_variables_on_launch": False,
        "ask_inventory_on_launch": False,
        "ask_limit_on_launch": False,
        "survey_enabled": False,
        "natural_key": key,
    }

    def node_key(identifier):
        return {
            "workflow_job_template": key,
            "identifier": identifier,
            "type": "workflow_job_template_node",
        }

    def node(identifier, then):
        return {
            "identifier": identifier,
            "unified_job_template": {
                "organization": org(),
                "name": f"kiln {identifier}",
                "type": "job_template",
            },
            "all_parents_must_converge": False,
            "extra_data": {},
            "related": {
                "success_nodes": [node_key(t) for t in then],
                "failure_nodes": [],
                "always_nodes": [],
            },
            "natural_key": node_key(identifier),
        }

    assert nodes == [
        node("slice-1", ["controllers"]),
        node("slice-2", ["controllers"]),
        node("slice-3", ["controllers"]),
        node("controllers", ["slurm-1", "slurm-2", "slurm-3"]),
        node("slurm-1", []),
        node("slurm-2", []),
        node("slurm-3", []),
    ]


def check_as_awxkit_imports(document):
    """What `awx import` (awxkit's ApiV2.import_assets) relies on: top-level resources
    it exports, a natural key on each object with its class's fields, workflow nodes
    created under their workflow (`related` objects with natural keys) and linked by
    natural keys that name a node of the same workflow, each child in one relation of
    a parent (AWX refuses two), and no cycle."""
    assert set(document) <= set(EXPORTABLE_RESOURCES)

    def keyed(key):
        cls = KEYED[key["type"]]
        assert set(key) == {*cls.NATURAL_KEY, "type"}, key
        for value in key.values():
            if isinstance(value, dict):
                keyed(value)
        return freeze(key)

    templates = {keyed(t["natural_key"]) for t in document["job_templates"]}
    assert len(templates) == len(document["job_templates"])
    for template in document["job_templates"]:
        for field in ("inventory", "project", "execution_environment"):
            keyed(template[field])
        for credential in template["related"]["credentials"]:
            keyed(credential)
    for workflow in document["workflow_job_templates"]:
        nodes = workflow["related"]["workflow_nodes"]
        by_key = {keyed(n["natural_key"]): n for n in nodes}
        assert len(by_key) == len(nodes)
        for n in nodes:
            assert n["natural_key"]["workflow_job_template"] == workflow["natural_key"]
            assert keyed(n["unified_job_template"]) in templates
            targets = [freeze(t) for r in RELATIONS for t in n["related"][r]]
            assert len(targets) == len(set(targets)), n["identifier"]
            assert all(t in by_key for t in targets), n["identifier"]
        assert_acyclic(
            {
                n["identifier"]: [t["identifier"] for r in RELATIONS for t in n["related"][r]]
                for n in nodes
            }
        )


def assert_acyclic(children):
    """No node reachable from itself (AWX refuses a cycle)."""
    done = set()

    def visit(name, path):
        assert name not in path, f"cycle through {name}"
        if name not in done:
            for child in children[name]:
                visit(child, (*path, name))
            done.add(name)

    for name in children:
        visit(name, ())


def test_the_document_imports_as_awxkit_reads_it(five):
    check_as_awxkit_imports(export(inventory.load(five), 3, Names())[0])


def test_shipped_example_is_the_generators_output():
    """extensions/awx/kiln-workflow.json: `kiln awx workflow -i
    inventories/examples/h100-2su --slices 4`, kept in step with the generator."""
    shipped = json.loads((ROOT / "extensions/awx/kiln-workflow.json").read_text())
    spec = inventory.load(ROOT / "inventories/examples/h100-2su", unpinned_ok=True)
    assert shipped == export(spec, 4, Names())[0]
    check_as_awxkit_imports(shipped)


def test_ansible_resolves_the_limits_to_kilns_slices(five):
    """The limits through ansible-core's own pattern matcher: the slices partition
    slurm_compute as kiln.run.slices.split does, the controllers' run is the rest."""
    document, _ = export(inventory.load(five), 3, Names())
    manager = InventoryManager(loader=DataLoader(), sources=[str(five / "hosts.yml")])

    def hosts(pattern):
        return [h.name for h in manager.get_hosts(pattern)]

    limits = [t["limit"] for t in document["job_templates"]]
    assert [hosts(limit) for limit in limits] == [
        ["gpu001", "gpu002"],
        ["gpu003", "gpu004"],
        ["gpu005"],
        ["ctl1", "nfs1"],
        ["gpu001", "gpu002"],
        ["gpu003", "gpu004"],
        ["gpu005"],
    ]


def test_names_and_fewer_slices(five):
    names = Names(
        organization="HPC",
        project="kiln-git",
        inventory="cluster-a",
        execution_environment="kiln-ee",
        credential="root-key",
        playbooks=".",
        prefix="a",
        forks=64,
    )
    document, note = export(inventory.load(five), 9, names)
    assert note == "5 compute node(s), so 5 slice(s)"
    slice_1 = document["job_templates"][0]
    assert (slice_1["name"], slice_1["playbook"], slice_1["forks"], slice_1["limit"]) == (
        "a slice-1",
        "site.yml",
        64,
        "slurm_compute[0:0]",
    )
    assert slice_1["inventory"] == {
        "organization": {"name": "HPC", "type": "organization"},
        "name": "cluster-a",
        "type": "inventory",
    }
    assert document["workflow_job_templates"][0]["name"] == "a provision --slices 5"
    check_as_awxkit_imports(document)


def test_no_slice_is_refused(five):
    with pytest.raises(InputError, match=r"^0 slices: at least 1$"):
        export(inventory.load(five), 0, Names())


@pytest.mark.parametrize("broken", ["unknown child", "cycle", "two relations", "key field"])
def test_the_check_catches_what_awx_would_refuse(five, broken):
    document, _ = export(inventory.load(five), 2, Names())
    nodes = document["workflow_job_templates"][0]["related"]["workflow_nodes"]
    first, controllers = nodes[0]["related"], nodes[2]["related"]
    if broken == "unknown child":
        first["success_nodes"][0] = {**first["success_nodes"][0], "identifier": "gone"}
    elif broken == "cycle":
        controllers["always_nodes"].append(nodes[0]["natural_key"])
    elif broken == "two relations":
        first["failure_nodes"].append(first["success_nodes"][0])
    else:
        del document["job_templates"][0]["natural_key"]["organization"]
    with pytest.raises(AssertionError):
        check_as_awxkit_imports(document)
