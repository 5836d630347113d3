"""KFP's execution cache: a task with caching on gets its key; a hit ends it with the cached outputs.

The key is what the task runs and on what (``caching.cache_key``); an input that cannot be read
to hash it means no caching (the log says why, and the task itself will fail on it). A kfp 1.x
step's ``max_cache_staleness`` bounds a hit's age. With the cache off (``--no-cache``) the key is
still made, so the task's outputs are kept for later runs. On a multi-user server the key is also the run's
namespace's: a task never reuses (nor reads, through their artifacts) another namespace's outputs.
"""

from __future__ import annotations

import hashlib

from millpond.pipelines import ir
from millpond.pipelines.caching import cache_key, lookup
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Done, Verdict
from millpond.pods.run_namespaces import run_namespace


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    node, task = launch.node, launch.task
    if not task.caching_enabled:
        return PROCEED
    log_path = launch.the_log_path()
    platform = ir.kubernetes_config(run.run.platform_spec, launch.executor.label)
    try:
        node.cache_key = cache_key(launch.component, launch.container, platform, launch.inputs, node.recursion_depth())
    except Exception as exc:  # an input we cannot read to hash: no caching; the task will say why
        node.cache_key = None
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"[millpond] not cached: {type(exc).__name__}: {exc}\n")
    if node.cache_key and run.settings.multi_user:  # a team's server: a namespace reuses only its own outputs
        namespace = run_namespace(run.store, run.run.id)
        node.cache_key = hashlib.sha256(f"{namespace}\0{node.cache_key}".encode()).hexdigest()
    max_age = run.limits.cache_staleness_s.get(task.component_ref)
    hit = lookup(run.store, node.cache_key, max_age) if run.use_cache and node.cache_key else None
    if hit is None:
        return PROCEED
    outputs, source = hit
    log_path.write_text(f"[millpond] cache hit: reusing the outputs of task {source}\n")
    return Done(outputs, how="cached", cached_from=source)
