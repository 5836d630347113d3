"""Passwords, API tokens and login sessions: made, checked and kept as hashes only.

- Passwords are hashed with argon2id (``argon2-cffi``, the Password Hashing Competition's winner, with
  its library defaults); a hash made with older parameters is replaced at the next good login.
- API tokens (``mpt_`` + 256 random bits) and session cookies (256 random bits) are shown once and kept as
  their SHA-256 digest: a copy of the database logs nobody in, and a 256-bit secret needs no slow hash.
- Checking a password costs the same for an unknown user as for a wrong password (a dummy hash is
  verified), and both answer the same ``None``: nobody learns which names exist.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from millpond.access.identity import Identity, user
from millpond.errors import UserError
from millpond.store.identities import TOKEN_PREFIX, IdentityStore, TokenRecord, digest

if TYPE_CHECKING:
    from argon2 import PasswordHasher

    from millpond.settings import Settings

MIN_PASSWORD = 8
MAX_PASSWORD = 1024
DEFAULT_TOKEN_LIFETIME = dt.timedelta(days=90)
DEFAULT_SESSION_LIFETIME = dt.timedelta(hours=12)
RESERVED_PREFIX = "system:"


def check_user_name(name: str, where: str = "user") -> str:
    """A user name as Kubeflow's are (an e-mail or a plain name): printable, no spaces, at most 253
    characters, not ``system:…`` (Kubernetes' own identities)."""
    if not name or len(name) > 253 or not name.isprintable() or any(char.isspace() for char in name):
        raise UserError(f"{where} {name!r}: a user name is 1-253 printable characters without spaces")
    if name.startswith(RESERVED_PREFIX):
        raise UserError(f"{where} {name!r}: names starting with {RESERVED_PREFIX!r} are Kubernetes' own")
    if name.startswith("-"):
        raise UserError(f"{where} {name!r}: a user name cannot start with '-'")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise UserError(f"the password is too short: at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise UserError(f"the password is too long: at most {MAX_PASSWORD} characters")
    return password


@dataclass(frozen=True)
class IssuedToken:
    """A token just made: ``secret`` is shown once, ``record`` is what is kept."""

    secret: str
    record: TokenRecord


class Credentials:
    """The users of one home and what proves who they are."""

    def __init__(self, settings: Settings) -> None:
        self.store = IdentityStore(settings)

    @cached_property
    def _hasher(self) -> PasswordHasher:
        from argon2 import PasswordHasher  # noqa: PLC0415 - only where passwords are checked

        return PasswordHasher()

    @cached_property
    def _dummy_hash(self) -> str:
        return self._hasher.hash(secrets.token_hex(16))

    def add_user(self, name: str, password: str) -> None:
        check_user_name(name)
        self.store.add_user(name, self._hasher.hash(check_password(password)))

    def set_password(self, name: str, password: str) -> None:
        self.store.set_password(name, self._hasher.hash(check_password(password)))

    def check_password(self, name: str, password: str) -> Identity | None:
        """The user ``name`` when ``password`` is theirs; None otherwise (unknown user or wrong password,
        at the same cost)."""
        from argon2.exceptions import InvalidHashError, VerificationError  # noqa: PLC0415

        dummy = self._dummy_hash  # made at the first check of any name, so no first unknown name costs more
        found = self.store.user(name) if name and len(name) <= 253 else None
        try:
            self._hasher.verify(found.password_hash if found else dummy, password[:MAX_PASSWORD])
        except (VerificationError, InvalidHashError):
            return None
        if found is None:
            return None
        if self._hasher.check_needs_rehash(found.password_hash):
            self.store.set_password(name, self._hasher.hash(password))
        return user(found.name, "password")

    def issue_token(self, name: str, description: str = "", lifetime: dt.timedelta = DEFAULT_TOKEN_LIFETIME
                    ) -> IssuedToken:
        if lifetime <= dt.timedelta(0):
            raise UserError("a token's lifetime must be positive")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires = dt.datetime.now(dt.timezone.utc) + lifetime
        return IssuedToken(secret, self.store.add_token(name, digest(secret), description, expires))

    def token_identity(self, secret: str) -> Identity | None:
        """The user a token is theirs, while it has not expired or been revoked; else None."""
        if not secret.startswith(TOKEN_PREFIX) or len(secret) > 128:
            return None
        found = self.store.token_by_digest(digest(secret))
        if found is None or found.expires_at <= dt.datetime.now(dt.timezone.utc):
            return None
        return user(found.user, "token")

    def start_session(self, name: str, lifetime: dt.timedelta = DEFAULT_SESSION_LIFETIME) -> str:
        """A new login session's cookie value (kept only as its digest)."""
        cookie = secrets.token_urlsafe(32)
        self.store.add_session(name, digest(cookie), dt.datetime.now(dt.timezone.utc) + lifetime)
        return cookie

    def session_identity(self, cookie: str) -> Identity | None:
        if not cookie or len(cookie) > 128:
            return None
        found = self.store.session_user(digest(cookie))
        if found is None or found[1] <= dt.datetime.now(dt.timezone.utc):
            return None
        return user(found[0], "session")

    def end_session(self, cookie: str) -> None:
        if cookie and len(cookie) <= 128:
            self.store.end_session(digest(cookie))


def same_secret(given: str, expected: str) -> bool:
    """Whether two secrets are equal, compared in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))
