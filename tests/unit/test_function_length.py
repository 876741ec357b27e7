"""No function in the conductor is longer than 60 lines (issue 24): a pass is a list
of small phases, and a function that grows past that is split before it becomes
the one every feature edits."""

from __future__ import annotations

import ast
from pathlib import Path

import shoal.conductor

LIMIT = 60
ROOT = Path(shoal.conductor.__file__).parent


def long_functions(root: Path, limit: int) -> list[str]:
    """Every function (methods and nested ones included) under `root` longer than
    `limit` lines, from its `def` to its last line, as "path:line name (n lines)"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length})")
    return found


def test_no_function_in_the_conductor_is_over_60_lines() -> None:
    assert list(ROOT.rglob("*.py")), "the conductor's sources are not where the test looks"
    assert long_functions(ROOT, LIMIT) == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(
        f"def too_long() -> None:\n{body}\n\ndef short() -> None:\n    pass\n"
    )
    assert long_functions(tmp_path, LIMIT) == [f"long.py:1 too_long ({LIMIT + 1})"]
