"""The policy table and shoal's own tokens, as pure functions (domain/policy.py,
domain/tokens.py); the route x role x project matrix through the real server is
tests/integration/test_auth_matrix.py."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shoal.domain import policy, tokens
from shoal.domain.errors import Forbidden, Invalid
from shoal.domain.policy import ADMIN, MEMBER, READER, Principal

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def who(*roles: str, project: str = "p1", all_projects: bool = False) -> Principal:
    return Principal(project, "u1", frozenset(roles), all_projects)


@pytest.mark.parametrize(
    ("roles", "expected"),
    [((READER,), READER), ((MEMBER,), MEMBER), ((ADMIN,), ADMIN),
     ((READER, MEMBER, ADMIN), ADMIN), ((READER, ADMIN), ADMIN), ((), "")],
)  # fmt: skip
def test_the_highest_role_held_counts(roles: tuple[str, ...], expected: str) -> None:
    assert who(*roles).role == expected


@pytest.mark.parametrize("rule", sorted(policy.RULES))
def test_each_rule_admits_its_role_and_the_ones_above_and_nobody_below(rule: str) -> None:
    need = policy.RULES[rule]
    rank = policy.ROLES.index(need)
    for i, role in enumerate(policy.ROLES):
        assert policy.allowed(who(role), rule) is (i >= rank), (rule, role)
    assert not policy.allowed(who(), rule)


def test_a_refusal_names_the_rule_the_role_it_needs_and_the_one_held() -> None:
    with pytest.raises(Forbidden) as got:
        policy.enforce(who(READER), "cluster:create")
    text = got.value.message
    assert "cluster:create" in text and "member role" in text and "(the token has reader)" in text
    with pytest.raises(Forbidden, match="no role of shoal's"):
        policy.enforce(who("heat_stack_owner"), "cluster:get")


def test_only_an_admin_may_ask_for_every_project() -> None:
    with pytest.raises(Forbidden, match="all_projects"):
        policy.enforce(who(MEMBER, all_projects=True), "cluster:get")
    policy.enforce(who(ADMIN, all_projects=True), "cluster:get")
    assert who(ADMIN, all_projects=True).scope == policy.Scope("p1", True, True)
    # a member's request for every project never widens its scope
    assert who(MEMBER, all_projects=True).scope == policy.Scope("p1", False, False)


def test_an_unknown_rule_is_a_programming_error_not_a_refusal() -> None:
    with pytest.raises(KeyError):
        policy.allowed(who(ADMIN), "cluster:teleport")


def test_keystone_role_names_map_to_ours() -> None:
    assert policy.roles_of(["Member", "_member_", "heat_stack_owner"]) == {MEMBER}
    assert policy.roles_of(["ADMIN", "reader"]) == {ADMIN, READER}
    assert policy.roles_of("admin") == frozenset()  # one string is not a list of names
    assert policy.roles_of(None) == frozenset()


def test_every_rule_is_written_down_in_the_api_docs() -> None:
    """docs/api.md's table writes rules as `a:b` or, sharing a prefix, `a:b/c/d`."""
    section = API_DOC.read_text().split("## Who may do what", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 3 or cells[1] not in policy.ROLES:
            continue
        for written in re.findall(r"`([a-z_]+(?::[a-z_/]+)?)`", cells[0]):
            prefix, _, names = written.partition(":")
            for name in names.split("/") if names else [""]:
                documented[f"{prefix}:{name}" if name else prefix] = cells[1]
    assert documented == policy.RULES


def test_tokens_are_random_well_formed_and_kept_by_digest_only() -> None:
    made = {tokens.new() for _ in range(50)}
    assert len(made) == 50
    for token in made:
        assert tokens.well_formed(token) and token.startswith("shoal_")
        assert tokens.digest(token) == hashlib.sha256(token.encode()).hexdigest()
        assert tokens.hint(token) == token[:10]
    assert not tokens.well_formed("shoal_short")
    assert not tokens.well_formed("x" + next(iter(made))[1:])


@pytest.mark.parametrize(
    ("value", "after"),
    [("30m", timedelta(minutes=30)), ("12h", timedelta(hours=12)),
     ("90d", timedelta(days=90)), ("2w", timedelta(weeks=2))],
)  # fmt: skip
def test_an_expiry_may_be_a_duration(value: str, after: timedelta) -> None:
    assert tokens.expiry(value, NOW) == NOW + after


def test_an_expiry_may_be_a_time_with_a_zone_or_never() -> None:
    assert tokens.expiry("2027-01-01T00:00:00Z", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    assert tokens.expiry(None, NOW) is None and tokens.expiry("never", NOW) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [("0d", "in the future"), ("2020-01-01T00:00:00+00:00", "not in the future"),
     ("2027-01-01T00:00:00", "time zone"), ("soon", "a duration"), ("9999999d", "a duration")],
)  # fmt: skip
def test_a_bad_expiry_says_what_is_accepted(value: str, says: str) -> None:
    with pytest.raises(Invalid, match=says):
        tokens.expiry(value, NOW)


def test_a_token_is_usable_until_it_expires_or_is_revoked() -> None:
    info = tokens.TokenInfo(
        "u", "shoal_abcd", "p1", "u1", MEMBER, None, None, NOW, NOW + timedelta(hours=1), None
    )
    assert info.usable(NOW) and not info.usable(NOW + timedelta(hours=1))
    revoked = tokens.TokenInfo("u", "shoal_abcd", "p1", "u1", MEMBER, None, None, NOW, None, NOW)
    assert not revoked.usable(NOW)
