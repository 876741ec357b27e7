"""docs/architecture.md's module map names every module under src/shoal, each in
its package's row, and names none that does not exist: a module added without a
line there fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "shoal"
DOC = ROOT / "docs" / "architecture.md"
MIGRATION = re.compile(r"^\d{4}_\w+\.py$")  # the versions/ row names them as a pattern


def module_map(text: str) -> dict[str, str]:
    """The map's rows: package directory (relative to src/shoal, "" for shoal/) -> text."""
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([\w/]+)/` \| (.*) \|$", line)
        if m:
            rows["" if m.group(1) == "shoal" else m.group(1)] = m.group(2)
    return rows


def missing(rows: dict[str, str], src: Path) -> list[str]:
    """Modules under `src` whose package has no row or whose row does not name them."""
    out = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        package = path.parent.relative_to(src).as_posix().replace(".", "")
        row = rows.get(package)
        named = row is not None and (
            f"`{path.name}`" in row or (MIGRATION.match(path.name) and "NNNN_" in row)
        )
        if not named:
            out.append(path.relative_to(src).as_posix())
    return out


def ghosts(rows: dict[str, str], src: Path) -> list[str]:
    """Modules a row names that do not exist."""
    return [
        f"{package}/{name}".lstrip("/")
        for package, row in rows.items()
        for name in re.findall(r"`(\w+\.py)`", row)
        if not (src / package / name).exists()
    ]


def test_the_check_finds_a_missing_module_and_a_ghost(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    for name in ("runtime.py", "db/__init__.py", "db/engine.py", "db/new.py"):
        (tmp_path / name).write_text("")
    rows = module_map(
        "## Module map\n\n| package | modules |\n|---|---|\n"
        "| `shoal/` | `runtime.py` (the root) |\n| `db/` | `engine.py`, `gone.py` |\n"
    )
    assert missing(rows, tmp_path) == ["db/new.py"]
    assert ghosts(rows, tmp_path) == ["db/gone.py"]


@pytest.fixture(scope="module")
def rows() -> dict[str, str]:
    return module_map(DOC.read_text())


def test_every_module_is_in_the_map(rows: dict[str, str]) -> None:
    assert missing(rows, SRC) == []


def test_the_map_names_no_module_that_does_not_exist(rows: dict[str, str]) -> None:
    assert ghosts(rows, SRC) == []
