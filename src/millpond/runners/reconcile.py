"""The one shape of millpond's reconcilers: observe the world into a snapshot, then step from it.

Five reconcilers keep what runs in the background true to what is stored: the serving lifecycle
(an InferenceService with no live supervisor gets one), training jobs (a job whose supervisor
died is failed), shared dataset mounts (a mount with no live user is ended), data operations'
liveness (an operation whose process died is resumed or failed) and the home's background
processes (a runner whose object was deleted is ended, a dead one's leftovers are swept). As in
Ray's autoscaler v2 reconciler (``instance_manager/reconciler.py``) each is two calls:

- ``observe()`` reads the world (the store, ``/proc``, the mount table) into a typed, frozen
  snapshot and changes nothing;
- ``step(snapshot)`` computes the transitions the snapshot calls for and applies them, each one
  a member of the reconciler's own ``Enum`` of transitions (its value says what it does), and
  returns what it applied.

Every input of ``step`` is in the snapshot, so a test can hand it one; every transition applied
is recorded by name (:func:`applied`: a log record on ``millpond.reconcile`` carrying the
reconciler, the transition and its subject), so what a reconcile did can always be read back.
A step re-checks what it changes where another process may have changed it since the snapshot
(a compare-and-set on the store, a lock on a mount): observing twice is always safe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, TypeVar

LOGGER = logging.getLogger("millpond.reconcile")

SnapshotT = TypeVar("SnapshotT")


@dataclass(frozen=True)
class Applied:
    """One transition a reconciler applied: which reconciler, which transition, to what, and what it said."""

    reconciler: str
    transition: Enum
    subject: str  # what it was applied to, as a person names it (``default/iris``, ``DataLoad default/warm``)
    detail: str = ""
    uid: str = ""  # the object's uid, where it has one: what a caller looks it up by

    @property
    def name(self) -> str:
        """The transition's name (``SUPERVISOR_DIED``): what the record and the log say."""
        return self.transition.name


class Reconciler(Protocol[SnapshotT]):
    """What every reconciler provides: a name, an ``observe`` that reads, a ``step`` that changes."""

    name: str

    def observe(self) -> SnapshotT:
        """Read the world into a snapshot; change nothing."""
        ...

    def step(self, snapshot: SnapshotT) -> list[Applied]:
        """Apply the transitions ``snapshot`` calls for; those applied, in order."""
        ...


def applied(reconciler: str, transition: Enum, subject: str, detail: str = "", uid: str = "") -> Applied:
    """Record that ``reconciler`` applied ``transition`` to ``subject`` (logged by name); the record."""
    record = Applied(reconciler, transition, subject, detail, uid)
    LOGGER.info("%s: %s %s%s", reconciler, transition.name, subject, f": {detail}" if detail else "",
                extra={"reconciler": reconciler, "transition": transition.name, "subject": subject})
    return record


def reconcile(reconciler: Reconciler[SnapshotT]) -> list[Applied]:
    """One pass: observe, then step from what was observed; the transitions applied."""
    return reconciler.step(reconciler.observe())
