"""Limits an Argo workflow puts on a whole run, which the v2 IR has no field for.

A kfp 1.x workflow may say how many of its pods run at once (``spec.parallelism``:
``PipelineConf.set_parallelism``), how long the whole workflow may take
(``spec.activeDeadlineSeconds``: ``PipelineConf.set_timeout``), and how old a cached result a
step may reuse (``max_cache_staleness``: ``op.execution_options.caching_strategy``). KFP v2's IR
and kfp-kubernetes' executor config hold none of these, so ``argo.to_ir`` writes them into the
platform spec under a platform of their own, ``platforms.argo.config``, the generic ``config``
struct a PlatformSpec entry carries, and the engine reads them back from the run's platform spec
here. A run of any other pipeline has no such entry and no such limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.errors import UserError

PLATFORM = "argo"
_MAX = 10**9  # seconds or pods: anything larger is a typo, not a limit


@dataclass(frozen=True)
class WorkflowLimits:
    """What ``platforms.argo.config`` says; every field empty means no limit."""

    parallelism: int | None = None  # at most this many tasks run at once (Argo: pods)
    deadline_s: int | None = None  # the whole run's time, counted from when the engine starts it
    cache_staleness_s: dict[str, float] = field(default_factory=dict)  # component name -> max age of a cache hit

    def config(self) -> dict[str, int | dict[str, float]]:
        """The ``platforms.argo.config`` struct (only the fields that are set)."""
        config: dict[str, int | dict[str, float]] = {}
        if self.parallelism:
            config["parallelism"] = self.parallelism
        if self.deadline_s:
            config["activeDeadlineSeconds"] = self.deadline_s
        if self.cache_staleness_s:
            config["maxCacheStalenessSeconds"] = dict(self.cache_staleness_s)
        return config

    def __bool__(self) -> bool:
        return bool(self.config())


def workflow_limits(platform: dict[str, Any] | None, source: str = "platform spec") -> WorkflowLimits:
    """The limits in ``platform`` (none when it has no argo entry); UserError for a malformed one."""
    entry = ((platform or {}).get("platforms") or {}).get(PLATFORM)
    if entry is None:
        return WorkflowLimits()
    config = entry.get("config") if isinstance(entry, dict) else None
    if not isinstance(config, dict):
        raise UserError(f"{source}: platforms.{PLATFORM} must hold a config object")
    unknown = sorted(set(config) - {"parallelism", "activeDeadlineSeconds", "maxCacheStalenessSeconds"})
    if unknown:
        raise UserError(f"{source}: platforms.{PLATFORM}.config has unknown field {unknown[0]!r}")
    staleness = config.get("maxCacheStalenessSeconds") or {}
    if not isinstance(staleness, dict):
        raise UserError(f"{source}: platforms.{PLATFORM}.config.maxCacheStalenessSeconds "
                        "must map components to seconds")
    return WorkflowLimits(
        parallelism=_count(config.get("parallelism"), "parallelism", source),
        deadline_s=_count(config.get("activeDeadlineSeconds"), "activeDeadlineSeconds", source),
        cache_staleness_s={str(name): float(_seconds(value, name, source)) for name, value in staleness.items()},
    )


def _count(value: object, name: str, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX:
        raise UserError(f"{source}: platforms.{PLATFORM}.config.{name} must be a whole number from 1 to {_MAX}")
    return value


def _seconds(value: object, name: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2**40:
        raise UserError(f"{source}: platforms.{PLATFORM}.config.maxCacheStalenessSeconds[{name[:60]!r}] "
                        "must be seconds, 0 or more")
    return float(value)
