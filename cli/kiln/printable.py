"""Text from outside Kiln as a terminal may show it.

Node output, host names, Slurm reasons, Prometheus's alert labels, run records and
reports can hold control characters: an escape sequence clears the screen or sets the
window's title, a carriage return or a line break forges a line of Kiln's own
("kiln: all clear"), a bidirectional override reorders what is read. Every print of
such text goes through `printable`, which shows each of them as its escape (\\x1b, \\r,
\\n, \\u202e) instead.
"""

import re

# C0 and C1 controls and DEL; Unicode's line and paragraph separators (which some
# terminals and every str.splitlines() break lines at) and its bidirectional controls.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_A_LINE = re.compile(f"[\t\n{_CONTROLS}]")
_IN_LINES = re.compile(f"[{_CONTROLS}]")


def printable(text: str, lines: bool = False) -> str:
    """TEXT with every control character shown as its escape. LINES keeps line breaks
    and tabs, for text printed as a block of lines (a diff); never a carriage return."""
    return (_IN_LINES if lines else _IN_A_LINE).sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    return found[0].encode("unicode_escape").decode("ascii")
