"""The Kubernetes API's service proxy to KFP: ``/api/v1/namespaces/NS/services/ml-pipeline:http/proxy/PATH``.

``kfp.Client()`` given no host loads the kubeconfig and talks to the API server's proxy of the ``ml-pipeline``
service (``kfp.Client._KUBE_PROXY_PATH``, namespace ``kubeflow`` unless ``namespace=`` says otherwise), as
it does from a laptop and from a Kubeflow notebook. ``millpond server`` is both the API server and
``ml-pipeline``: the prefix is taken off and the request goes on to the KFP API (``/apis/v2beta1/...``), with
the caller's credentials checked as for any other request (this middleware sits inside the guard). Only the
KFP API's own paths (``/apis/v2beta1/…``, kfp 1.x's ``/apis/v1beta1/…``) are forwarded; any other path, and
any other service's proxy, is left to the Kubernetes API, which answers 404 as for a service that does not exist.
Simplified: the ``ml-pipeline`` service is found in every namespace (there is one KFP API here).
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

SERVICE_PROXY = re.compile(r"^/api/v1/namespaces/[a-z0-9]([-a-z0-9]*[a-z0-9])?/services/"
                           r"(?:https?:)?ml-pipeline(?::[a-z0-9-]*)?/proxy(?P<rest>/apis/v(?:2beta1|1beta1)/[^?#]*)$")


class KfpServiceProxy:
    """ASGI middleware: a service-proxy path of ``ml-pipeline`` becomes the KFP API's own path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match = SERVICE_PROXY.match(scope["path"])
            if match:
                rest = match.group("rest")
                scope = {**scope, "path": rest, "raw_path": rest.encode()}
        await self.app(scope, receive, send)
