"""Recurring runs (KFP's RecurringRun, once called a job): create them, disable them, import old homes.

The routes under ``/recurringruns`` and the scheduler (``pipelines/scheduler.py``) come through
here. Before the ``recurring_runs`` table, each recurring run was a JSON file under
``$MILLPOND_HOME/recurring/``; :func:`import_legacy_files` moves such files into the database
once (renaming each to ``NAME.json.imported``), so an upgraded home keeps its schedules.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.arguments import bind_arguments
from millpond.pipelines.schedules import make_trigger, parse_time
from millpond.pipelines.start import StartRequest, experiment_name, load_inline, resolve_version
from millpond.store.catalog import PipelineStore
from millpond.store.keys import new_id, utcnow
from millpond.store.recurring import RecurringRunRecord, RecurringRunStore, Trigger
from millpond.store.runs import RunStore

log = logging.getLogger(__name__)

MAX_CONCURRENCY_LIMIT = 10  # Kubeflow's bound


@dataclass(frozen=True)
class NewRecurringRun:
    """What ``POST /recurringruns`` asks for, before validation."""

    name: str
    trigger: Trigger
    description: str = ""
    experiment_id: str | None = None
    pipeline_spec: dict[str, Any] | None = None
    platform_spec: dict[str, Any] | None = None
    pipeline_id: str | None = None
    pipeline_version_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    pipeline_root: str | None = None
    max_concurrency: int = 1
    no_catchup: bool = False
    enabled: bool = True
    service_account: str = ""
    namespace: str = ""


def create(
    store: RecurringRunStore, runs: RunStore, catalog: PipelineStore, new: NewRecurringRun
) -> RecurringRunRecord:
    """Validate (pipeline, parameters, experiment, limits) and record a recurring run."""
    name = new.name.strip()
    if not name:
        raise UserError("display_name is required")
    if not 1 <= new.max_concurrency <= MAX_CONCURRENCY_LIMIT:
        raise UserError(f"max_concurrency must be between 1 and {MAX_CONCURRENCY_LIMIT}, not {new.max_concurrency}")
    spec, platform = new.pipeline_spec, new.platform_spec
    if spec is not None:
        if "pipeline_spec" in spec:  # kfp.Client's form when the package has a platform spec
            spec, platform = spec["pipeline_spec"], spec.get("platform_spec") or platform
        loaded = load_inline(spec, platform, f"recurring run {name}")
    elif new.pipeline_id or new.pipeline_version_id:
        version = resolve_version(catalog, new.pipeline_id, new.pipeline_version_id)
        loaded = load_inline(version.pipeline_spec, version.platform_spec, f"recurring run {name}")
    else:
        raise UserError("pipeline_spec or pipeline_version_reference is required")
    if new.experiment_id:
        experiment_name(runs, new.experiment_id)  # exists, and is not archived
    bind_arguments(loaded.spec, {}, dict(new.parameters), None)
    now = utcnow()
    record = RecurringRunRecord(
        id=new_id(), name=name, trigger=new.trigger, description=new.description, experiment_id=new.experiment_id,
        namespace=new.namespace, service_account=new.service_account, pipeline_spec=spec, platform_spec=platform,
        pipeline_id=new.pipeline_id, pipeline_version_id=new.pipeline_version_id, parameters=dict(new.parameters),
        pipeline_root=new.pipeline_root, max_concurrency=new.max_concurrency, no_catchup=new.no_catchup,
        enabled=new.enabled, created_at=now, updated_at=now,
    )
    store.add(record)
    return record


def scheduled_request(record: RecurringRunRecord, moment: dt.datetime) -> StartRequest:
    """The run a recurring run starts for one scheduled time, named after it."""
    return StartRequest(
        display_name=f"{record.name}-{moment.strftime('%Y%m%d%H%M%S')}", pipeline_spec=record.pipeline_spec,
        platform_spec=record.platform_spec, pipeline_id=record.pipeline_id,
        pipeline_version_id=record.pipeline_version_id, parameters=dict(record.parameters),
        pipeline_root=record.pipeline_root, experiment_id=record.experiment_id, recurring_run_id=record.id,
    )


# ------------------------------------------------------------------------------------- old homes


def legacy_record(data: dict[str, Any]) -> RecurringRunRecord:
    """A recurring run from the JSON file the server wrote before the table existed."""
    trigger = data["trigger"]
    kind = "cron_schedule" if "cron_schedule" in trigger else "periodic_schedule"
    part = trigger[kind]
    interval = part.get("interval_second")
    built = make_trigger(kind, part.get("cron"), int(interval) if interval is not None else None,
                         part.get("start_time"), part.get("end_time"))
    reference = data.get("pipeline_version_reference") or {}
    config = data.get("runtime_config") or {}
    error = data.get("error")
    created = parse_time(data.get("created_at"), "created_at") or utcnow()
    return RecurringRunRecord(
        id=str(data["recurring_run_id"]), name=str(data.get("display_name") or data["recurring_run_id"]),
        trigger=built, description=data.get("description") or "", experiment_id=data.get("experiment_id") or None,
        namespace=data.get("namespace") or "", service_account=data.get("service_account") or "",
        pipeline_spec=data.get("pipeline_spec"), platform_spec=data.get("platform_spec"),
        pipeline_id=reference.get("pipeline_id"),
        pipeline_version_id=reference.get("pipeline_version_id") or data.get("pipeline_version_id"),
        parameters=dict(config.get("parameters") or {}), pipeline_root=config.get("pipeline_root"),
        max_concurrency=int(data.get("max_concurrency") or 1), no_catchup=bool(data.get("no_catchup")),
        enabled=data.get("mode", "ENABLE") == "ENABLE", created_at=created,
        updated_at=parse_time(data.get("updated_at"), "updated_at") or created,
        last_scheduled_at=parse_time(data.get("last_scheduled_at"), "last_scheduled_at"),
        error=error.get("message") if isinstance(error, dict) else None,
    )


def import_legacy_files(folder: Path, store: RecurringRunStore) -> list[str]:
    """Move the JSON recurring runs of an old home into the database; the ids imported.

    Each file is renamed ``NAME.json.imported`` once its row is written (a file that cannot be
    read becomes ``NAME.json.unreadable``, with a warning), so this runs once per file even when
    two servers start on one home at the same time: the second finds the row and skips it.
    """
    if not folder.is_dir():
        return []
    imported = []
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("."):
            continue  # a temporary file of an interrupted write
        try:
            data = json.loads(path.read_text())
            record = legacy_record(data)
        except FileNotFoundError:
            continue  # another server moved it meanwhile
        except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError) as exc:
            log.warning("recurring run file %s not imported: %s: %s", path, type(exc).__name__, exc)
            _rename(path, ".unreadable")
            continue
        if store.add(record):
            imported.append(record.id)
        store.link_runs(record.id, [str(run_id) for run_id in data.get("run_ids") or []])
        _rename(path, ".imported")
    if imported:
        log.info("imported %d recurring run(s) from %s", len(imported), folder)
    return imported


def _rename(path: Path, suffix: str) -> None:
    try:
        path.rename(path.with_name(path.name + suffix))
    except FileNotFoundError:
        pass
