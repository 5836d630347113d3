"""An InferenceService's revisions: their names, what makes a new one, what each is doing, and the kept state.

KServe (Knative underneath) makes a new revision, ``NAME-predictor-0000N``, for each change of the
predictor's template; ``canaryTrafficPercent`` only routes, so changing it alone makes none. A
supervisor keeps the revisions it serves in ``revisions.json`` beside the endpoints (the uid, the
last number, the latest and the rolled-out revision, each one's predictor, the newest that ever
answered), so that a supervisor
started again (after ``kill -9``, a reboot) numbers on and keeps a canary's previous revision.

:func:`status_of` reads KServe's status off the revisions and the traffic: Ready once every
revision with traffic has a replica that answers, else why not (a model that cannot be fetched or
loaded, a container that cannot start, replicas crashing), else Loading.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from millpond.runners.base import Bind
from millpond.serving.placement import Placement
from millpond.serving.replicas import BACKOFF_START_S, Replica
from millpond.serving.spec import PredictorSpec


def revision_name(name: str, number: int) -> str:
    """KServe's (Knative's) name of the predictor's ``number``-th revision."""
    return f"{name}-predictor-{number:05d}"


def predictor_key(predictor: dict[str, Any]) -> str:
    """What makes a new revision: the predictor, less the traffic split (which only routes)."""
    return json.dumps({k: v for k, v in predictor.items() if k != "canaryTrafficPercent"}, sort_keys=True)


@dataclass
class RevisionRun:
    """One revision being served: its spec, its model's folder, its replicas, and why it cannot start."""

    name: str
    predictor: dict[str, Any]
    spec: PredictorSpec
    replicas: list[Replica]
    held: ExitStack = field(default_factory=ExitStack)  # the dataset mount its model is read through
    model_dir: Path | None = None
    failure: tuple[str, str] | None = None  # (KServe's reason, message) while it cannot start
    next_try: float = 0.0
    backoff_s: float = BACKOFF_START_S
    fetching: threading.Thread | None = None
    fetched: Path | str | None = None  # what the last fetch gave: the folder, or why it failed
    placement: Placement | None = None  # where its replicas run (its image or this host), once decided
    placing: threading.Thread | None = None  # the decision (an image pull) under way
    placed: Placement | BaseException | None = None  # what the last decision gave
    data_binds: list[Bind] | None = None  # ``arena serve --data`` datasets bound into its image (leased in ``held``)

    @property
    def ready_urls(self) -> tuple[str, ...]:
        return tuple(r.url for r in self.replicas if r.url)


def failure_of(revision: RevisionRun) -> tuple[str, str] | None:
    """(reason, message) when the revision cannot serve: no model to fetch, or replicas ending before they answer."""
    if revision.failure is not None:
        return revision.failure
    if revision.ready_urls:
        return None
    blocked = next((r for r in revision.replicas if r.blocked), None)
    if blocked is not None:
        return str(blocked.blocked), f"{revision.name} replica {blocked.index}: {blocked.failure}"
    ended = [r for r in revision.replicas if r.failure and r.restarts and not r.ever_ready]
    if ended:
        replica = ended[0]
        return "ModelLoadFailed", f"{revision.name} replica {replica.index} {replica.failure}"
    crashed = [r for r in revision.replicas if r.failure and r.restarts]
    if crashed and all(r.process is None for r in revision.replicas):
        replica = crashed[0]
        return "CrashLoopBackOff", f"{revision.name} replica {replica.index} {replica.failure}"
    return None


@dataclass(frozen=True)
class Observed:
    """What the revisions say for KServe's status: Ready (``True``/``False``/``Unknown``) with reason and
    message, ``modelStatus``'s active state and transition, and the latest's failure while the previous serves."""

    ready: str
    reason: str
    message: str
    active: str
    transition: str
    blocked: tuple[str, str] | None = None


def status_of(revisions: dict[str, RevisionRun], percents: dict[str, int], latest: str) -> Observed:
    """Ready once every revision with traffic has a replica that answers; else the first failure, else Loading."""
    served = [name for name, percent in percents.items() if percent > 0 and name in revisions]
    waiting = [revisions[name] for name in served if not revisions[name].ready_urls]
    newest = revisions[latest]
    if not waiting:
        blocked = failure_of(newest) if not newest.ready_urls else None
        return Observed("True", "", "", "Loaded", "BlockedByFailedLoad" if blocked else "UpToDate", blocked)
    revision = waiting[0]
    failure = failure_of(revision)
    if failure is not None:
        return Observed("False", failure[0], failure[1], "FailedToLoad", "BlockedByFailedLoad")
    pending = next((r.failure for r in revision.replicas if r.failure), None)
    message = pending or f"starting {len(revision.replicas)} replica(s) of {revision.name}"
    return Observed("Unknown", "Loading", message, "Loading", "InProgress")


@dataclass(frozen=True)
class RevisionState:
    """What a supervisor keeps across its restarts (``revisions.json``)."""

    uid: str
    counter: int
    latest: str
    rolled_out: str
    revisions: dict[str, dict[str, Any]]
    ready: str = ""  # the newest revision that ever answered (KServe's latestReadyRevision); "" while none has


def read_state(path: Path, uid: str) -> RevisionState | None:
    """The state kept for ``uid``; None when there is none, it is another uid's, or not of the shape written."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("uid") != uid:
        return None
    revisions = raw.get("revisions")
    shaped = (isinstance(raw.get("counter"), int) and isinstance(revisions, dict)
              and all(isinstance(name, str) and isinstance(body, dict) for name, body in revisions.items())
              and isinstance(raw.get("latest"), str) and isinstance(raw.get("rolled_out"), str))
    if not shaped or not isinstance(revisions, dict):  # (shaped checked it: this says so to the type checker)
        return None
    ready = raw.get("ready")
    return RevisionState(uid, max(0, raw["counter"]), raw["latest"], raw["rolled_out"], revisions,
                         ready if isinstance(ready, str) else "")


def write_state(path: Path, state: RevisionState) -> None:
    """Write it whole or not at all (a partial file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(asdict(state), sort_keys=True))
    os.replace(partial, path)
