"""Host names in requests: what a ``Host`` header or an ``Origin`` names, and whether it is this machine.

Every HTTP listener millpond opens on loopback (the API server, an InferenceService's own port)
must refuse what a web page in the user's own browser could send it: a request whose ``Host``
is another name (DNS rebinding: ``evil.example`` resolved to 127.0.0.1, so the page reads the
answers) or whose ``Origin`` is another site. The parsing is shared here, below every layer.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def host_of(value: str) -> str:
    """The host name of a ``Host`` header or a URL's netloc, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:  # name:port; a bare IPv6 address has several colons
        return value.split(":", 1)[0]
    return value.rstrip(".")


def loopback_only_problem(host: str | None, origin: str | None) -> str | None:
    """Why a request to a loopback-only listener must be refused (another ``Host``, another site's
    ``Origin``), or None. A client without ``Host`` (HTTP/1.0) is not a browser: it passes."""
    if host is not None and host_of(host) not in LOOPBACK_HOSTS:
        return f"Host {host_of(host)!r} is not this machine (only {', '.join(LOOPBACK_HOSTS)} are answered)"
    if origin is not None and origin != "null":
        name = host_of(urlsplit(origin).netloc) if "://" in origin else ""
        if name not in LOOPBACK_HOSTS:
            return "cross-site request refused: the Origin is not this machine"
    elif origin == "null":
        return "cross-site request refused: an opaque Origin"
    return None
