"""Which node a `nodes_to_remove` entry names (services/resize.py, `node_named`): shoal's
uuids, names and addresses, a Nova server id in any uuid spelling, and an integer that
is a Heat member index in a heat-provider group, else a position by creation."""

from __future__ import annotations

import pytest

from shoal.domain import model as m
from shoal.domain.errors import Invalid
from shoal.services.resize import match_nodes, node_named

U0, U1, U2 = (f"00000000-0000-4000-8000-00000000000{i}" for i in range(3))
S0, S1, S2 = (f"5e4ce7d2-1f0a-4c3b-9d2e-7a1b2c3d4e5{i}" for i in range(3))


def node(i: int, uid: str, server: str | None, index: str | None) -> m.Node:
    return m.Node(i, uid, f"c-w-{i}", "c", "g", "p", m.NodeState.ACTIVE,
                  address=f"10.0.0.{10 + i}", provider_id=server,
                  provider_index=index)  # fmt: skip


# A heat-provider group: members 0 and 2 left after 1 and 3 were removed, then 4 added.
HEAT = [node(0, U0, S0, "0"), node(1, U1, S1, "2"), node(2, U2, S2, "4")]
# A group of the openstack provider: no member indices.
PLAIN = [node(0, U0, S0, None), node(1, U1, S1, None), node(2, U2, S2, None)]
# A heat-provider group whose newest member is not listed yet (no index, no server).
HEAT_NEW = [*HEAT[:2], node(2, U2, None, None)]


@pytest.mark.parametrize(
    ("nodes", "entry", "named"),
    [
        (HEAT, U1, 1),  # shoal's uuid
        (HEAT, S2, 2),  # the Nova server id
        (HEAT, "c-w-0", 0),  # the name
        (HEAT, "10.0.0.12", 2),  # the address
        (HEAT, f"  {S1} ", 1),  # blanks around
        (HEAT, S2.upper(), 2),  # a systemUUID in upper case
        (HEAT, S1.replace("-", ""), 1),  # ... or without dashes
        (HEAT, U0.replace("-", "").upper(), 0),  # shoal's uuid spelled so
        (HEAT, "4", 2),  # a Heat member index
        (HEAT, "2", 1),  # ... not the position (that would be node 2)
        (HEAT, "004", 2),  # ... with leading zeros
        (HEAT, "1", None),  # a removed member's index names nothing
        (HEAT, "3", None),
        (HEAT_NEW, "2", 1),  # indices known for some members: still Heat's
        (HEAT_NEW, "4", None),  # the member not listed yet has no index
        (PLAIN, "2", 2),  # elsewhere: the position by creation
        (PLAIN, "3", None),
        (PLAIN, S0.upper(), 0),
        (HEAT, "-1", None),
        (HEAT, "1.0", None),
        (HEAT, "no-such", None),
        (HEAT, "", None),
        (HEAT, "5e4ce7d2-1f0a-4c3b-9d2e-7a1b2c3d4e59", None),  # a uuid of no member
        ([], "0", None),
    ],
)
def test_an_entry_names_the_node_its_rule_says(
    nodes: list[m.Node], entry: str, named: int | None
) -> None:
    got = node_named(nodes, entry)
    assert (None if got is None else got.id) == named


def test_entries_naming_one_node_twice_remove_it_once() -> None:
    assert [n.id for n in match_nodes(HEAT, [S2, "4", "c-w-2", "c-w-0"])] == [2, 0]


def test_an_entry_naming_no_node_is_refused_naming_it() -> None:
    with pytest.raises(Invalid) as err:
        match_nodes(HEAT, ["4", "3"])
    assert "'3' is not a node of this node group" in str(err.value)
    assert "member index" in str(err.value) and err.value.field == "nodes_to_remove"
