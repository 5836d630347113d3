"""The core ``v1`` Pod kind, by the names kubectl accepts for it (``pod``, ``pods``, ``po``).

Pods here are read-only views of what millpond runs (``pods.records``): the kind is registered in
``millpond.kinds.REGISTRY`` with group "" (the core group, served under ``/api/v1``) and its handler
(``pods.handler``).
"""

from __future__ import annotations

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "pods"
POD = KindName("Pod", "pods", "", ("v1",), OWNER, ("po",))

REGISTRY.register([POD])  # the handler: pods.handler
