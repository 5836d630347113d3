"""Who calls the API, as the request guard established it (``server.access``), and what they may do.

``identity_of`` is the caller's :class:`~millpond.access.identity.Identity`; ``caller`` its name, which
runs' tasks, jobs and Kueue workloads record as their user. In single-user mode that name is what the
``kubeflow-userid`` header says (``anonymous`` without one), cooperative as it always was; in multi-user
mode it is the authenticated user. ``require`` asks the server's one :class:`Authorizer` and raises
``ForbiddenError`` (403) with Kubernetes' words when the answer is no.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import Identity, user
from millpond.server.access import ANONYMOUS_NAME, USERID_HEADER, USERID_PREFIX, header_name


def identity_of(connection: HTTPConnection) -> Identity:
    """The caller (set by the request guard; a connection that never passed it: the header's name)."""
    found = connection.scope.get("state", {}).get("identity")
    if isinstance(found, Identity):
        return found
    return user(header_name(connection.headers.get(USERID_HEADER, ""), USERID_PREFIX) or ANONYMOUS_NAME, "header")


def caller(connection: HTTPConnection) -> str:
    """The caller's name: one printable line of at most 253 characters, or ``anonymous``."""
    return identity_of(connection).name


def authorizer_of(connection: HTTPConnection) -> Authorizer:
    """The server's one authorization decision (``app.state.authorizer``)."""
    authorizer: Authorizer = connection.app.state.authorizer
    return authorizer


def require(connection: HTTPConnection, asked: Attributes) -> None:
    """Nothing when the caller may do what ``asked`` says; ForbiddenError (403) otherwise."""
    authorizer_of(connection).check(identity_of(connection), asked)
