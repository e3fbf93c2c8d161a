"""JUnit XML for CI systems: one test suite per node, one test case per judged test."""

import re
from xml.etree import ElementTree as ET

from kiln.report.document import Report
from kiln.validation.verdicts import Verdict

# XML 1.0 holds tab, line feed, carriage return and the characters from U+0020 on (less
# the surrogates, U+FFFE and U+FFFF); ElementTree writes any other as it is, and the
# file no longer parses. A reason may quote a node's output (a terminal colour code).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    """`value` with each character XML cannot hold written as its escape (\\x1b)."""
    return _NOT_XML.sub(lambda m: m[0].encode("unicode_escape").decode(), value)


def render(report: Report) -> str:
    root = ET.Element("testsuites", name=f"kiln validate {report.id}")
    by_node: dict[str, list] = {}
    for j in report.judgements:
        by_node.setdefault(j.node, []).append(j)
    for node, judgements in sorted(by_node.items()):
        failures = sum(j.verdict is Verdict.FAIL for j in judgements)
        # Measured, not judged: no reference number to test it against, a skipped test.
        skipped = sum(j.verdict in (Verdict.SKIP, Verdict.MEASURED) for j in judgements)
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
            name = _text(" ".join(p for p in (j.test, j.subject) if p))
            case = ET.SubElement(suite, "testcase", classname=node, name=name)
            reason = _text(j.reason)
            if j.verdict is Verdict.FAIL:
                ET.SubElement(case, "failure", message=reason).text = reason
            elif j.verdict is Verdict.UNCHECKED:  # it could not run: an error, not a failure
                ET.SubElement(case, "error", message=reason).text = reason
            elif j.verdict in (Verdict.SKIP, Verdict.MEASURED):
                ET.SubElement(case, "skipped", message=reason)
            elif j.verdict is Verdict.WARN:
                ET.SubElement(case, "system-out").text = f"warning: {reason}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
