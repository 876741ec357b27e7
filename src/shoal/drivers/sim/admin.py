"""The sim's admin operations: config, quotas, fault rules, reset.

Used by the admin API (`/v1/sim/...`) and directly by tests. Every change is
stored in the sim tables and bumps the world version, so that all processes on
the world see it on their next call. Bad input raises shoal's domain errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, insert, select

from shoal.domain.errors import NotFound
from shoal.drivers.sim import tables
from shoal.drivers.sim.config import Quota, SimConfig, quota_from
from shoal.drivers.sim.faults import check_rule
from shoal.drivers.sim.store import WorldStore, _rule


class AdminOps(WorldStore):
    """Admin operations of a world (mixed into SimWorld)."""

    def config(self) -> dict[str, Any]:
        """The current config (timings, rate limit, zones, capacity, default quota)."""
        return self.snapshot().config.public()

    def patch_config(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change some config fields (Invalid on unknown fields or out-of-bounds values)."""
        with self._txn(write=True) as conn:
            cfg = self._load(conn).config.patched(changes, self._clock.now())
            self._store_config(conn, cfg)
        return cfg.public()

    def quota(self, project_id: str) -> dict[str, Any]:
        """The limits and current usage of one project."""
        with self._txn(write=False) as conn:
            snap = self._load(conn)
            u = tables.usage
            row = conn.execute(
                select(u).where(u.c.scope == "project", u.c.key == project_id)
            ).first()
        used = Quota(row.instances, row.cores, row.ram_mb) if row else Quota(0, 0, 0)
        limits = snap.quotas.get(project_id, snap.config.default_quota)
        return {"project_id": project_id, "limits": limits.as_dict(), "usage": used.as_dict()}

    def set_quota(self, project_id: str, limits: Mapping[str, Any]) -> dict[str, Any]:
        """Set some limits of one project (others keep their value); returns quota()."""
        with self._txn(write=True) as conn:
            snap = self._load(conn)
            base = snap.quotas.get(project_id, snap.config.default_quota)
            q = quota_from(limits, base)
            conn.execute(delete(tables.quotas).where(tables.quotas.c.project == project_id))
            conn.execute(insert(tables.quotas).values(project=project_id, **q.as_dict()))
            self._bump(conn)
        return self.quota(project_id)

    def add_fault(self, rule: Mapping[str, Any]) -> dict[str, Any]:
        """Add a fault rule (Invalid if malformed); returns it with its id."""
        values = check_rule(dict(rule))
        with self._txn(write=True) as conn:
            fid = conn.execute(
                insert(tables.faults).values(**values, fired=0, seen=0)
            ).inserted_primary_key
            assert fid is not None
            self._bump(conn)
        return self.fault(int(fid[0]))

    def fault(self, fault_id: int) -> dict[str, Any]:
        """One fault rule with how often it fired (NotFound if there is none)."""
        f = tables.faults
        with self._txn(write=False) as conn:
            row = conn.execute(select(f).where(f.c.id == fault_id)).first()
        if row is None:
            raise NotFound("sim fault", str(fault_id))
        return _rule(row).as_dict()

    def faults(self) -> list[dict[str, Any]]:
        """Every fault rule, oldest first, with how often each fired."""
        f = tables.faults
        with self._txn(write=False) as conn:
            rows = conn.execute(select(f).order_by(f.c.id)).all()
        return [_rule(r).as_dict() for r in rows]

    def delete_fault(self, fault_id: int) -> None:
        """Remove one fault rule (NotFound if there is none)."""
        with self._txn(write=True) as conn:
            gone = conn.execute(delete(tables.faults).where(tables.faults.c.id == fault_id))
            if gone.rowcount == 0:
                raise NotFound("sim fault", str(fault_id))
            self._bump(conn)

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        with self._txn(write=True) as conn:
            conn.execute(delete(tables.faults))
            self._bump(conn)

    def reset(self) -> None:
        """An empty world: no servers, quotas or faults; config from this process's settings."""
        with self._txn(write=True) as conn:
            for t in (tables.servers, tables.user_data, tables.quotas, tables.usage, tables.faults):
                conn.execute(delete(t))
            self._store_config(conn, SimConfig.from_settings(self._settings, self._clock.now()))
