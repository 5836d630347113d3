"""The web UI's login: ``POST /ui-api/login``, ``POST /ui-api/logout``, ``GET /ui-api/whoami``.

A login sets the session cookie (HttpOnly: no script reads it; SameSite=Strict: no other site's page
sends it; Secure over HTTPS; it expires with the session). Cross-site requests are refused before this
(``security``: a state-changing request must come from this origin with a JSON body), so a login or
logout cannot be forged from another page. A wrong password and an unknown user get the same answer;
repeated failures are throttled (``access.throttle``: 429 with ``Retry-After``).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from millpond.access.credentials import DEFAULT_SESSION_LIFETIME, Credentials
from millpond.server.access import SESSION_COOKIE, session_cookie
from millpond.server.callers import authorizer_of, identity_of
from millpond.server.errors import ApiError, error_response

router = APIRouter()


class LoginBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str
    password: str


def _credentials(request: Request) -> Credentials:
    """The server's one ``Credentials`` (the authenticator's): its password hasher and the dummy hash an unknown
    user is checked against are made once, so an unknown name costs what a wrong password costs."""
    credentials: Credentials | None = request.app.state.authenticator.credentials
    if credentials is None:
        raise ApiError(404, "this server is single-user: there is nothing to log in to (start it with --multi-user)")
    return credentials


@router.post("/ui-api/login")
def login(body: LoginBody, request: Request) -> Response:
    credentials = _credentials(request)
    client = request.client.host if request.client else ""
    keys = (f"user:{body.username}", f"address:{client}")
    throttle = request.app.state.authenticator.login_throttle
    wait = throttle.wait(*keys)
    if wait > 0:
        refused = error_response(429, f"too many failed logins: try again in {math.ceil(wait)} s")
        refused.headers["Retry-After"] = str(math.ceil(wait))
        return refused
    found = credentials.check_password(body.username, body.password)
    if found is None:
        throttle.failed(*keys)
        return error_response(401, "invalid username or password")
    throttle.succeeded(*keys)
    cookie = credentials.start_session(found.name)
    response = JSONResponse({"user": found.name})
    response.set_cookie(SESSION_COOKIE, cookie, max_age=int(DEFAULT_SESSION_LIFETIME.total_seconds()),
                        httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/")
    return response


@router.post("/ui-api/logout")
def logout(request: Request) -> Response:
    credentials = _credentials(request)
    credentials.end_session(session_cookie(request.headers.get("cookie", "")))
    response = Response(status_code=200, media_type="application/json", content="{}")
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
    return response


@router.get("/ui-api/whoami")
def whoami(request: Request) -> dict[str, Any]:
    """Who the UI is logged in as, and the namespaces it may pick (None: every one)."""
    identity = identity_of(request)
    authorizer = authorizer_of(request)
    namespaces = authorizer.namespaces(identity)
    return {"multi_user": authorizer.multi_user, "user": identity.name if identity.authenticated else None,
            "via": identity.via, "admin": namespaces is None and authorizer.multi_user and identity.authenticated,
            "namespaces": sorted(namespaces) if namespaces is not None else None}

