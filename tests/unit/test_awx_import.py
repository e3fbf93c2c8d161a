"""A dry run of `awx import` on Kiln's AWX workflow: awxkit's own import code
(ApiV2.import_assets, as `awx import < kiln-workflow.json` calls it) against a
stand-in for AWX's REST API, then the objects it made. The stand-in answers as AWX's
API does for what the import uses: list pages filtered by a natural key's strings,
detail pages with `related` links, OPTIONS with the POST fields, creation (201) and
association by id (204); its POST fields are AWX's for those objects. It is not AWX:
a field AWX would refuse is refused here only if it is not in the lists below."""

import copy
import itertools
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from awxkit.api.client import Connection
from awxkit.api.pages.api import EXPORTABLE_RESOURCES, ApiV2

from kiln import inventory
from kiln.awx_workflow import Names, export
from tests.conftest import cluster_inventory

API = "/api/v2/"
TYPES = {
    "organizations": "organization",
    "credential_types": "credential_type",
    "credentials": "credential",
    "inventories": "inventory",
    "projects": "project",
    "execution_environments": "execution_environment",
    "job_templates": "job_template",
    "workflow_job_templates": "workflow_job_template",
    "workflow_job_template_nodes": "workflow_job_template_node",
}
# AWX's POST fields (OPTIONS' actions.POST) for what Kiln's document sets.
JOB_TEMPLATE_FIELDS = {
    **{f: "string" for f in ("name", "description", "playbook", "scm_branch", "limit")},
    **{f: "string" for f in ("job_tags", "skip_tags")},
    "job_type": "choice",
    "extra_vars": "string",
    **{f: "id" for f in ("inventory", "project", "execution_environment")},
    **{f: "integer" for f in ("forks", "timeout", "job_slice_count")},
    "verbosity": "choice",
    **{f: "boolean" for f in ("use_fact_cache", "diff_mode", "allow_simultaneous")},
}
WORKFLOW_FIELDS = {
    "name": "string",
    "description": "string",
    "extra_vars": "string",
    "organization": "id",
    **{
        f: "boolean"
        for f in (
            "allow_simultaneous",
            "ask_variables_on_launch",
            "ask_inventory_on_launch",
            "ask_limit_on_launch",
            "survey_enabled",
        )
    },
}
NODE_FIELDS = {
    "identifier": "string",
    "unified_job_template": "id",
    "all_parents_must_converge": "boolean",
    "extra_data": "json",
}
POST_FIELDS = {
    "job_templates": JOB_TEMPLATE_FIELDS,
    "workflow_job_templates": WORKFLOW_FIELDS,
    "workflow_nodes": NODE_FIELDS,
}
RELATIONS = ("success_nodes", "failure_nodes", "always_nodes")


class FakeAwx(Connection):
    """AWX's REST API as awxkit's import sees it, objects kept in memory."""

    def __init__(self):
        super().__init__("https://awx.example")
        self.objects: dict[str, dict] = {}  # detail URL -> the object's JSON
        self.links: dict[str, list[str]] = {}  # association list URL -> detail URLs
        self.ids = itertools.count(1)

    def add(self, collection, fields, related=()):
        number = next(self.ids)
        url = f"{API}{collection}/{number}/"
        obj = {"id": number, "type": TYPES[collection], "url": url, "related": {}, **fields}
        for name, target in dict(related).items():
            obj["related"][name] = target
        self.objects[url] = obj
        return obj

    def request(self, relative_endpoint, method="get", json=None, data=None, **kw):
        path = urlsplit(relative_endpoint).path
        query = kw.get("query_parameters") or {}
        handler = getattr(self, f"_{method}")
        status, body, headers = handler(path, query, json)
        return SimpleNamespace(
            status_code=status,
            json=lambda: copy.deepcopy(body) if body is not None else _no_json(),
            text="",
            headers=headers,
            elapsed=timedelta(0),
            request=SimpleNamespace(path_url=path, method=method.upper()),
        )

    def _get(self, path, query, _):
        if path == API:
            return 200, _root(), {}
        if path in self.objects:
            return 200, self.objects[path], {}
        if path in self.links:
            return 200, _page([self.objects[u] for u in self.links[path]]), {}
        collection = path[len(API) :].strip("/")
        assert collection in TYPES or collection in _root_names(), path
        found = [
            o
            for o in self.objects.values()
            if o["type"] == TYPES.get(collection)
            and all(str(o.get(k)) == str(v) for k, v in query.items() if k != "page_size")
        ]
        return 200, _page(found), {}

    def _options(self, path, _query, _json):
        kind = path.rstrip("/").rsplit("/", 1)[-1]
        fields = POST_FIELDS.get(kind, {"name": "string"})
        post = {name: {"type": kind_, "required": False} for name, kind_ in fields.items()}
        body = {"actions": {"POST": post}, "search_fields": ["name"], "description": ""}
        return 200, body, {"Allow": "GET, POST, HEAD, OPTIONS"}

    def _post(self, path, _query, json):
        if path.endswith("/workflow_nodes/"):  # created under its workflow
            workflow = path[: -len("workflow_nodes/")]
            return 201, self._node(workflow, json), {}
        if path in self.links:  # an association by id: AWX answers 204, no content
            assert set(json) == {"id"}, json
            self.links[path].append(f"{API}{_linked(path)}/{json['id']}/")
            return 204, None, {}
        made = self._template(path[len(API) :].strip("/"), json)
        return (201 if "id" in made else 400), made, {}

    def _put(self, path, _query, json):
        self.objects[path].update(json)
        return 200, self.objects[path], {}

    def _ref(self, collection, number):
        url = f"{API}{collection}/{number}/"
        assert url in self.objects, f"no {url}"
        return url

    def _template(self, collection, fields):
        assert set(fields) <= set(POST_FIELDS[collection]), set(fields) - set(
            POST_FIELDS[collection]
        )
        # awxkit sends None for a name it found no object for: AWX refuses a template
        # without its project, inventory or organization; the EE may be empty.
        missing = [
            f for f in ("inventory", "project", "organization") if f in fields and fields[f] is None
        ]
        if missing:
            return {f: ["This field is required."] for f in missing}
        if collection == "job_templates":
            project = self.objects[self._ref("projects", fields["project"])]
            related = {
                "inventory": self._ref("inventories", fields["inventory"]),
                "project": project["url"],
                "organization": project["related"]["organization"],
            }
            if fields.get("execution_environment") is not None:
                related["execution_environment"] = self._ref(
                    "execution_environments", fields["execution_environment"]
                )
        else:
            related = {"organization": self._ref("organizations", fields["organization"])}
        obj = self.add(collection, fields, related)
        for name in ("credentials",) if collection == "job_templates" else ("workflow_nodes",):
            obj["related"][name] = f"{obj['url']}{name}/"
            self.links[obj["related"][name]] = []
        return obj

    def _node(self, workflow, fields):
        assert set(fields) <= set(NODE_FIELDS), set(fields) - set(NODE_FIELDS)
        template = self._ref("job_templates", fields["unified_job_template"])
        obj = self.add(
            "workflow_job_template_nodes",
            fields,
            {"workflow_job_template": workflow, "unified_job_template": template},
        )
        for name in RELATIONS:
            obj["related"][name] = f"{obj['url']}{name}/"
            self.links[obj["related"][name]] = []
        self.links[f"{workflow}workflow_nodes/"].append(obj["url"])
        return obj

    def named(self, kind, name):
        (found,) = [o for o in self.objects.values() if o["type"] == kind and o.get("name") == name]
        return found


def _linked(path):
    """The collection an association list holds."""
    return "credentials" if path.endswith("/credentials/") else "workflow_job_template_nodes"


def _no_json():
    raise ValueError("no content")


def _page(results):
    return {"count": len(results), "next": None, "previous": None, "results": results}


# awxkit orders its import by every page class its exportable ones depend on: AWX's
# root lists system job templates too.
ROOT_NAMES = (*EXPORTABLE_RESOURCES, "system_job_templates")


def _root_names():
    return {"inventories" if r == "inventory" else r for r in ROOT_NAMES}


def _root():
    return {r: f"{API}{'inventories' if r == 'inventory' else r}/" for r in ROOT_NAMES}


@pytest.fixture
def awx():
    """An AWX with what docs/ansible.md has the admin create before the import."""
    fake = FakeAwx()
    org = fake.add("organizations", {"name": "Default"})
    machine = fake.add("credential_types", {"name": "Machine", "kind": "ssh"})
    fake.add(
        "credentials",
        {"name": "Kiln"},
        {"organization": org["url"], "credential_type": machine["url"]},
    )
    for collection in ("inventories", "projects"):
        fake.add(collection, {"name": "Kiln"}, {"organization": org["url"]})
    fake.add("execution_environments", {"name": "Kiln"})
    return fake


def imported(fake, document):
    api = ApiV2(fake, endpoint=API, json=_root())
    api.import_assets(copy.deepcopy(document))
    assert not getattr(api, "_has_error", False)


def test_awx_import_makes_the_templates_and_the_workflow(awx, write_inventory):
    hosts = cluster_inventory(compute=("gpu001", "gpu002", "gpu003", "gpu004", "gpu005"))
    document, _ = export(inventory.load(write_inventory(hosts)), 3, Names())
    imported(awx, document)
    ids = {kind: awx.named(kind, "Kiln")["id"] for kind in ("inventory", "project")}
    ee = awx.named("execution_environment", "Kiln")["id"]
    credential = awx.named("credential", "Kiln")["url"]
    made = {}
    for template in document["job_templates"]:
        obj = awx.named("job_template", template["name"])
        made[obj["url"]] = template["name"]
        assert (obj["inventory"], obj["project"], obj["execution_environment"]) == (
            ids["inventory"],
            ids["project"],
            ee,
        )
        assert (obj["limit"], obj["extra_vars"], obj["playbook"], obj["use_fact_cache"]) == (
            template["limit"],
            template["extra_vars"],
            template["playbook"],
            True,
        )
        assert awx.links[obj["related"]["credentials"]] == [credential]

    def edges(*success):
        return {"success_nodes": list(success), "failure_nodes": [], "always_nodes": []}

    expected = {
        "slice-1": ("kiln slice-1", edges("controllers")),
        "slice-2": ("kiln slice-2", edges("controllers")),
        "slice-3": ("kiln slice-3", edges("controllers")),
        "controllers": ("kiln controllers", edges("slurm-1", "slurm-2", "slurm-3")),
        "slurm-1": ("kiln slurm-1", edges()),
        "slurm-2": ("kiln slurm-2", edges()),
        "slurm-3": ("kiln slurm-3", edges()),
    }
    assert workflow_graph(awx, "kiln provision --slices 3", made) == expected
    # Imported again (the workflow written anew): the same objects, updated in place.
    count = len(awx.objects)
    imported(awx, document)
    assert len(awx.objects) == count
    assert workflow_graph(awx, "kiln provision --slices 3", made) == expected


def workflow_graph(awx, name, templates):
    """Each node of the workflow NAME: its template's name and its children by relation."""
    workflow = awx.named("workflow_job_template", name)
    nodes = {u: awx.objects[u] for u in awx.links[workflow["related"]["workflow_nodes"]]}
    return {
        n["identifier"]: (
            templates[n["related"]["unified_job_template"]],
            {r: [nodes[u]["identifier"] for u in awx.links[n["related"][r]]] for r in RELATIONS},
        )
        for n in nodes.values()
    }


def test_a_missing_project_fails_the_import(awx, write_inventory):
    """A project the admin has not created: awxkit finds no object for its natural key,
    sends none, AWX refuses each template; `awx import` reports an error."""
    document, _ = export(inventory.load(write_inventory()), 2, Names(project="nope"))
    api = ApiV2(awx, endpoint=API, json=_root())
    api.import_assets(copy.deepcopy(document))
    assert api._has_error
    assert [o for o in awx.objects.values() if o["type"] == "job_template"] == []
