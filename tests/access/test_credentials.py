"""Users, tokens and login sessions: kept hashed, expiring, revocable; the same answer for unknown and wrong."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from millpond.access.credentials import Credentials, digest
from millpond.access.throttle import FREE_FAILURES, LoginThrottle
from millpond.errors import ConflictError, NotFoundError, UserError
from millpond.settings import load_settings


@pytest.fixture
def credentials(home: Path) -> Credentials:
    return Credentials(load_settings())


def _database_text(home: Path) -> str:
    with sqlite3.connect(home / "millpond.db") as db:
        rows = [*db.execute("select * from users"), *db.execute("select * from user_tokens"),
                *db.execute("select * from login_sessions")]
    return repr(rows)


def test_passwords_tokens_and_sessions_are_kept_only_as_hashes(credentials: Credentials, home: Path) -> None:
    credentials.add_user("alice@example.org", "correct horse")
    issued = credentials.issue_token("alice@example.org", "ci")
    cookie = credentials.start_session("alice@example.org")
    kept = _database_text(home)
    assert "correct horse" not in kept and issued.secret not in kept and cookie not in kept
    assert "$argon2id$" in kept and digest(issued.secret) in kept
    found = credentials.check_password("alice@example.org", "correct horse")
    assert found is not None and found.name == "alice@example.org" and found.authenticated
    assert credentials.token_identity(issued.secret) == credentials.token_identity(issued.secret)
    assert credentials.session_identity(cookie) is not None


def test_unknown_user_and_wrong_password_answer_alike(credentials: Credentials) -> None:
    credentials.add_user("alice", "correct horse")
    assert credentials.check_password("alice", "wrong horse") is None
    assert credentials.check_password("nobody", "correct horse") is None
    assert credentials.check_password("", "") is None
    assert credentials.check_password("x" * 10_000, "y" * 10_000) is None


def test_a_token_stops_working_when_revoked_or_expired(credentials: Credentials) -> None:
    credentials.add_user("bob", "password1")
    kept = credentials.issue_token("bob")
    brief = credentials.issue_token("bob", lifetime=dt.timedelta(microseconds=1))
    assert credentials.token_identity(kept.secret) is not None
    assert credentials.token_identity(brief.secret) is None  # expired at once
    credentials.store.revoke_token(kept.record.id)
    assert credentials.token_identity(kept.secret) is None
    assert credentials.token_identity("mpt_" + "A" * 43) is None
    assert credentials.token_identity("not-a-token") is None
    with pytest.raises(NotFoundError):
        credentials.store.revoke_token(kept.record.id)


def test_a_new_password_ends_sessions_and_deleting_a_user_ends_everything(credentials: Credentials) -> None:
    credentials.add_user("carol", "password1")
    cookie = credentials.start_session("carol")
    token = credentials.issue_token("carol")
    credentials.set_password("carol", "password2")
    assert credentials.session_identity(cookie) is None
    assert credentials.token_identity(token.secret) is not None
    assert credentials.check_password("carol", "password1") is None
    credentials.store.delete_user("carol")
    assert credentials.token_identity(token.secret) is None
    assert credentials.check_password("carol", "password2") is None


def test_bad_names_and_passwords_are_refused(credentials: Credentials) -> None:
    for name in ("", "has space", "system:admin", "-flag", "x" * 254, "tab\there"):
        with pytest.raises(UserError):
            credentials.add_user(name, "password1")
    with pytest.raises(UserError, match="too short"):
        credentials.add_user("dave", "short")
    credentials.add_user("dave", "password1")
    with pytest.raises(ConflictError):
        credentials.add_user("dave", "password2")
    with pytest.raises(NotFoundError):
        credentials.issue_token("nobody")


def test_logins_are_throttled_after_five_failures_and_freed_by_success() -> None:
    now = [0.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    for _ in range(FREE_FAILURES - 1):
        throttle.failed("user:a", "address:1")
    assert throttle.wait("user:a") == 0
    throttle.failed("user:a", "address:1")
    assert throttle.wait("user:a") == 30 and throttle.wait("address:1") == 30
    throttle.failed("user:a")
    assert throttle.wait("user:a") == 60  # doubling
    now[0] = 61
    assert throttle.wait("user:a") == 0
    throttle.succeeded("user:a")
    throttle.failed("user:a")
    assert throttle.wait("user:a") == 0
