"""The rules `shoal-agent etcd-join` follows, on plain values: which members are stale
(owned by no master of the plan, started once, not this one) and the initial cluster
a joining member starts with."""

from __future__ import annotations

from pathlib import Path

from shoal.agent.etcd_join import Member, has_data, initial_cluster, stale

A, B, C, D = (f"https://10.0.0.{i}:2380" for i in (1, 2, 3, 4))
MASTERS = {"m2": B, "m3": C, "m4": D}


def test_stale_members_are_started_ones_no_master_owns() -> None:
    members = [
        Member("1", "m1", (A,)),  # a lost master: in no master's plan any more
        Member("2", "m2", (B,)),
        Member("3", "", (C,)),  # added, not started yet: kept
        Member("5", "", ("https://10.0.0.9:2380",)),  # unstarted, unowned: another's add
        Member("4", "m4", (D,)),  # this one (restarted before its data was written)
    ]
    got = stale(members, MASTERS, "m4")
    assert [m.name for m in got] == ["m1"]


def test_a_lost_master_whose_address_this_one_has_now_is_stale() -> None:
    """Its member would otherwise be taken for this one by peer URL, with a log
    position this empty data dir does not have (etcd panics)."""
    members = [Member("1", "m1", (D,)), Member("2", "m2", (B,))]
    assert [m.name for m in stale(members, MASTERS, "m4")] == ["m1"]


def test_the_initial_cluster_names_every_member_by_name_or_owner() -> None:
    members = [Member("2", "m2", (B,)), Member("3", "", (C,)), Member("4", "", (D,))]
    assert initial_cluster(members, "m4", D, MASTERS) == f"m2={B},m3={C},m4={D}"
    unowned = [Member("a", "", ("https://10.0.0.9:2380",))]
    assert initial_cluster(unowned, "m4", D, MASTERS) == "member-a=https://10.0.0.9:2380"


def test_a_data_dir_counts_once_it_holds_a_write_ahead_log(tmp_path: Path) -> None:
    assert not has_data(tmp_path)
    (tmp_path / "member" / "snap").mkdir(parents=True)  # a start that failed early
    assert not has_data(tmp_path)
    (tmp_path / "member" / "wal").mkdir()
    assert not has_data(tmp_path)
    (tmp_path / "member" / "wal" / "0000000000000000-0000000000000000.wal").write_bytes(b"x")
    assert has_data(tmp_path)
