"""The Kubernetes API of ``millpond server``: what ``kubectl``, the ``kubernetes`` client and the Kubeflow,
KServe and Katib SDKs call, over every kind of the one registry (``millpond.kinds``).

Modules, one concept each: ``status`` (errors as ``kind: Status``), ``paths`` (a URL as a resource
request), ``discovery`` (``/version``, ``/api``, ``/apis``, aggregated discovery), ``history`` (resource
versions, generations and the event log every watch reads), ``selectors`` (label and field selectors),
``patches`` (JSON merge patch, JSON patch, strategic merge patch, server-side apply), ``tables``
(``as=Table``), ``objects`` (create, read, update, delete through the kinds' handlers), ``watch``
(streams) and ``app`` (the ASGI application the server hands these paths to).
"""
