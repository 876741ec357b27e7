"""Printing results like the openstack CLI: `-f table|json|yaml|value` and `-c COLUMN`."""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import yaml
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from shoal.cli.client import fail


class Format(enum.StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"
    value = "value"


FormatOpt = Annotated[
    Format,
    typer.Option("-f", "--format", help="output format", case_sensitive=False),
]
ColumnsOpt = Annotated[
    list[str] | None,
    typer.Option("-c", "--column", help="show only this column (repeatable)"),
]


def console(err: bool = False) -> Console:
    """A rich console; wide and uncoloured when not on a terminal, so logs stay readable."""
    stream = sys.stderr if err else sys.stdout
    if stream.isatty():
        return Console(file=stream, highlight=False)
    return Console(file=stream, width=200, highlight=False, no_color=True, soft_wrap=True)


# C0 controls but newline and tab, DEL and the C1 controls (0x9b is a one-byte CSI): a
# cloud's message or a user's name printed raw could move the cursor, retitle the window
# or hide text. Printed as `\x1b` escapes instead.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)] if c not in (9, 10)}


def safe_text(text: str) -> str:
    """`text` with the control characters a terminal would act on shown as `\\xNN`."""
    return text.translate(_CONTROL)


def _cell(value: Any, none: str) -> str:
    if value is None:
        return none
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), default=str)
    return safe_text(str(value))


def _pick(obj: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    return {c: obj.get(c) for c in columns}


def _check_columns(columns: Sequence[str], known: set[str]) -> None:
    unknown = [c for c in columns if c not in known]
    if unknown and known:
        fail(f"unknown column {', '.join(unknown)}; choose from: {', '.join(sorted(known))}", 2)


def show_one(obj: dict[str, Any], fmt: Format, columns: Sequence[str] | None = None) -> None:
    """Print one resource: a Field/Value table, or the object in json/yaml/value."""
    if columns:
        _check_columns(columns, set(obj))
        obj = _pick(obj, columns)
    if fmt is Format.json:
        typer.echo(json.dumps(obj, indent=2, default=str))
    elif fmt is Format.yaml:
        typer.echo(yaml.safe_dump(_plain(obj), sort_keys=False).rstrip())
    elif fmt is Format.value:
        for value in obj.values():
            typer.echo(_cell(value, "None"))
    else:
        table = Table(box=box.SQUARE, show_header=True)
        table.add_column("Field", no_wrap=True)
        table.add_column("Value", overflow="fold")
        for key, value in obj.items():
            table.add_row(Text(safe_text(key)), Text(_cell(value, "-")))
        console().print(table)


def show_list(
    items: Sequence[dict[str, Any]],
    fmt: Format,
    columns: Sequence[str] | None,
    default_columns: Sequence[str],
    title: str | None = None,
) -> None:
    """Print a collection: rows of `default_columns` (or `-c` ones) in any format."""
    known = set().union(*(set(i) for i in items)) if items else set()
    if columns:
        _check_columns(columns, known)
        cols = list(columns)
    elif fmt in (Format.json, Format.yaml):
        cols = list(default_columns)
    else:
        cols = [c for c in default_columns if c in known] if items else list(default_columns)
    rows = [_pick(i, cols) for i in items]
    if fmt is Format.json:
        typer.echo(json.dumps(rows, indent=2, default=str))
    elif fmt is Format.yaml:
        typer.echo(yaml.safe_dump(_plain(rows), sort_keys=False).rstrip())
    elif fmt is Format.value:
        for row in rows:
            typer.echo(" ".join(_cell(v, "None") for v in row.values()))
    else:
        table = Table(box=box.SQUARE, title=title, title_justify="left")
        for c in cols:
            table.add_column(c, overflow="fold")
        for row in rows:
            table.add_row(*(Text(_cell(v, "-")) for v in row.values()))
        console().print(table)


def _plain(value: Any) -> Any:
    """JSON-compatible copy (yaml.safe_dump refuses unknown types)."""
    return json.loads(json.dumps(value, default=str))
