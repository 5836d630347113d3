"""A multi-user ``millpond server`` for the profile tests: uvicorn in a thread on a free loopback port over the
current MILLPOND_HOME, the server token being the administrator, and users with API tokens of their own."""

from __future__ import annotations

from typing import Any

from millpond.access.credentials import Credentials
from millpond.server.access import AccessSettings
from millpond.settings import load_settings
from tests.server_support import Served, call

ADMIN_TOKEN = "admin-s3cret"  # the server's own token: system:masters


class MultiUserServer(Served):
    """``millpond server --multi-user`` in this process (``stop`` ends it and the runs it started)."""

    def __init__(self) -> None:
        super().__init__(access=AccessSettings(multi_user=True, token=ADMIN_TOKEN))

    def call(self, method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
        """(status, the JSON answer, or the text when it is none)."""
        return call(self.url, method, path, token, body, timeout=30)


def user_token(name: str) -> str:
    """A user with a password nobody uses, and an API token of theirs (its secret)."""
    credentials = Credentials(load_settings())
    credentials.add_user(name, "correct horse battery staple")
    return credentials.issue_token(name).secret
