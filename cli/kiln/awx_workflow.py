"""`kiln awx workflow`: `kiln provision --slices N` as an AWX / Automation Controller
workflow, written in the format `awx export` writes and `awx import` reads (awxkit's:
each object's fields, `related` objects, and a `natural_key` that names it).

The same plan as kiln.run.slices (its split, its part names, its extra variable):
N slice job templates side by side, then the controllers' template, then each slice's
Slurm check. A slice's `limit` is a subscript of `slurm_compute` (Ansible's inclusive
`[first:last]`, the last slice open-ended so a node added since still belongs to one),
so the templates do not list thousands of names and AWX's inventory decides the
order. Edges are "on success": a failed slice fails the workflow (AWX counts a failure
with an "always" or "on failure" edge as handled, so the workflow would show
successful), yet stops no other slice, and the controllers run once every slice has
finished if one succeeded (docs/ansible.md#a-workflow-of-slices).
"""

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kiln.inventory import ClusterSpec
from kiln.run import skips
from kiln.run.slices import SLICE_VAR, SLURM_STATE_PLAYBOOK, fitted, split

SITE_PLAYBOOK = skips.SITE
COMPUTE_GROUP = "slurm_compute"
# Every host that is not a compute node: what kiln's controllers' part runs.
CONTROLLERS_LIMIT = f"all:!{COMPUTE_GROUP}"


@dataclass(frozen=True)
class Names:
    """The AWX objects the templates use, which the admin creates first
    (docs/ansible.md#awx--automation-controller), and where the playbooks are."""

    organization: str = "Default"
    project: str = "Kiln"
    inventory: str = "Kiln"
    execution_environment: str = "Kiln"
    credential: str = "Kiln"  # a Machine credential of the organization
    playbooks: str = "playbooks"  # the project's folder of site.yml, slurm_state.yml (".")
    prefix: str = "kiln"  # the templates' names: "kiln slice-1", "kiln controllers"
    forks: int = 0  # AWX's 0: the project's ansible.cfg (Kiln's: 32)


@dataclass(frozen=True)
class Step:
    identifier: str  # the workflow node's, kiln's part name: slice-1, controllers, slurm-1
    playbook: str
    limit: str
    extravars: dict[str, Any]
    description: str
    after: tuple[str, ...]  # the steps whose success starts this one


def slice_limits(nodes: int, slices: int) -> list[str]:
    """Each slice's `limit`: kiln.run.slices.split of NODES positions in slurm_compute."""
    cut = split(list(range(nodes)), slices)
    limits = [f"{COMPUTE_GROUP}[{part[0]}:{part[-1]}]" for part in cut]
    limits[-1] = f"{COMPUTE_GROUP}[{cut[-1][0]}:]"
    return limits


@dataclass(frozen=True)
class Layout:
    slices: int
    steps: list[Step]
    note: str | None  # said to the operator: the slices were fewer than asked


def layout(spec: ClusterSpec, asked: int) -> Layout:
    """The workflow's steps for SPEC's compute nodes in ASKED slices; InputError when
    there is no compute node or ASKED is below 1."""
    compute = spec.compute_nodes(None, "slice")
    count, note = fitted(asked, len(compute))
    limits = slice_limits(len(compute), count)
    slices = [f"slice-{i}" for i in range(1, count + 1)]
    found = [
        Step(
            name,
            SITE_PLAYBOOK,
            limit,
            {SLICE_VAR: True},
            f"site.yml on slice {i} of {count} of the compute nodes ({limit})",
            (),
        )
        for i, (name, limit) in enumerate(zip(slices, limits, strict=True), 1)
    ]
    found.append(
        Step(
            "controllers",
            SITE_PLAYBOOK,
            CONTROLLERS_LIMIT,
            {},
            "site.yml on every host outside slurm_compute: slurm.conf, gres.conf and "
            "topology from every compute node's cached facts",
            tuple(slices),
        )
    )
    found += [
        Step(
            f"slurm-{i}",
            SLURM_STATE_PLAYBOOK,
            limit,
            {},
            f"Slurm's view of slice {i} of {count} ({limit}): slurmd started, node usable",
            ("controllers",),
        )
        for i, limit in enumerate(limits, 1)
    ]
    return Layout(count, found, note)


def _organization(names: Names) -> dict[str, str]:
    return {"name": names.organization, "type": "organization"}


def _template_key(names: Names, step: Step) -> dict[str, Any]:
    return {
        "organization": _organization(names),
        "name": f"{names.prefix} {step.identifier}",
        "type": "job_template",
    }


def _job_template(names: Names, step: Step) -> dict[str, Any]:
    key = _template_key(names, step)
    return {
        "name": key["name"],
        "description": step.description,
        "job_type": "run",
        "inventory": {
            "organization": _organization(names),
            "name": names.inventory,
            "type": "inventory",
        },
        "project": {"organization": _organization(names), "name": names.project, "type": "project"},
        "playbook": str(PurePosixPath(names.playbooks, step.playbook)),
        "scm_branch": "",
        "forks": names.forks,
        "limit": step.limit,
        "verbosity": 0,
        "extra_vars": json.dumps(step.extravars),
        "job_tags": "",
        # The steps a run like kiln's never needs, left out as kiln leaves them out.
        "skip_tags": ",".join(skips.kiln_skips(step.playbook, None, None, check=False)),
        "timeout": 0,
        # The controllers' job reads every compute node's facts from AWX's fact
        # cache, which the slices' jobs fill: fact storage on every template.
        "use_fact_cache": True,
        "execution_environment": {
            "name": names.execution_environment,
            "type": "execution_environment",
        },
        "diff_mode": False,
        # Kiln's own parts run one at a time; a second workflow waits for the first.
        "allow_simultaneous": False,
        # AWX's job slicing splits the inventory by itself: not for site.yml.
        "job_slice_count": 1,
        "related": {
            "credentials": [
                {
                    "organization": _organization(names),
                    "name": names.credential,
                    "credential_type": {
                        "name": "Machine",
                        "kind": "ssh",
                        "type": "credential_type",
                    },
                    "type": "credential",
                }
            ]
        },
        "natural_key": key,
    }


def _node_key(workflow: dict[str, Any], identifier: str) -> dict[str, Any]:
    return {
        "workflow_job_template": workflow,
        "identifier": identifier,
        "type": "workflow_job_template_node",
    }


def export(spec: ClusterSpec, asked: int, names: Names) -> tuple[dict[str, Any], str | None]:
    """The `awx import` document: the job templates and the workflow; and the note
    when the slices are fewer than ASKED."""
    plan = layout(spec, asked)
    found, count = plan.steps, plan.slices
    workflow_key = {
        "organization": _organization(names),
        "name": f"{names.prefix} provision --slices {count}",
        "type": "workflow_job_template",
    }
    children = {
        s.identifier: [c.identifier for c in found if s.identifier in c.after] for s in found
    }
    nodes = [
        {
            "identifier": step.identifier,
            "unified_job_template": _template_key(names, step),
            # Any parent's success starts it, once every parent has finished.
            "all_parents_must_converge": False,
            "extra_data": {},
            "related": {
                "success_nodes": [_node_key(workflow_key, c) for c in children[step.identifier]],
                "failure_nodes": [],
                "always_nodes": [],
            },
            "natural_key": _node_key(workflow_key, step.identifier),
        }
        for step in found
    ]
    workflow = {
        "name": workflow_key["name"],
        "description": (
            f"kiln provision --slices {count}: {count} slices of {COMPUTE_GROUP} side by "
            "side, then the controllers, then each slice's Slurm state"
        ),
        "organization": _organization(names),
        "extra_vars": "",
        "allow_simultaneous": False,
        "ask_variables_on_launch": False,
        "ask_inventory_on_launch": False,
        "ask_limit_on_launch": False,
        "survey_enabled": False,
        "related": {"workflow_nodes": nodes},
        "natural_key": workflow_key,
    }
    document = {
        "job_templates": [_job_template(names, s) for s in found],
        "workflow_job_templates": [workflow],
    }
    return document, plan.note
