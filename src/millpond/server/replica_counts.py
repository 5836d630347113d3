"""What an InferenceService's model processes say they answered, for the Models page's request counts.

The gateway counts what goes through ``millpond server`` (``serving_routes.GatewayMetrics``), but an
InferenceService also has its own port (its ``status.url``, KServe's predictor URL) that a client may
call straight, bypassing the gateway. Every such call ends in a replica, whose model server counts its
inference requests (``millpond_model_server_inferences_total{protocol, code}``, ``serving.metrics``):
the page reads each replica's ``/metrics`` and shows, per total, status code and revision, the larger
of the gateway's and the replicas' figures. Larger, not summed: a call through the gateway reaches a
replica too (both count it), and a replica that restarted starts again at zero while the gateway
remembers. A custom container (``server: command``) has no such counter: the gateway's figures alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from millpond.serving.front import Router, Target

INFERENCES = "millpond_model_server_inferences"
READ_TIMEOUT_S = 1.0  # a replica busy past this is left out of this poll: the page polls again


@dataclass
class ServedCounts:
    """The inference requests the replicas up now answered: in all, by HTTP status and by revision."""

    requests: int = 0
    by_code: dict[str, int] = field(default_factory=dict)
    by_revision: dict[str, int] = field(default_factory=dict)


async def replica_counts(router: Router, target: Target | None) -> ServedCounts | None:
    """The replicas' own counts, or None when nothing is served or its replicas count nothing (custom)."""
    if target is None or target.endpoints.server == "command":
        return None
    pairs = [(revision.name, url) for revision in target.endpoints.revisions for url in revision.replicas]
    answers = await asyncio.gather(*(_inferences(router, url) for _, url in pairs))
    counts = ServedCounts()
    for (revision, _), by_code in zip(pairs, answers, strict=True):
        for code, value in by_code.items():
            counts.requests += value
            counts.by_code[code] = counts.by_code.get(code, 0) + value
            counts.by_revision[revision] = counts.by_revision.get(revision, 0) + value
    return counts


def merged(gateway: dict[str, Any], served: ServedCounts | None) -> dict[str, Any]:
    """The gateway's summary with each count raised to the replicas' where theirs is larger."""
    if served is None:
        return gateway
    out = dict(gateway)
    out["requests"] = max(int(gateway.get("requests") or 0), served.requests)
    out["byCode"] = _larger(gateway.get("byCode") or {}, served.by_code)
    out["byRevision"] = _larger(gateway.get("byRevision") or {}, served.by_revision)
    out["served"] = {"requests": served.requests, "byCode": served.by_code}
    return out


def _larger(first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    return {key: max(first.get(key, 0), second.get(key, 0)) for key in sorted({*first, *second})}


async def _inferences(router: Router, base: str) -> dict[str, int]:
    """One replica's inference counts by status code; empty when it does not answer in time."""
    try:
        limit = aiohttp.ClientTimeout(total=READ_TIMEOUT_S)
        async with router.session().get(base + "/metrics", timeout=limit) as answer:
            if answer.status != 200:
                return {}
            text = (await answer.read()).decode("utf-8", errors="replace")
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return {}
    by_code: dict[str, int] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.name != INFERENCES:
                continue
            for sample in family.samples:
                if sample.name == INFERENCES + "_total":
                    code = sample.labels.get("code", "")
                    by_code[code] = by_code.get(code, 0) + int(sample.value)
    except ValueError:  # not Prometheus' text format: not millpond's model server
        return {}
    return by_code
