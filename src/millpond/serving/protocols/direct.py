"""The inference POSTs of KServe v1 and the OIP v2 answered straight from ASGI, every other request by FastAPI.

Why: FastAPI's routing and dependency solving cost ~100 µs a request (20 routes matched in order,
the endpoint's signature inspected for each call), as much as everything else a small model's
request needs once ``predict`` is batched. ``POST /v1/models/NAME:predict`` and ``POST
/v2/models/NAME[/versions/V]/infer`` are matched here with the regular expressions Starlette builds
for the same route templates (a parameter is ``[^/]+`` of the decoded path) and answered by the
same functions the FastAPI routes call (``v1.answer_predict``, ``v2.answer_infer``), so the answers,
errors included, are the same whichever way a request goes. Anything else (another method on
those paths: 405; a trailing slash; health, metadata, Seldon) goes to the FastAPI app unchanged.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from millpond.serving.protocols.common import ModelRepository
from millpond.serving.protocols.v1 import answer_predict
from millpond.serving.protocols.v2 import answer_infer

_V1_PREDICT = re.compile(r"^/v1/models/(?P<name>[^/]+):predict$")
_V2_INFER = re.compile(r"^/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/infer$")


class InferenceRoutes:
    """ASGI app: v1 ``:predict`` and v2 ``/infer`` POSTs answered here, everything else by ``app``."""

    def __init__(self, app: ASGIApp, repo: ModelRepository) -> None:
        self.app = app
        self.repo = repo

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path = scope["path"]
            if (match := _V1_PREDICT.match(path)) is not None:
                response = await answer_predict(self.repo, match["name"], Request(scope, receive))
                await response(scope, receive, send)
                return
            if (match := _V2_INFER.match(path)) is not None:
                response = await answer_infer(self.repo, match["name"], match["version"], Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
