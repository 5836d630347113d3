"""A RayJob's runtime environment, checked before it is submitted: what cannot be fetched fails the job now.

Ray downloads a remote ``working_dir`` or ``py_modules`` package (``https://…zip``, ``s3://``, ``gs://``)
on the head when the job starts, and retries for as long as its runtime-env setup timeout; on a
machine that cannot reach the address the job would sit PENDING that long. So each remote URI is
asked for first (a HEAD, ``PROBE_TIMEOUT_S``): one that does not answer fails the job at once,
with the reason. A URI scheme Ray reads only with a cloud SDK this machine lacks (``gs://``,
``s3://`` without credentials) is left to Ray, bounded by ``setup_timeout_seconds``, which is set
(``SETUP_TIMEOUT_S``) where the job gives none, so a pip install that cannot reach its index fails
the job too rather than leaving it pending.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

PROBE_TIMEOUT_S = 10.0
SETUP_TIMEOUT_S = 300  # Ray's default is 600 s


def remote_uris(env: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, URI) of every http(s) package the runtime env names."""
    found = []
    working_dir = env.get("working_dir")
    if isinstance(working_dir, str):
        found.append(("working_dir", working_dir))
    for module in env.get("py_modules") or ():
        if isinstance(module, str):
            found.append(("py_modules", module))
    return [(key, uri) for key, uri in found if uri.startswith(("http://", "https://"))]


def unreachable(env: dict[str, Any], timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why one of the runtime env's remote packages cannot be fetched from this machine, or None."""
    for key, uri in remote_uris(env):
        request = urllib.request.Request(uri, method="HEAD")  # noqa: S310 - http(s) only (remote_uris)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s):  # noqa: S310 - http(s) only
                pass
        except urllib.error.HTTPError as exc:
            if exc.code >= 400 and exc.code != 405:  # a server that refuses HEAD may still serve GET
                return f"runtimeEnvYAML {key} {uri}: the server answered {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"runtimeEnvYAML {key} {uri} cannot be fetched from this machine: {reason}"
    return None


def with_setup_timeout(env: dict[str, Any]) -> dict[str, Any]:
    """The runtime env with Ray's setup timeout bounded (``config.setup_timeout_seconds``) unless it sets one."""
    config = dict(env.get("config") or {})
    config.setdefault("setup_timeout_seconds", SETUP_TIMEOUT_S)
    return {**env, "config": config}
