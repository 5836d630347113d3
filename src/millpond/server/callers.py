"""Who calls the API: the identity a fronting proxy puts in ``kubeflow-userid``, as KFP's multi-user mode reads it.

KFP trusts that header because, in a Kubeflow deployment, only Istio's authenticating proxy
(oauth2-proxy, Dex) reaches the API and it sets the header from the login; the value may carry a
prefix (``accounts.google.com:``) that is dropped. Without such a proxy any caller can put any
name there: the name recorded on a run's tasks and a job is then what the caller says, and
per-user quotas are cooperative (README "Queues and quotas: Kueue"). No header: ``anonymous``.
"""

from __future__ import annotations

from fastapi import Request

from millpond.scheduling.queues.submission import ANONYMOUS

USERID_HEADER = "kubeflow-userid"  # KFP's KUBEFLOW_USERID_HEADER default
USERID_PREFIX = "accounts.google.com:"  # KFP's KUBEFLOW_USERID_PREFIX default
_MAX = 253


def caller(request: Request) -> str:
    """The caller's identity, one printable line of at most 253 characters, or ``anonymous``."""
    value = (request.headers.get(USERID_HEADER) or "").strip().removeprefix(USERID_PREFIX).strip()
    if not value or len(value) > _MAX or not value.isprintable():
        return ANONYMOUS
    return value
