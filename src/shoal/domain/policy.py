"""Who may do what: roles and the one policy table, after Magnum's secure-RBAC defaults.

Three roles, each including the ones before it: `reader` (look), `member` (change the
project's resources), `admin` (everything, in every project). Every rule names the least
role it needs; `enforce` is the only check, called at each service entry with the
request's `Principal`. Another project's resources are not a policy matter: lookups are
scoped to the caller's project (`Principal.scope`), so they answer 404, never a 403 that
would confirm they exist. docs/api.md ("Who may do what") shows this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.domain.errors import Forbidden

READER, MEMBER, ADMIN = "reader", "member", "admin"
ROLES = (READER, MEMBER, ADMIN)  # in order: a role includes every role before it
# Keystone role names that mean one of ours (Keystone's bootstrap also implies
# member -> reader and admin -> member, so a token usually lists all of them).
ROLE_ALIASES = {"_member_": MEMBER}

RULES: dict[str, str] = {
    # cluster templates (a public template is visible to every project)
    "clustertemplate:get": READER,
    "clustertemplate:create": MEMBER,
    "clustertemplate:update": MEMBER,
    "clustertemplate:delete": MEMBER,
    "clustertemplate:publish": ADMIN,
    # node group templates
    "nodegrouptemplate:get": READER,
    "nodegrouptemplate:create": MEMBER,
    "nodegrouptemplate:update": MEMBER,
    "nodegrouptemplate:delete": MEMBER,
    # clusters, their node groups, nodes, events, rollouts and operations
    "cluster:get": READER,
    "cluster:create": MEMBER,
    "cluster:update": MEMBER,
    "cluster:delete": MEMBER,
    "cluster:resize": MEMBER,
    "cluster:upgrade": MEMBER,
    "cluster:rollout": MEMBER,
    "nodegroup:get": READER,
    "nodegroup:create": MEMBER,
    "nodegroup:update": MEMBER,
    "nodegroup:delete": MEMBER,
    # uploading a VM's domain XML template (any node group attributes that carry one)
    "nodegroup:vm_template": ADMIN,
    "operation:get": READER,
    "operation:create": MEMBER,
    # certificates: a signed client certificate is the cluster's admin credential
    "certificate:get": READER,
    "certificate:create": MEMBER,
    "certificate:rotate_ca": MEMBER,
    # the project's own numbers
    "stats:get": READER,
    "quota:get": READER,
    # the deployment's business
    "quota:update": ADMIN,
    "quota:delete": ADMIN,
    "quota:get_all": ADMIN,
    "mservice:get_all": ADMIN,
    "provider:get": READER,
    "provider:detail": ADMIN,
    "sim:admin": ADMIN,
    "token:admin": ADMIN,
    # machines the sweeper holds (their node groups are unknown to the database)
    "orphan:get_all": ADMIN,
    "orphan:delete": ADMIN,
    "orphan:adopt": ADMIN,
    # lists over every project (`all_tenants`)
    "all_projects": ADMIN,
}


@dataclass(frozen=True)
class Scope:
    """Which projects' resources a request reaches: its own project's; an admin's also
    another project's named by uuid; with `all_projects` (admin, `all_tenants`) every
    project's, by uuid or name, and in lists."""

    project_id: str
    admin: bool = False
    all_projects: bool = False


@dataclass(frozen=True)
class Principal:
    """Who makes a request: a project, a user in it, and the user's roles there."""

    project_id: str
    user_id: str = "admin"
    roles: frozenset[str] = field(default_factory=lambda: frozenset({ADMIN}))
    all_projects: bool = False  # asked for every project's resources (admins only)
    keystone_roles: frozenset[str] = frozenset()  # as Keystone names them (delegation)

    @property
    def role(self) -> str:
        """The highest of our roles the user holds ("" for none)."""
        held = [r for r in ROLES if r in self.roles]
        return held[-1] if held else ""

    def has(self, role: str) -> bool:
        """Holds `role` or a role that includes it."""
        mine = self.role
        return bool(mine) and ROLES.index(mine) >= ROLES.index(role)

    @property
    def is_admin(self) -> bool:
        return self.has(ADMIN)

    @property
    def scope(self) -> Scope:
        return Scope(self.project_id, self.is_admin, self.is_admin and self.all_projects)


def roles_of(names: object) -> frozenset[str]:
    """Our roles among `names` (Keystone's role names, or a token's one role)."""
    if not isinstance(names, list | tuple | set | frozenset):
        return frozenset()
    out = {ROLE_ALIASES.get(str(n).lower(), str(n).lower()) for n in names}
    return frozenset(out & set(ROLES))


def allowed(principal: Principal, rule: str) -> bool:
    """Whether `principal` may do what `rule` names (KeyError: no such rule)."""
    return principal.has(RULES[rule])


def enforce(principal: Principal, rule: str) -> None:
    """Forbidden, naming the rule and the role it needs, unless `allowed`."""
    if not allowed(principal, rule):
        need = RULES[rule]
        have = principal.role or "no role of shoal's"
        raise Forbidden(
            f"Policy doesn't allow {rule} to be performed: it needs the {need} role in "
            f"project {principal.project_id} (the token has {have})"
        )
    if principal.all_projects and not allowed(principal, "all_projects"):
        raise Forbidden("Policy doesn't allow all_projects: listing every project needs admin")
