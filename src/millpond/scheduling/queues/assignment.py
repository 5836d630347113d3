"""The flavor assignment of one workload: the record the admission cycle and the preemptor share.

Kueue's preemptor imports the flavor assigner's ``Assignment`` and never reaches back into the
scheduler; so here: ``admission`` makes assignments, ``preemption`` reads them, and both import
this module, which imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millpond.scheduling.queues.model import Workload
from millpond.scheduling.queues.quota import FlavorResource

FIT, PREEMPT, NO_FIT = 2, 1, 0  # how a workload would get in with an assignment, best first


@dataclass
class Assignment:
    """A flavor for each requested resource, and how the workload would get in with them."""

    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor
    mode: int = FIT
    borrowing: bool = False
    never: bool = False  # bigger than any quota this queue could ever give
    reasons: list[str] = field(default_factory=list)

    def keys(self, workload: Workload) -> dict[FlavorResource, int]:
        return {(self.flavors[name], name): value for name, value in workload.requests.items()
                if value > 0 and name in self.flavors}
