"""shoal.cli.output.safe_text: what a terminal would act on is shown, not sent."""

from __future__ import annotations

import pytest

from shoal.cli.output import safe_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, é and 漢字", "plain text, é and 漢字"),
        ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),  # clear screen, colour
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # set the window title, bell
        ("ok\rFAKE", "ok\\x0dFAKE"),  # carriage return overwrites the line
        ("a\bb\x7f", "a\\x08b\\x7f"),  # backspace, DEL
        ("\x9b31m", "\\x9b31m"),  # the one-byte CSI (C1)
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),  # layout stays
        ("\x00\x1f", "\\x00\\x1f"),
    ],
)
def test_safe_text(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown
