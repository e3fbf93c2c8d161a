"""Filters that hand validation decisions to kiln.validation: which nodes can be tested,
which Kiln drained earlier, and what the suites run (kiln.validation.registry and
kiln.validation.suites, with the role's settings typed: suites.Settings)."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln.validation import drain, registry, results, suites


def kiln_validate_paths(results_dir, run):
    """Every path the role writes results to (kiln.validation.results owns the layout)."""
    return results.for_role(results_dir, run)


def kiln_validate_plan(scontrol_text, nodes, idle_only=False):
    """`scontrol show node --oneliner` output -> which nodes to test and resume."""
    return drain.plan(scontrol_text, list(nodes), bool(idle_only)).to_dict()


def kiln_validate_still_ours(scontrol_text, nodes):
    """The nodes Kiln may still drain: none drained by someone else since it judged."""
    return drain.still_ours(scontrol_text, list(nodes))


def kiln_validate_drained_by_kiln(scontrol_text, nodes):
    """The nodes Kiln may still resume: drained, with Kiln's reason."""
    return drain.drained_by_kiln(scontrol_text, list(nodes))


def kiln_validate_writer(record, settings):
    """The argv that writes the controller's record `record` (a key of
    results.CONTROLLER_RECORDS) from the JSON object on its stdin (kiln_node.records)."""
    return suites.writer(suites.Settings.from_role(settings), str(record))


def kiln_validate_recorder(settings):
    """kiln_node.records' argv (kiln-validate-probe record), for a record made on a node."""
    return suites.recorder(suites.Settings.from_role(settings))


def kiln_validate_look(settings):
    """kiln_node.prerequisites' argv: what a node under test is looked at for, from the
    suites asked for (their needs in kiln.validation.registry)."""
    return registry.look(suites.Settings.from_role(settings))


def kiln_validate_prepare(hostvars, nodes, settings):
    """What the suites share once the nodes under test are chosen: the srun step, the
    command lines, what the nodes lack (each node's look, registered as suites.FOUND)
    and the messages that follow from it."""
    return registry.prepare(hostvars, list(nodes), suites.Settings.from_role(settings))


def kiln_validate_tree(mount_check, settings):
    """The registered kiln-mount-check run (skipped: none) -> the cold-import tree's mount
    and the probe's argv that write and remove it."""
    return suites.tree(suites.Settings.from_role(settings), mount_check.get("stdout") or "")


def kiln_validate_cold_import(written, mount, module):
    """The registered `kiln-validate-probe tree` run (skipped: no mount or the operator's own
    module) -> what the test imports, or why it is skipped."""
    return suites.cold_import(written.get("stdout") or "", str(mount), str(module))


def kiln_validate_cold_import_argv(chosen, settings, shared):
    """The cold-import test's argv, its start 10 s from now (so built at its task)."""
    return suites.cold_import_argv(suites.Settings.from_role(settings), shared, chosen)


class FilterModule:
    def filters(self):
        return {
            "kiln_validate_cold_import": kiln_validate_cold_import,
            "kiln_validate_cold_import_argv": kiln_validate_cold_import_argv,
            "kiln_validate_drained_by_kiln": kiln_validate_drained_by_kiln,
            "kiln_validate_look": kiln_validate_look,
            "kiln_validate_paths": kiln_validate_paths,
            "kiln_validate_plan": kiln_validate_plan,
            "kiln_validate_prepare": kiln_validate_prepare,
            "kiln_validate_recorder": kiln_validate_recorder,
            "kiln_validate_still_ours": kiln_validate_still_ours,
            "kiln_validate_tree": kiln_validate_tree,
            "kiln_validate_writer": kiln_validate_writer,
        }
