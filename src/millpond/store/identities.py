"""Users, their API tokens and login sessions, as rows: names, hashes, digests and expiries, never secrets.

The hashing is ``access.credentials``' (argon2 for passwords, SHA-256 for tokens and session cookies);
this module only keeps what it is given and finds rows by digest. Deleting a user deletes its tokens and
sessions in the same transaction (SQLite enforces foreign keys only when asked, so it is done here).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from millpond.errors import ConflictError, NotFoundError
from millpond.store.db import session_factory
from millpond.store.keys import new_id, utcnow

if TYPE_CHECKING:
    from millpond.settings import Settings

TOKEN_PREFIX = "mpt_"  # an API token: this prefix and 256 random bits (access.credentials makes and checks them)
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"  # a ServiceAccount's identity (notebooks.service_account)


def digest(secret: str) -> str:
    """The SHA-256 digest (hex) a token or session cookie is kept and found by."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class UserRecord:
    name: str
    password_hash: str
    created_at: dt.datetime


@dataclass(frozen=True)
class TokenRecord:
    id: str
    user: str
    description: str
    created_at: dt.datetime
    expires_at: dt.datetime


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


class IdentityStore:
    """The users, tokens and sessions of one millpond home."""

    def __init__(self, settings: Settings) -> None:
        self._sessions = session_factory(settings.database_url)

    # users
    def add_user(self, name: str, password_hash: str) -> UserRecord:
        from millpond.store.models import UserRow  # noqa: PLC0415 - SQLAlchemy on first use

        with self._sessions.begin() as session:
            if session.get(UserRow, name) is not None:
                raise ConflictError(f"user {name!r} already exists")
            row = UserRow(name=name, password_hash=password_hash, created_at=utcnow())
            session.add(row)
            return UserRecord(name, password_hash, _aware(row.created_at))

    def user(self, name: str) -> UserRecord | None:
        from millpond.store.models import UserRow  # noqa: PLC0415

        with self._sessions() as session:
            row = session.get(UserRow, name)
            return UserRecord(row.name, row.password_hash, _aware(row.created_at)) if row else None

    def users(self) -> list[UserRecord]:
        from sqlalchemy import select  # noqa: PLC0415

        from millpond.store.models import UserRow  # noqa: PLC0415

        with self._sessions() as session:  # people only: a ServiceAccount's row holds its tokens, it is no user
            rows = session.scalars(select(UserRow).where(~UserRow.name.startswith(SERVICE_ACCOUNT_PREFIX))
                                   .order_by(UserRow.name)).all()
            return [UserRecord(row.name, row.password_hash, _aware(row.created_at)) for row in rows]

    def set_password(self, name: str, password_hash: str) -> None:
        """A new password hash; every login session of the user ends (its tokens stay)."""
        from sqlalchemy import delete  # noqa: PLC0415

        from millpond.store.models import LoginSessionRow, UserRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            row = session.get(UserRow, name)
            if row is None:
                raise NotFoundError(f"user {name!r} not found")
            row.password_hash = password_hash
            session.execute(delete(LoginSessionRow).where(LoginSessionRow.user == name))

    def delete_user(self, name: str) -> None:
        from sqlalchemy import delete  # noqa: PLC0415

        from millpond.store.models import LoginSessionRow, UserRow, UserTokenRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            row = session.get(UserRow, name)
            if row is None:
                raise NotFoundError(f"user {name!r} not found")
            session.execute(delete(UserTokenRow).where(UserTokenRow.user == name))
            session.execute(delete(LoginSessionRow).where(LoginSessionRow.user == name))
            session.delete(row)

    # tokens
    def add_token(self, user: str, digest: str, description: str, expires_at: dt.datetime) -> TokenRecord:
        from millpond.store.models import UserRow, UserTokenRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            if session.get(UserRow, user) is None:
                raise NotFoundError(f"user {user!r} not found")
            row = UserTokenRow(id=new_id(), user=user, digest=digest, description=description,
                               created_at=utcnow(), expires_at=expires_at)
            session.add(row)
            return TokenRecord(row.id, user, description, _aware(row.created_at), _aware(expires_at))

    def tokens(self, user: str | None = None) -> list[TokenRecord]:
        from sqlalchemy import select  # noqa: PLC0415

        from millpond.store.models import UserTokenRow  # noqa: PLC0415

        query = select(UserTokenRow).order_by(UserTokenRow.user, UserTokenRow.created_at)
        if user is not None:
            query = query.where(UserTokenRow.user == user)
        with self._sessions() as session:
            return [TokenRecord(row.id, row.user, row.description, _aware(row.created_at), _aware(row.expires_at))
                    for row in session.scalars(query).all()]

    def token_by_digest(self, digest: str) -> TokenRecord | None:
        from sqlalchemy import select  # noqa: PLC0415

        from millpond.store.models import UserTokenRow  # noqa: PLC0415

        with self._sessions() as session:
            row = session.scalars(select(UserTokenRow).where(UserTokenRow.digest == digest)).first()
            if row is None:
                return None
            return TokenRecord(row.id, row.user, row.description, _aware(row.created_at), _aware(row.expires_at))

    def revoke_token(self, token_id: str, user: str | None = None) -> TokenRecord:
        """Delete a token by its id (of ``user`` when given); NotFoundError when there is none."""
        from millpond.store.models import UserTokenRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            row = session.get(UserTokenRow, token_id)
            if row is None or (user is not None and row.user != user):
                raise NotFoundError(f"token {token_id!r} not found" + (f" for user {user!r}" if user else ""))
            record = TokenRecord(row.id, row.user, row.description, _aware(row.created_at), _aware(row.expires_at))
            session.delete(row)
            return record

    # login sessions
    def add_session(self, user: str, digest: str, expires_at: dt.datetime) -> None:
        from sqlalchemy import delete  # noqa: PLC0415

        from millpond.store.models import LoginSessionRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            session.execute(delete(LoginSessionRow).where(LoginSessionRow.expires_at < utcnow()))
            session.add(LoginSessionRow(digest=digest, user=user, created_at=utcnow(), expires_at=expires_at))

    def session_user(self, digest: str) -> tuple[str, dt.datetime] | None:
        """The user and expiry of the session whose cookie has ``digest``, or None."""
        from millpond.store.models import LoginSessionRow  # noqa: PLC0415

        with self._sessions() as session:
            row = session.get(LoginSessionRow, digest)
            return (row.user, _aware(row.expires_at)) if row else None

    def end_session(self, digest: str) -> None:
        from sqlalchemy import delete  # noqa: PLC0415

        from millpond.store.models import LoginSessionRow  # noqa: PLC0415

        with self._sessions.begin() as session:
            session.execute(delete(LoginSessionRow).where(LoginSessionRow.digest == digest))
