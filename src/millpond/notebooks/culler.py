"""The culler of Kubeflow's notebook controller: idle notebooks are stopped, their last activity recorded.

Upstream (``components/notebook-controller/pkg/culler``) reads three environment variables, all in
minutes: ``ENABLE_CULLING`` (``true`` turns it on; default off), ``CULL_IDLE_TIME`` (default 1440, one
day) and ``IDLENESS_CHECK_PERIOD`` (default 1). ``millpond server`` reads the same ones, or its
``--enable-culling``, ``--cull-idle-time`` and ``--idleness-check-period`` options (which set them);
unlike upstream's integers, fractional minutes are accepted (``0.1`` is 6 s), so a test culls in seconds.

Each check, for every Notebook (``check_notebook``), as the controller's reconcile does:

1. no running server (stopped, waiting, starting): the ``notebooks.kubeflow.org/last-activity``
   annotation is removed (upstream: "notebooks with no pods should not have" it), so a notebook started
   again starts a fresh idle period instead of being culled at once;
2. no annotation yet: it is set to now (RFC3339, seconds, as Go's ``time.RFC3339``);
3. else the server's ``/api/kernels`` is read through its endpoint (the loopback port and Jupyter's token,
   as the proxy reaches it; upstream asks the notebook's Service): a kernel not ``idle`` (``busy``,
   ``starting``) makes it now; otherwise the latest ``last_activity`` of the kernels; no kernels: unchanged.
   Beyond upstream, an open terminal's ``last_activity`` (``/api/terminals``) counts too;
4. when enabled, and the annotation is older than the idle time, ``kubeflow-resource-stopped`` is set to
   now (RFC3339): the supervisor stops the server and gives back its grant, as the StatefulSet scales to 0.
   The workspace stays; removing the annotation starts the notebook again.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millpond.notebooks import objects
from millpond.notebooks.kinds import LAST_ACTIVITY_ANNOTATION, NOTEBOOK, STOP_ANNOTATION, base_url
from millpond.pods.records import parse_instant
from millpond.runners.ports import LOCAL_ADDR
from millpond.settings import Settings
from millpond.store.resources import Resource, ResourceStore

log = logging.getLogger(__name__)
ENABLE_ENV, IDLE_ENV, PERIOD_ENV = "ENABLE_CULLING", "CULL_IDLE_TIME", "IDLENESS_CHECK_PERIOD"
DEFAULT_IDLE_MIN, DEFAULT_PERIOD_MIN = 1440.0, 1.0
FETCH_TIMEOUT_S = 10.0  # upstream's HTTP client's timeout
IDLE = "idle"


@dataclass(frozen=True)
class CullingSettings:
    """The culler's three settings, in seconds."""

    enabled: bool = False
    idle_s: float = DEFAULT_IDLE_MIN * 60
    period_s: float = DEFAULT_PERIOD_MIN * 60

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CullingSettings:
        """Upstream's variables (minutes); a value that is not a positive number falls back to the default, as
        upstream's does (it logs and goes on)."""
        environ = os.environ if environ is None else environ
        return cls(enabled=environ.get(ENABLE_ENV, "false").strip().lower() == "true",
                   idle_s=_minutes(environ, IDLE_ENV, DEFAULT_IDLE_MIN) * 60,
                   period_s=_minutes(environ, PERIOD_ENV, DEFAULT_PERIOD_MIN) * 60)


def _minutes(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        log.warning("%s should be a positive number of minutes, got %r: using %g", name, text, default)
        return default
    return value


@dataclass(frozen=True)
class Activity:
    """What the server's API says of its kernels and terminals."""

    busy: bool  # a kernel whose execution_state is not idle
    latest: dt.datetime | None  # the latest last_activity among them (None: no kernel, no terminal)


def rfc3339(moment: dt.datetime) -> str:
    """Go's ``time.RFC3339`` in UTC, as upstream writes both annotations (``core.view.timestamp``'s format: that
    layer is above this one)."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")



def activity_of(kernels: list[dict[str, Any]], terminals: list[dict[str, Any]]) -> Activity:
    """Reduce the API's answers (pure, for the tests of the rules)."""
    busy = any(kernel.get("execution_state") != IDLE for kernel in kernels)
    moments = [parse_instant(one.get("last_activity")) for one in [*kernels, *terminals]]
    known = [moment for moment in moments if moment is not None]
    return Activity(busy, max(known) if known else None)


def next_last_activity(current: str | None, activity: Activity | None, now: dt.datetime) -> str | None:
    """The annotation's next value (steps 2 and 3 of the module's docstring); None: leave it as it is."""
    if current is None:
        return rfc3339(now)
    if activity is None:  # the API did not answer: upstream leaves it
        return None
    if activity.busy:
        return rfc3339(now)
    if activity.latest is None:
        return None
    return rfc3339(activity.latest)


def idle_past(last_activity: str | None, culling: CullingSettings, now: dt.datetime) -> bool:
    moment = parse_instant(last_activity)
    return moment is not None and (now - moment).total_seconds() > culling.idle_s


def _get_list(port: int, path: str, token: str) -> list[dict[str, Any]] | None:
    request = urllib.request.Request(f"http://{LOCAL_ADDR}:{port}{path}", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as answer:  # noqa: S310 - loopback only
            found = json.loads(answer.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return [one for one in found if isinstance(one, dict)] if isinstance(found, list) else None


def read_activity(endpoint: objects.Endpoint, namespace: str, name: str) -> Activity | None:
    """Ask the running server (None when its kernels' list did not come back)."""
    prefix = base_url(namespace, name)
    kernels = _get_list(endpoint.port, f"{prefix}/api/kernels", endpoint.token)
    if kernels is None:
        return None
    return activity_of(kernels, _get_list(endpoint.port, f"{prefix}/api/terminals", endpoint.token) or [])


def check_notebook(settings: Settings, culling: CullingSettings, resource: Resource,
                   now: dt.datetime | None = None) -> str:
    """One check of one Notebook (the module's steps); what it did: ``culled``, ``updated``, ``cleared`` or ``""``."""
    now = now or dt.datetime.now(dt.timezone.utc)
    annotations = resource.manifest.get("metadata", {}).get("annotations") or {}
    if STOP_ANNOTATION in annotations:
        return _clear(settings, resource, annotations)
    endpoint = objects.endpoint(settings, resource.namespace, resource.name)
    if endpoint is None:
        return _clear(settings, resource, annotations)
    current = annotations.get(LAST_ACTIVITY_ANNOTATION)
    activity = None if current is None else read_activity(endpoint, resource.namespace, resource.name)
    changed = ""
    value = next_last_activity(current, activity, now)
    if value is not None and value != current:
        ResourceStore(settings).annotate(NOTEBOOK.kind, resource.name, resource.namespace,
                                         {LAST_ACTIVITY_ANNOTATION: value}, uid=resource.uid)
        current, changed = value, "updated"
    if culling.enabled and idle_past(current, culling, now):
        log.info("notebook %s/%s idle since %s: culled", resource.namespace, resource.name, current)
        ResourceStore(settings).annotate(NOTEBOOK.kind, resource.name, resource.namespace,
                                         {STOP_ANNOTATION: rfc3339(now)}, uid=resource.uid)
        return "culled"
    return changed


def _clear(settings: Settings, resource: Resource, annotations: dict[str, Any]) -> str:
    if LAST_ACTIVITY_ANNOTATION not in annotations:
        return ""
    ResourceStore(settings).annotate(NOTEBOOK.kind, resource.name, resource.namespace,
                                     {LAST_ACTIVITY_ANNOTATION: None}, uid=resource.uid)
    return "cleared"


def check_all(settings: Settings, culling: CullingSettings) -> list[str]:
    """One check of every Notebook; the names culled."""
    culled = []
    for resource in ResourceStore(settings).list(NOTEBOOK.kind, None):
        try:
            if check_notebook(settings, culling, resource) == "culled":
                culled.append(f"{resource.namespace}/{resource.name}")
        except Exception:  # one notebook's failure (its folder removed under it) must not spare the others
            log.exception("notebooks: the culler's check of %s/%s failed", resource.namespace, resource.name)
    return culled
