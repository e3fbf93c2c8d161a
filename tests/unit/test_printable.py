"""kiln.printable: text from outside as a terminal may show it."""

import pytest

from kiln.printable import printable


@pytest.mark.parametrize(
    ("raw", "one_line", "block"),
    [
        ("gpu001", "gpu001", "gpu001"),
        ("clear\x1b[2J\x1b[Hscreen", "clear\\x1b[2J\\x1b[Hscreen", "clear\\x1b[2J\\x1b[Hscreen"),
        ("\x1b]0;owned\x07title", "\\x1b]0;owned\\x07title", "\\x1b]0;owned\\x07title"),
        ("x\rkiln: all clear", "x\\rkiln: all clear", "x\\rkiln: all clear"),
        ("a\nkiln: all clear", "a\\nkiln: all clear", "a\nkiln: all clear"),
        ("a\tb", "a\\tb", "a\tb"),
        ("\x9b31m8-bit CSI\x7f", "\\x9b31m8-bit CSI\\x7f", "\\x9b31m8-bit CSI\\x7f"),
        ("\u202eevil\u2066", "\\u202eevil\\u2066", "\\u202eevil\\u2066"),
        ("line\u2028sep", "line\\u2028sep", "line\\u2028sep"),
        ("nul\x00", "nul\\x00", "nul\\x00"),
        ("gpu-ü 日本 [red]", "gpu-ü 日本 [red]", "gpu-ü 日本 [red]"),
    ],
)
def test_control_characters_are_shown_as_their_escapes(raw, one_line, block):
    assert printable(raw) == one_line
    assert printable(raw, lines=True) == block
    assert printable(raw).isprintable()  # nothing a terminal acts on
    assert printable(raw, lines=True).replace("\n", "").replace("\t", "").isprintable()
