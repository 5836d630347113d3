"""``millpond user``: the users of a multi-user server, their passwords and API tokens.

The command line acts on the home directly, as the machine's administrator (it can read the database
anyway): it needs no login. Passwords are read from a prompt (twice, hidden) or, for scripts, one line
of standard input (``--password-stdin``); never from the command line, where ``ps`` shows them. A token
is printed once, on standard output alone, and kept only as its digest.

``--admin`` binds the user to ``cluster-admin`` with a ClusterRoleBinding ``millpond-admin-NAME``, as a
Kubeflow administrator is bound; ``user delete`` removes that binding, the user's tokens and sessions
(RoleBindings naming the user in namespaces stay, as Kubernetes keeps them: remove contributors with
``millpond profile remove-contributor``).
"""

from __future__ import annotations

import datetime as dt
import re
import sys

import click

from millpond.access.builtin import CLUSTER_ADMIN, RBAC_API_VERSION, RBAC_GROUP
from millpond.access.credentials import DEFAULT_TOKEN_LIFETIME, Credentials, check_user_name
from millpond.errors import UserError
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from millpond.tables import format_table

_DAYS = re.compile(r"(\d{1,5})d")
ADMIN_BINDING = "millpond-admin-{name}"


def _password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


def admin_binding_name(user: str) -> str:
    """``millpond-admin-<name>``, the name made safe as KFAM makes e-mails safe (lower case, ``@``/``.`` → ``-``)."""
    safe = re.sub(r"[^a-z0-9-]+", "-", user.lower()).strip("-")[:200] or "user"
    return ADMIN_BINDING.format(name=safe)


def token_lifetime(text: str) -> dt.timedelta:
    """``--expires``: days (``30d``) or a Go duration (``12h``), positive."""
    found = _DAYS.fullmatch(text.strip())
    if found:
        days = int(found.group(1))
        if days == 0:
            raise UserError(f"--expires {text!r}: a token must live at least a moment")
        return dt.timedelta(days=days)
    from millpond.durations import parse_go_duration

    duration = parse_go_duration(text, "--expires")
    if duration.nanoseconds <= 0:
        raise UserError(f"--expires {text!r}: a token must live at least a moment")
    return dt.timedelta(microseconds=duration.nanoseconds // 1000)


@click.group(name="user")
def user_group() -> None:
    """Users of a multi-user server (millpond server --multi-user): add, list, passwd, delete, token."""


@user_group.command("add")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@click.option("--admin", is_flag=True, help="Make the user a cluster administrator (bound to cluster-admin).")
def user_add(name: str, password_stdin: bool, admin: bool) -> None:
    """Add the user NAME (an e-mail or a plain name) with a password."""
    check_user_name(name, "NAME")
    settings = load_settings()
    Credentials(settings).add_user(name, _password(password_stdin))
    if admin:
        ResourceStore(settings).apply([{
            "apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": {"name": admin_binding_name(name), "labels": {"app.kubernetes.io/managed-by": "millpond"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": CLUSTER_ADMIN},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": name}]}])
    click.echo(f"user {name!r} added" + (" (cluster-admin)" if admin else ""))


@user_group.command("list")
def user_list() -> None:
    """The users, whether each is a cluster administrator, and how many tokens each has."""
    settings = load_settings()
    credentials = Credentials(settings)
    tokens: dict[str, int] = {}
    for token in credentials.store.tokens():
        tokens[token.user] = tokens.get(token.user, 0) + 1
    store = ResourceStore(settings)
    rows = [[found.name, "yes" if store.get("ClusterRoleBinding", admin_binding_name(found.name)) else "no",
             str(tokens.get(found.name, 0)), found.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")]
            for found in credentials.store.users()]
    click.echo(format_table(("NAME", "ADMIN", "TOKENS", "CREATED"), rows))


@user_group.command("passwd")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the new password from the first line of standard input.")
def user_passwd(name: str, password_stdin: bool) -> None:
    """Set NAME's password (its login sessions end; its tokens stay)."""
    settings = load_settings()
    credentials = Credentials(settings)
    if credentials.store.user(name) is None:
        raise UserError(f"user {name!r} not found (millpond user list)")
    credentials.set_password(name, _password(password_stdin))
    click.echo(f"password of {name!r} changed")


@user_group.command("delete")
@click.argument("name")
def user_delete(name: str) -> None:
    """Delete the user NAME, its tokens, its login sessions and its cluster-admin binding."""
    settings = load_settings()
    Credentials(settings).store.delete_user(name)
    ResourceStore(settings).delete("ClusterRoleBinding", admin_binding_name(name))
    click.echo(f"user {name!r} deleted")


@user_group.group("token")
def token_group() -> None:
    """API tokens: create (shown once), list, revoke."""


@token_group.command("create")
@click.argument("name")
@click.option("--description", default="", help="What the token is for (shown by token list).")
@click.option("--expires", default=f"{DEFAULT_TOKEN_LIFETIME.days}d", show_default=True,
              help="Its lifetime: days (30d) or a Go duration (12h).")
def token_create(name: str, description: str, expires: str) -> None:
    """Create an API token for NAME and print it (once) on standard output."""
    lifetime = token_lifetime(expires)
    issued = Credentials(load_settings()).issue_token(name, description, lifetime)
    click.echo(f"token {issued.record.id} for {name!r} expires {issued.record.expires_at:%Y-%m-%dT%H:%M:%SZ}; "
               "it is shown only now:", err=True)
    click.echo(issued.secret)


@token_group.command("list")
@click.argument("name", required=False)
def token_list(name: str | None) -> None:
    """The tokens (of NAME, else everyone's): id, user, description, created, expires. Never the secret."""
    now = dt.datetime.now(dt.timezone.utc)
    rows = [[token.id, token.user, token.description, f"{token.created_at:%Y-%m-%dT%H:%M:%SZ}",
             f"{token.expires_at:%Y-%m-%dT%H:%M:%SZ}" + (" (expired)" if token.expires_at <= now else "")]
            for token in Credentials(load_settings()).store.tokens(name)]
    click.echo(format_table(("ID", "USER", "DESCRIPTION", "CREATED", "EXPIRES"), rows))


@token_group.command("revoke")
@click.argument("token_id")
def token_revoke(token_id: str) -> None:
    """Revoke the token TOKEN_ID (token list shows ids): it stops working at once."""
    revoked = Credentials(load_settings()).store.revoke_token(token_id)
    click.echo(f"token {revoked.id} of {revoked.user!r} revoked")
