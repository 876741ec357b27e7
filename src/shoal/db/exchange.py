"""Move the management plane: every resource of a deployment (templates, clusters,
node groups, nodes, their CAs, operations, events, quotas) as one JSON document,
and that document into another deployment, which then adopts the machines the
cloud holds (the node rows come with their uuids, which are the machines' ids:
nothing is recreated).

The CA keys travel sealed, as they are stored: the importing deployment must run
with the same secret key (it also derives the node agents' tokens). The sim
world is the cloud, not the deployment: it is not in the document. What a
running deployment keeps about itself (leases, conductors, providers' last
checks, the deployment state) is not either.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, DateTime, LargeBinary, Table, select

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.tables import (
    ClusterCARow,
    ClusterCredentialRow,
    ClusterRow,
    ClusterTemplateRow,
    EventRow,
    NodeGroupRow,
    NodeGroupTemplateRow,
    NodeRow,
    NodeTaskRow,
    OperationRow,
    QuotaRow,
    table_of,
)
from shoal.db.types import utcnow
from shoal.domain import sealing
from shoal.domain.errors import Conflict, Invalid

FORMAT, VERSION = "shoal-export", 1
# Parents before children; each is exported in the order it was made.
TABLES: tuple[Table, ...] = tuple(
    table_of(r)
    for r in (
        ClusterTemplateRow,
        NodeGroupTemplateRow,
        ClusterRow,
        ClusterCARow,
        ClusterCredentialRow,
        NodeGroupRow,
        NodeRow,
        OperationRow,
        NodeTaskRow,
        EventRow,
        QuotaRow,
    )
)
# Resources a target must not hold already (by these keys).
UNIQUE: Mapping[str, tuple[str, ...]] = {
    "cluster_templates": ("uuid",),
    "nodegroup_templates": ("uuid",),
    "clusters": ("uuid",),
    "quotas": ("project_id", "resource"),
}
Progress = Callable[[str], None]


@dataclass
class Report:
    """Rows written, per table."""

    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _rows(s: Connection, table: Table) -> Iterator[dict[str, Any]]:
    order = table.c.id if "id" in table.c else list(table.primary_key.columns)[0]
    for row in s.execute(select(table).order_by(order)):
        yield {k: _plain(v) for k, v in row._mapping.items() if k != "id"}


def export_document(db: Database, key_id: str) -> dict[str, Any]:
    """The deployment's resources as one JSON-able document, read in one snapshot
    (`key_id`: the secret key its CA keys are sealed with)."""
    with db.core_read(snapshot=True) as s:
        tables = {t.name: list(_rows(s, t)) for t in TABLES}
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": utcnow().isoformat(),
        "key_id": key_id,
        "tables": tables,
    }


def _typed(table: Table, row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A document row as the table's column values (dates parsed, bytes decoded)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key not in table.c or key == "id":
            raise Invalid(f"{where}: {key!r} is not a column of {table.name}", "document")
        kind = table.c[key].type
        kind = getattr(kind, "impl", kind)  # a TypeDecorator's own type (UTC dates)
        if value is not None and isinstance(kind, DateTime):
            try:
                value = datetime.fromisoformat(value)
            except (TypeError, ValueError) as exc:
                raise Invalid(f"{where}.{key}: not a date: {value!r}", "document") from exc
        elif value is not None and isinstance(kind, LargeBinary):
            value = base64.b64decode(value)
        out[key] = value
    return out


def _check(doc: Any) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Invalid("not a shoal export (its format is not shoal-export)", "document")
    if doc.get("version") != VERSION:
        raise Invalid(
            f"export version {doc.get('version')!r}: this shoal reads version {VERSION}",
            "document",
        )
    tables = doc.get("tables")
    known = {t.name for t in TABLES}
    if not isinstance(tables, dict) or not set(tables) <= known:
        extra = sorted(set(tables or {}) - known) if isinstance(tables, dict) else []
        raise Invalid(f"the export's tables are not shoal's: {extra}", "document")
    return tables


def _sealed_with(tables: Mapping[str, list[dict[str, Any]]]) -> set[str]:
    """The keys the export's secrets (CA keys, clusters' trusts) were sealed with."""
    return {
        k
        for name in ("cluster_cas", "cluster_credentials")
        for r in tables.get(name, [])
        for v in r.values()
        if isinstance(v, str) and (k := sealing.sealed_by(v) or "")
    }


def import_document(
    db: Database, doc: Any, key_id: str, progress: Progress = lambda _line: None
) -> Report:
    """Write an export into this deployment, in one transaction: refused (nothing
    written) when it is not an export, when its CA keys need another secret key than
    this deployment's (`key_id`), or when a resource it holds exists here already."""
    tables = _check(doc)
    other = _sealed_with(tables) - {key_id}
    if other:
        raise Conflict(
            f"the export's secrets (cluster CA keys, trusts) are sealed with secret key "
            f"{sorted(other)[0]}, and "
            f"this deployment runs with key {key_id}: start it with the exporting "
            "deployment's key (SHOAL_SECRET_KEY_FILE), which the node agents' tokens come "
            "from too"
        )
    by_name = {t.name: t for t in TABLES}
    report = Report()
    now = utcnow()
    with db.write() as s:
        for name, keys in UNIQUE.items():
            table = by_name[name]
            for row in tables.get(name, []):
                match = [table.c[k] == row.get(k) for k in keys]
                if s.execute(select(table.c[keys[0]]).where(*match)).first() is not None:
                    shown = ", ".join(f"{k} {row.get(k)}" for k in keys)
                    raise Conflict(f"{name} with {shown} exists here already: nothing imported")
        for table in TABLES:
            rows = [
                _typed(table, r, f"{table.name}[{i}]")
                for i, r in enumerate(tables.get(table.name, []))
            ]
            for r in rows:
                if "next_reconcile_at" in table.c:  # looked at at once: adoption
                    r["next_reconcile_at"] = now
            if rows:
                s.execute(table.insert(), rows)
            report.rows[table.name] = len(rows)
            progress(f"{table.name}: {len(rows)} row(s)")
        for c in tables.get("clusters", []):
            events.record(
                s, c["uuid"], "Imported", "cluster imported from another deployment's export"
            )
    return report
