"""A multi-user notebook's credential: a token that acts as its namespace's ``default-editor`` ServiceAccount.

In Kubeflow a notebook pod runs as ``default-editor``, which the profile controller binds to ``kubeflow-edit``
in the profile's namespace (``core.profile_controller``); the kubelet gives the pod a token of that
ServiceAccount. Here the supervisor issues, at each start, an API token (``mpt_``, as ``millpond user token
create`` makes them: kept only as its SHA-256 digest, ``store.identities``) whose identity is
``system:serviceaccount:NS:default-editor`` — the name RBAC's ``ServiceAccount`` subjects match
(``access.rbac``) — so the notebook's code may do what the namespace's editors may, in that namespace
only, and nothing in another (403). The token goes to a 0600 file of the notebook's own folder
(``notebooks.defaults``); its id beside it (``token.id``), so that the token is revoked when the server
stops for good and when the Notebook is deleted (``revoke``), as a bound ServiceAccount token dies with
its pod.

The identity needs a row to hang its tokens on: ``store.identities`` keeps one per ServiceAccount, with
no password (none verifies), and lists only people. Simplified: the identity's groups are
``system:authenticated`` alone (Kubernetes adds ``system:serviceaccounts`` and
``system:serviceaccounts:NS``); the token lives as long as the server it was issued for (a day at most,
``LIFETIME``), not an hour refreshed by the kubelet.
"""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path

from millpond.errors import ConflictError, NotFoundError
from millpond.notebooks import paths
from millpond.settings import Settings
from millpond.store.identities import SERVICE_ACCOUNT_PREFIX, TOKEN_PREFIX, IdentityStore, digest

ACCOUNT = "default-editor"  # core.profile_controller.DEFAULT_EDITOR, the ServiceAccount a notebook runs as
LIFETIME = dt.timedelta(days=1)
NO_PASSWORD = "!"  # no argon2 hash: every password check of the row fails


def identity(namespace: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{ACCOUNT}"


def _id_file(settings: Settings, uid: str) -> Path:
    return paths.folder(settings, uid) / "serviceaccount" / "token.id"


def issue(settings: Settings, namespace: str, name: str, uid: str) -> str:
    """A new token for the notebook (the one issued before it is revoked); its id recorded beside it."""
    revoke(settings, uid)
    store = IdentityStore(settings)
    account = identity(namespace)
    if store.user(account) is None:
        try:
            store.add_user(account, NO_PASSWORD)
        except ConflictError:
            pass  # made meanwhile by another notebook's supervisor
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = store.add_token(account, digest(secret), f"Notebook {namespace}/{name}",
                             dt.datetime.now(dt.timezone.utc) + LIFETIME)
    path = _id_file(settings, uid)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(record.id)
    return secret


def revoke(settings: Settings, uid: str) -> None:
    """Revoke the notebook's token, if it has one (its id file goes with it)."""
    path = _id_file(settings, uid)
    try:
        token_id = path.read_text().strip()
    except OSError:
        return
    if token_id:
        try:
            IdentityStore(settings).revoke_token(token_id)
        except NotFoundError:
            pass  # revoked already
    path.unlink(missing_ok=True)
