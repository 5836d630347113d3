"""``millpond server``'s uvicorn Server, which ends the Kubernetes API's watches first when told to stop.

uvicorn stops gracefully: it stops accepting, then waits for every request in flight. A watch
(``kubectl get -w``, an informer) never ends by itself, so a server with a client watching would never
stop on SIGTERM. kube-apiserver closes its watches when it shuts down; so does this, before uvicorn's
graceful wait (``cli.server`` also bounds that wait, for a followed log).
"""

from __future__ import annotations

from types import FrameType

import uvicorn

from millpond.server.kube.watch import OPEN_WATCHES


class StoppingServer(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        OPEN_WATCHES.close_all()
        super().handle_exit(sig, frame)
