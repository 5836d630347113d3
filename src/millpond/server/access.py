"""How the server knows who calls: single-user (today's), or multi-user with three ways in.

- **Single-user** (the default): no identity is checked. With a server token every request but the
  UI's page must carry it (``security``); the caller's name is what ``kubeflow-userid`` says, else
  ``anonymous`` (cooperative, as before). Nothing is refused for who asks.
- **Multi-user** (``millpond server --multi-user``): nothing but the login page, the UI's static files and
  KFP's ``healthz`` is reachable without an identity, established by one of:

  1. ``Authorization: Bearer TOKEN``: a user's API token (``millpond user token create``; what
     ``kfp.Client(existing_token=...)``, ``kubectl`` and the ``kubernetes`` client send), or the
     server's own token, which is the administrator (``system:masters``);
  2. the UI's login session cookie (``millpond_session``: HttpOnly, SameSite=Strict, Secure over
     HTTPS; ``POST /ui-api/login``, ``POST /ui-api/logout``);
  3. an authenticating proxy in front (oauth2-proxy, Dex, Istio) that sets ``kubeflow-userid``
     (KFP's ``KUBEFLOW_USERID_HEADER``, its prefix ``KUBEFLOW_USERID_PREFIX`` dropped): trusted only
     from the addresses given with ``--trusted-proxy``; sent by anyone else it is refused (403), never
     read.

A bearer token that is wrong, expired or revoked is refused (401), never ignored for a weaker way in.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING

from millpond.access.credentials import Credentials, same_secret
from millpond.access.identity import ADMIN, ANONYMOUS, Identity, user
from millpond.access.throttle import LoginThrottle
from millpond.errors import UserError

if TYPE_CHECKING:
    from millpond.settings import Settings

USERID_HEADER = "kubeflow-userid"  # KFP's KUBEFLOW_USERID_HEADER default
USERID_PREFIX = "accounts.google.com:"  # KFP's KUBEFLOW_USERID_PREFIX default
SESSION_COOKIE = "millpond_session"
ANONYMOUS_NAME = "anonymous"  # single-user: the name of a caller that says none (KFP's)
_MAX_NAME = 253

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(values: tuple[str, ...] | list[str]) -> tuple[Network, ...]:
    """``--trusted-proxy`` values: addresses or CIDR networks; UserError names a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip().strip("[]"), strict=False))
        except ValueError:
            raise UserError(f"--trusted-proxy {value!r}: expected an IP address or a network (10.0.0.0/8)") from None
    return tuple(networks)


@dataclass(frozen=True)
class AccessSettings:
    """How this server authenticates (see the module's docstring)."""

    multi_user: bool = False
    token: str | None = None
    trusted_proxies: tuple[Network, ...] = ()
    userid_header: str = USERID_HEADER
    userid_prefix: str = USERID_PREFIX


@dataclass(frozen=True)
class Refusal:
    status: int  # 401 or 403
    message: str


def header_name(value: str, prefix: str) -> str | None:
    """A user name from an identity header: the prefix dropped, one printable line of at most 253
    characters; None when there is none."""
    name = value.strip().removeprefix(prefix).strip()
    if not name or len(name) > _MAX_NAME or not name.isprintable():
        return None
    return name


class Authenticator:
    """Who a request comes from, or why it is refused (``identify``)."""

    def __init__(self, settings: Settings, access: AccessSettings) -> None:
        self.access = access
        self.credentials = Credentials(settings) if access.multi_user else None
        self.login_throttle = LoginThrottle()  # this server's failed logins (two servers in one process share none)

    def identify(self, headers: dict[str, str], client: str | None, public: bool) -> Identity | Refusal:
        """The identity of a request with ``headers`` (lower-case names) from ``client`` (its address);
        ``public``: the path needs no identity (the UI's page and files, the login routes)."""
        access = self.access
        authorization = headers.get("authorization", "")
        scheme, _, given = authorization.strip().partition(" ")
        bearer = given.strip(" ") if scheme.lower() == "bearer" else None
        if not access.multi_user:
            return self._single_user(headers, bearer, public)
        proxied = headers.get(access.userid_header.lower())
        if proxied is not None and not self._trusted(client):
            return Refusal(403, f"the {access.userid_header} header is trusted only from the proxy addresses this "
                                f"server was given (--trusted-proxy); {client or 'this client'} is not one")
        if bearer is not None:
            if access.token and same_secret(bearer, access.token):
                return ADMIN
            assert self.credentials is not None
            found = self.credentials.token_identity(bearer)
            if found is None:
                return Refusal(401, "invalid, expired or revoked token")
            return found
        if proxied is not None:
            name = header_name(proxied, access.userid_prefix)
            if name is None:
                return Refusal(401, f"the {access.userid_header} header names no user")
            return user(name, "proxy")
        cookie = session_cookie(headers.get("cookie", ""))
        if cookie:
            assert self.credentials is not None
            found = self.credentials.session_identity(cookie)
            if found is not None:
                return found
        if public:
            return ANONYMOUS
        return Refusal(401, "authentication required: log in at / or send 'Authorization: Bearer TOKEN' "
                            "(millpond user token create)")

    def _single_user(self, headers: dict[str, str], bearer: str | None, public: bool) -> Identity | Refusal:
        token = self.access.token
        if token is not None and not public and not (bearer is not None and same_secret(bearer, token)):
            return Refusal(401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")
        name = header_name(headers.get(USERID_HEADER, ""), USERID_PREFIX) or ANONYMOUS_NAME
        return user(name, "header")

    def _trusted(self, client: str | None) -> bool:
        if not client:
            return False
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self.access.trusted_proxies)


def session_cookie(header: str) -> str:
    """The login session's cookie value in a ``Cookie`` header, or ""."""
    if SESSION_COOKIE not in header:
        return ""
    try:
        jar: SimpleCookie = SimpleCookie()
        jar.load(header)
    except Exception:  # noqa: BLE001 - a malformed Cookie header carries no session
        return ""
    morsel = jar.get(SESSION_COOKIE)
    return morsel.value if morsel is not None else ""
