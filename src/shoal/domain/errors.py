"""Domain errors. They say what went wrong and what to do next; the API maps
them to HTTP (api/errors.py) and the CLI prints them. No HTTP codes here."""

from __future__ import annotations


class ShoalError(Exception):
    """Base of every error a person may see. `message` is one clear sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ShoalError):
    """The named resource does not exist (or belongs to another project)."""

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"{kind} {ident} could not be found")
        self.kind = kind
        self.ident = ident


class Invalid(ShoalError):
    """Bad input: `field` names the attribute, the message names the rule."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Unsupported(Invalid):
    """A valid request this version or microversion does not support."""


class Conflict(ShoalError):
    """The request clashes with the current state (duplicate name, in progress, bounds)."""


class AmbiguousName(Conflict):
    def __init__(self, kind_plural: str) -> None:
        super().__init__(
            f"Multiple {kind_plural} exist with same name. Please use the "
            f"{kind_plural.rstrip('s')} uuid instead."
        )


class NotAuthenticated(ShoalError):
    """The request does not say who makes it, or says it wrongly (a missing or bad
    token)."""


class Forbidden(ShoalError):
    """Policy or quota refuses the request."""


class QuotaExceeded(Forbidden):
    pass


class Unavailable(ShoalError):
    """A service shoal needs to answer (Keystone) cannot be reached or refused it: not
    the caller's fault; retrying later may work."""


class SecretUnavailable(ShoalError):
    """A secret stored encrypted cannot be decrypted with this process's key: the
    operator must start shoal with the key it was encrypted with. Not the caller's
    fault, and nothing a request can fix."""
