"""Multi-user (issue 32): users with hashed passwords, their API tokens and the UI's login sessions.

Only hashes are kept: a password's argon2 hash, a token's and a session cookie's SHA-256 digest (both
are 256-bit random values, so a fast digest is enough to make a stolen database useless to log in with).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "user_tokens",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user", sa.String(253), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_user_tokens_user", "user_tokens", ["user"])
    op.create_table(
        "login_sessions",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("user", sa.String(253), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_login_sessions_user", "login_sessions", ["user"])


def downgrade() -> None:
    op.drop_table("login_sessions")
    op.drop_table("user_tokens")
    op.drop_table("users")
