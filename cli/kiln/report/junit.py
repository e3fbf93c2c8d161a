"""JUnit XML for CI systems: one test suite per node, one test case per judged test."""

from xml.etree import ElementTree as ET

from kiln.report.model import Report
from kiln.validation.verdicts import Verdict


def render(report: Report) -> str:
    root = ET.Element("testsuites", name=f"kiln validate {report.id}")
    by_node: dict[str, list] = {}
    for j in report.judgements:
        by_node.setdefault(j.node, []).append(j)
    for node, judgements in sorted(by_node.items()):
        failures = sum(j.verdict is Verdict.FAIL for j in judgements)
        skipped = sum(j.verdict is Verdict.SKIP for j in judgements)
        errors = sum(j.verdict is Verdict.UNCHECKED for j in judgements)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=node,
            tests=str(len(judgements)),
            failures=str(failures),
            errors=str(errors),
            skipped=str(skipped),
        )
        for j in judgements:
            name = " ".join(p for p in (j.test, j.subject) if p)
            case = ET.SubElement(suite, "testcase", classname=node, name=name)
            if j.verdict is Verdict.FAIL:
                ET.SubElement(case, "failure", message=j.reason).text = j.reason
            elif j.verdict is Verdict.UNCHECKED:  # it could not run: an error, not a failure
                ET.SubElement(case, "error", message=j.reason).text = j.reason
            elif j.verdict is Verdict.SKIP:
                ET.SubElement(case, "skipped", message=j.reason)
            elif j.verdict is Verdict.WARN:
                ET.SubElement(case, "system-out").text = f"warning: {j.reason}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
