"""Recurring runs over HTTP: KFP v2beta1's ``/recurringruns`` routes, and the scheduler's place in the app.

The rules live below the HTTP layer: ``pipelines/recurring.py`` (create, disable, import old
homes), ``pipelines/schedules.py`` (triggers), ``pipelines/scheduler.py`` (the thread that
starts due runs through ``pipelines/start.py``) and ``store/recurring.py`` (the table). This
module turns request bodies into those calls and records into KFP's JSON. In multi-user mode a recurring
run belongs to its experiment's namespace and every call is authorized on ``jobs`` there (KFP's
``canAccessJob``, ``kfp_access``).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, field_validator

from millpond.access import kfp
from millpond.errors import UserError
from millpond.pipelines import recurring as service
from millpond.pipelines.recurring import NewRecurringRun
from millpond.pipelines.scheduler import Scheduler
from millpond.pipelines.schedules import make_trigger
from millpond.pipelines.start import StartRequest, start_run
from millpond.server.bodies import PipelineVersionReference, RuntimeConfig
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, check_job, create_scope, list_scope, multi_user
from millpond.server.listing import list_query, next_page_token
from millpond.server.namespaces import BodyNamespace
from millpond.server.pipelines import readable_version
from millpond.server.state import ServerState, state_of
from millpond.store.recurring import RecurringRunRecord, RecurringRunStore
from millpond.store.timestamps import iso

router = APIRouter(tags=["RecurringRunService"])
log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------- bodies


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CronSchedule(_Body):
    start_time: str | None = None
    end_time: str | None = None
    cron: str | None = None


class PeriodicSchedule(_Body):
    start_time: str | None = None
    end_time: str | None = None
    interval_second: int | None = None

    @field_validator("interval_second", mode="before")
    @classmethod
    def _int64(cls, value: Any) -> Any:  # int64 travels as a string in proto3 JSON
        return int(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else value


class Trigger(_Body):
    cron_schedule: CronSchedule | None = None
    periodic_schedule: PeriodicSchedule | None = None


class RecurringRunBody(_Body):
    display_name: str | None = None
    description: str | None = None
    experiment_id: str | None = None
    pipeline_version_id: str | None = None
    pipeline_spec: dict[str, Any] | None = None
    platform_spec: dict[str, Any] | None = None
    pipeline_version_reference: PipelineVersionReference | None = None
    runtime_config: RuntimeConfig | None = None
    service_account: str | None = None
    max_concurrency: int | None = None
    trigger: Trigger | None = None
    mode: str | None = None
    no_catchup: bool | None = None
    namespace: BodyNamespace = None
    plugins_input: dict[str, Any] | None = None
    # output-only, echoed back by clients
    recurring_run_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    status: str | None = None
    error: dict[str, Any] | None = None

    @field_validator("max_concurrency", mode="before")
    @classmethod
    def _int64(cls, value: Any) -> Any:
        return int(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else value


# ------------------------------------------------------------------------------------ the app


@dataclass
class Recurring:
    """What the routes share: the table and the scheduler thread."""

    store: RecurringRunStore
    scheduler: Scheduler


def install(app: FastAPI, prefix: str) -> None:
    """Add the routes and run the scheduler with the application (started and stopped with it).

    At start, recurring runs an older millpond kept as JSON files in the home are imported first.
    """
    state: ServerState = app.state.millpond
    store = state.recurring

    def start(request: StartRequest) -> str:
        return start_run(state.store, state.pipelines, state.settings, request, state.executor.start).id

    scheduler = Scheduler(store, start)
    app.state.recurring = Recurring(store=store, scheduler=scheduler)
    app.include_router(router, prefix=prefix)

    def startup() -> None:
        try:
            service.import_legacy_files(state.settings.home / "recurring", store)
        except Exception:  # an unreadable folder must not keep the server (or the scheduler) from starting
            log.exception("recurring runs: importing the old JSON files failed")
        scheduler.start()

    app.router.on_startup.append(startup)  # FastAPI's default lifespan runs these
    app.router.on_shutdown.append(scheduler.stop)


def _store(request: Request) -> RecurringRunStore:
    return request.app.state.recurring.store


# ---------------------------------------------------------------------------------------- views


def _schedule_view(record: RecurringRunRecord) -> dict[str, Any]:
    trigger = record.trigger
    part: dict[str, Any] = {}
    if trigger.start_time:
        part["start_time"] = iso(trigger.start_time)
    if trigger.end_time:
        part["end_time"] = iso(trigger.end_time)
    if trigger.cron is not None:
        return {"cron_schedule": {**part, "cron": trigger.cron}}
    return {"periodic_schedule": {**part, "interval_second": str(trigger.interval_second)}}


def recurring_view(record: RecurringRunRecord) -> dict[str, Any]:
    """A recurring run in KFP's JSON (int64 as strings, mode and the status it implies)."""
    config: dict[str, Any] = {"parameters": record.parameters}
    if record.pipeline_root:
        config["pipeline_root"] = record.pipeline_root
    view: dict[str, Any] = {
        "recurring_run_id": record.id, "display_name": record.name, "description": record.description,
        "experiment_id": record.experiment_id or "", "trigger": _schedule_view(record),
        "max_concurrency": str(record.max_concurrency), "no_catchup": record.no_catchup,
        "mode": "ENABLE" if record.enabled else "DISABLE", "status": "ENABLED" if record.enabled else "DISABLED",
        "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
        "service_account": record.service_account, "namespace": record.namespace, "runtime_config": config,
    }
    if record.pipeline_spec is not None:
        view["pipeline_spec"] = record.pipeline_spec
        if record.platform_spec:
            view["platform_spec"] = record.platform_spec
    if record.pipeline_id or record.pipeline_version_id:
        view["pipeline_version_reference"] = {
            key: value for key, value in (("pipeline_id", record.pipeline_id),
                                          ("pipeline_version_id", record.pipeline_version_id)) if value
        }
    if record.pipeline_version_id:
        view["pipeline_version_id"] = record.pipeline_version_id
    if record.error:
        view["error"] = {"code": 9, "message": record.error, "details": []}  # 9: FAILED_PRECONDITION
    return view


def _find(request: Request, recurring_id: str, verb: str = kfp.GET) -> RecurringRunRecord:
    """The recurring run of this id, which the caller may ``verb`` (KFP's ``canAccessJob``)."""
    record = _store(request).get(recurring_id)
    if record is None:
        raise ApiError(404, f"no recurring run with id {recurring_id!r}")
    check_job(request, state_of(request).store, record, verb)
    return record


# ---------------------------------------------------------------------------------------- routes


def _new(body: RecurringRunBody) -> NewRecurringRun:
    trigger = body.trigger
    if trigger is None or (trigger.cron_schedule is None) == (trigger.periodic_schedule is None):
        raise UserError("trigger: exactly one of cron_schedule and periodic_schedule is required")
    if trigger.cron_schedule is not None:
        cron = trigger.cron_schedule
        made = make_trigger("cron_schedule", cron.cron, None, cron.start_time, cron.end_time)
    else:
        periodic = trigger.periodic_schedule
        assert periodic is not None
        made = make_trigger("periodic_schedule", None, periodic.interval_second, periodic.start_time, periodic.end_time)
    mode = (body.mode or "ENABLE").upper()
    if mode not in ("ENABLE", "DISABLE", "MODE_UNSPECIFIED"):
        raise UserError(f"mode must be ENABLE or DISABLE, not {body.mode!r}")
    reference = body.pipeline_version_reference
    config = body.runtime_config
    return NewRecurringRun(
        name=body.display_name or "", trigger=made, description=body.description or "",
        experiment_id=body.experiment_id or None, pipeline_spec=body.pipeline_spec, platform_spec=body.platform_spec,
        pipeline_id=(reference.pipeline_id if reference else None) or None,
        pipeline_version_id=(reference.pipeline_version_id if reference else None) or body.pipeline_version_id or None,
        parameters=dict(config.parameters or {}) if config else {},
        pipeline_root=(config.pipeline_root if config else None) or None,
        max_concurrency=1 if body.max_concurrency is None else body.max_concurrency,
        no_catchup=bool(body.no_catchup), enabled=mode != "DISABLE", service_account=body.service_account or "",
        namespace=body.namespace or "",
    )


@router.post("/recurringruns")
def create_recurring_run(body: RecurringRunBody, request: Request) -> dict[str, Any]:
    server = state_of(request)  # a missing pipeline or experiment answers 404, an archived one 412 (errors.py)
    new = _new(body)
    if multi_user(request):  # the experiment's namespace (KFP's GetValidExperimentNamespacePair), authorized
        namespace = create_scope(request, server.store, body.experiment_id, body.namespace, "a recurring run")
        authorize(request, kfp.CREATE, kfp.JOBS, namespace, new.name,
                  failure="Failed to create a recurring run due to authorization error. "
                          f"Check if you have write permission to namespace {namespace}")
        new = dataclasses.replace(new, namespace=namespace)
        if new.pipeline_spec is None and (new.pipeline_id or new.pipeline_version_id):  # one the caller may read
            readable_version(request, new.pipeline_id, new.pipeline_version_id)
    return recurring_view(service.create(_store(request), server.store, server.pipelines, new))


@router.get("/recurringruns")
def list_recurring_runs(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, experiment_id: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    query = list_query(filter, sort_by, page_token, page_size)
    scope = list_scope(request, state_of(request).store, namespace, experiment_id, kfp.JOBS)
    found = _store(request).page(query, experiment_id, scope)
    return {"recurringRuns": [recurring_view(r) for r in found.items], "total_size": found.total,
            "next_page_token": next_page_token(found)}


@router.get("/recurringruns/{recurring_run_id}")
def get_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    return recurring_view(_find(request, recurring_run_id))


@router.delete("/recurringruns/{recurring_run_id}")
def delete_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    """Stop scheduling; the runs it started stay."""
    _find(request, recurring_run_id, kfp.DELETE)
    if not _store(request).delete(recurring_run_id):
        raise ApiError(404, f"no recurring run with id {recurring_run_id!r}")
    return {}


@router.post("/recurringruns/{recurring_run_id}:enable")
def enable_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    _find(request, recurring_run_id, kfp.ENABLE)
    if not _store(request).set_enabled(recurring_run_id, True):
        raise ApiError(404, f"no recurring run with id {recurring_run_id!r}")
    return {}


@router.post("/recurringruns/{recurring_run_id}:disable")
def disable_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    _find(request, recurring_run_id, kfp.DISABLE)
    if not _store(request).set_enabled(recurring_run_id, False):
        raise ApiError(404, f"no recurring run with id {recurring_run_id!r}")
    return {}
