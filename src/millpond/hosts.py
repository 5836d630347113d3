"""Host names in requests: what a ``Host`` header or an ``Origin`` names, and whether it is this machine.

Every HTTP listener millpond opens on loopback (the API server, an InferenceService's own port)
must refuse what a web page in the user's own browser could send it: a request whose ``Host``
is another name (DNS rebinding: ``evil.example`` resolved to 127.0.0.1, so the page reads the
answers) or whose ``Origin`` is another site. The parsing is shared here, below every layer.

An origin is a scheme, a host and a port (RFC 6454): ``https://127.0.0.1:8888`` is not the
origin of a plain-HTTP server on ``127.0.0.1:8888``, so every comparison takes all three, with
the scheme's default port where a URL or a ``Host`` names none.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_of(value: str) -> str:
    """The host name of a ``Host`` header or a URL's netloc, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:  # name:port; a bare IPv6 address has several colons
        return value.split(":", 1)[0]
    return value.rstrip(".")


def port_of(netloc: str, scheme: str) -> int | None:
    """The port a ``Host`` header or a URL's netloc names, else ``scheme``'s default; None when it is no port."""
    value = netloc.strip()
    tail = value[value.find("]") + 1:] if value.startswith("[") else value
    if tail.count(":") != 1:  # no port (or a bare IPv6 address, which has several colons)
        return DEFAULT_PORTS.get(scheme)
    digits = tail.rsplit(":", 1)[1]
    if not digits:
        return DEFAULT_PORTS.get(scheme)
    return int(digits) if digits.isascii() and digits.isdigit() and int(digits) <= 65535 else None


def origin_of(url: str) -> tuple[str, str, int] | None:
    """The (scheme, host, port) of an ``Origin`` header; None when it names no http(s) origin (``null`` included)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.netloc or parts.path or parts.query or "@" in parts.netloc:
        return None
    port = port_of(parts.netloc, scheme)
    name = host_of(parts.netloc)
    return (scheme, name, port) if port is not None and name else None


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether ``Origin`` names the origin a request reached: ``scheme`` (what the listener serves,
    ``http`` or ``https``) and the ``Host`` it was sent to, port included."""
    port = port_of(host, scheme)
    return port is not None and origin_of(origin) == (scheme.lower(), host_of(host), port)


def loopback_only_problem(host: str | None, origin: str | None, scheme: str = "http") -> str | None:
    """Why a request to a loopback-only listener serving ``scheme`` must be refused (another ``Host``,
    an ``Origin`` of another site, scheme or port), or None. A client without ``Host`` (HTTP/1.0) is
    not a browser: it passes. Any loopback name of the same scheme and port is this listener."""
    if host is not None and host_of(host) not in LOOPBACK_HOSTS:
        return f"Host {host_of(host)!r} is not this machine (only {', '.join(LOOPBACK_HOSTS)} are answered)"
    if origin is None:
        return None
    if origin == "null":
        return "cross-site request refused: an opaque Origin"
    parsed = origin_of(origin)
    if parsed is None or parsed[1] not in LOOPBACK_HOSTS:
        return "cross-site request refused: the Origin is not this machine"
    if parsed[0] != scheme or (host is not None and parsed[2] != port_of(host, scheme)):
        return f"cross-origin request refused: Origin {origin!r} is another scheme or port than this listener's"
    return None
