"""shoal.cli.demo.stays: whether `shoal demo` keeps serving after its checks."""

from __future__ import annotations

import pytest

from shoal.cli.demo import stays


@pytest.mark.parametrize(
    ("option", "stdin_tty", "stdout_tty", "stay"),
    [
        (None, True, True, True),  # a person at a terminal: watch the dashboard
        (None, True, False, False),  # output piped or logged
        (None, False, True, False),  # input from a script or CI
        (None, False, False, False),
        (True, False, False, True),  # --stay wins
        (False, True, True, False),  # --no-stay wins
    ],
)
def test_stays(option: bool | None, stdin_tty: bool, stdout_tty: bool, stay: bool) -> None:
    assert stays(option, stdin_tty, stdout_tty) is stay
