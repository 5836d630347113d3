"""``millpond server``'s uvicorn Server, which ends the Kubernetes API's watches first when told to stop.

uvicorn stops gracefully: it stops accepting, then waits for every request in flight. A watch
(``kubectl get -w``, an informer) never ends by itself, so a server with a client watching would never
stop on SIGTERM. kube-apiserver closes its watches when it shuts down; so does this, before uvicorn's
graceful wait (``cli.server`` also bounds that wait, for a followed log).
"""

from __future__ import annotations

from types import FrameType
from typing import Final

import uvicorn

from millpond.server.kube.watch import OPEN_WATCHES

# The event loop and HTTP parser the API is served with, named: uvloop and httptools are installed for model
# servers, and uvicorn's "auto" would take them here too. The API's answers are tested on these (httptools,
# for one, answers an over-long request line with its own plain-text 400, not the API's JSON error).
API_LOOP: Final = "asyncio"
API_HTTP: Final = "h11"


class StoppingServer(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        OPEN_WATCHES.close_all()
        super().handle_exit(sig, frame)
