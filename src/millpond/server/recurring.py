"""Recurring runs (KFP v2beta1 ``/recurringruns``) and the scheduler thread that starts their runs.

A recurring run is kept as one JSON file under ``$MILLPOND_HOME/recurring/`` (written to a
temporary file, then renamed over the old one). That is a stopgap until the metadata database
has a ``recurring_runs`` table; the file holds exactly what such a row would.

Triggers, as Kubeflow takes them:

- ``cron_schedule.cron``: six fields, seconds first (``"0 */5 * * * *"``), read in UTC;
- ``periodic_schedule.interval_second``: every N seconds, the first run N seconds after creation
  (or after ``start_time``);

both with optional ``start_time`` / ``end_time``. The scheduler starts runs through
``runs.create_run`` — the code behind ``POST /runs`` — so a scheduled run is like any other.
It honours ``max_concurrency`` (a due run waits while that many of this recurring run's runs are
in flight) and ``no_catchup`` (when several times are due, e.g. after a disable/enable or a
server restart, only the latest is run; otherwise each missed time is run, at most
``_CATCHUP_PER_TICK`` per tick).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, field_validator

from millpond.errors import UserError
from millpond.server.bodies import PipelineVersionReference, RunBody, RuntimeConfig
from millpond.server.errors import ApiError
from millpond.server.state import ServerState, state_of
from millpond.store.journal import FINAL_STATES
from millpond.store.keys import new_id
from millpond.store.models import Experiment, Run

router = APIRouter(tags=["RecurringRunService"])
log = logging.getLogger(__name__)

TICK_S = 0.5
MAX_CONCURRENCY_LIMIT = 10  # Kubeflow's bound
_CATCHUP_PER_TICK = 10
_SORTABLE = {"display_name", "created_at", "updated_at", "recurring_run_id", "id", "name"}

# run id -> recurring run id, for run views (filled from the files at start and by the scheduler).
_RUN_OWNERS: dict[str, str] = {}


def recurring_run_of(run_id: str) -> str | None:
    """The recurring run that started ``run_id``, if one did."""
    return _RUN_OWNERS.get(run_id)


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
    namespace: str | None = None
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


# ----------------------------------------------------------------------------------------- store


class RecurringStore:
    """One JSON file per recurring run, replaced atomically. (A database table should replace this.)"""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = threading.RLock()

    def _path(self, recurring_id: str) -> Path:
        if not recurring_id or "/" in recurring_id or recurring_id.startswith("."):
            raise ApiError(404, f"no recurring run with id {recurring_id!r}")
        return self.folder / f"{recurring_id}.json"

    def save(self, record: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self._path(record["recurring_run_id"])
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(record, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def load(self, recurring_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(recurring_id).read_text())  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None
        except ValueError:
            log.warning("unreadable recurring run file %s", self._path(recurring_id))
            return None

    def all(self) -> list[dict[str, Any]]:
        if not self.folder.is_dir():
            return []
        records = []
        for path in sorted(self.folder.glob("*.json")):
            if path.name.startswith("."):
                continue
            record = self.load(path.stem)
            if record is not None:
                records.append(record)
        return records

    def delete(self, recurring_id: str) -> bool:
        try:
            self._path(recurring_id).unlink()
            return True
        except FileNotFoundError:
            return False


# ------------------------------------------------------------------------------------- schedules


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _parse_time(text: str | None, field: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ApiError(400, f"{field}: not an RFC 3339 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _schedule(record: dict[str, Any]) -> tuple[str, Any, dt.datetime | None, dt.datetime | None]:
    """(kind, cron text or interval seconds, start, end) of a stored trigger."""
    trigger = record["trigger"]
    kind = "cron_schedule" if "cron_schedule" in trigger else "periodic_schedule"
    part = trigger[kind]
    start = _parse_time(part.get("start_time"), f"trigger.{kind}.start_time")
    end = _parse_time(part.get("end_time"), f"trigger.{kind}.end_time")
    value = part["cron"] if kind == "cron_schedule" else int(part["interval_second"])
    return kind, value, start, end


def _next_after(kind: str, value: Any, after: dt.datetime) -> dt.datetime:
    if kind == "periodic_schedule":
        return after + dt.timedelta(seconds=value)
    from croniter import croniter

    return croniter(_cron_fields(value), after, second_at_beginning=True).get_next(dt.datetime)  # type: ignore[no-any-return]


def _cron_fields(text: str) -> str:
    """Kubeflow's six fields (seconds first); five fields get a leading 0 second."""
    fields = text.split()
    return " ".join(["0", *fields]) if len(fields) == 5 else text


def _validate_trigger(trigger: Trigger | None) -> dict[str, Any]:
    if trigger is None or (trigger.cron_schedule is None) == (trigger.periodic_schedule is None):
        raise ApiError(400, "trigger: exactly one of cron_schedule and periodic_schedule is required")
    if trigger.cron_schedule is not None:
        cron = (trigger.cron_schedule.cron or "").strip()
        from croniter import croniter

        fields = cron.split()
        if len(fields) not in (5, 6) or not croniter.is_valid(_cron_fields(cron), second_at_beginning=True):
            raise ApiError(400, f"trigger.cron_schedule.cron: invalid cron expression {cron!r} "
                                "(six fields, seconds first, e.g. '0 0 * * * *')")
        part = trigger.cron_schedule.model_dump(exclude_none=True) | {"cron": cron}
        kind = "cron_schedule"
    else:
        assert trigger.periodic_schedule is not None
        interval = trigger.periodic_schedule.interval_second
        if interval is None or interval <= 0:
            raise ApiError(400, "trigger.periodic_schedule.interval_second must be a positive number of seconds")
        part = trigger.periodic_schedule.model_dump(exclude_none=True)
        kind = "periodic_schedule"
    start = _parse_time(part.get("start_time"), f"trigger.{kind}.start_time")
    end = _parse_time(part.get("end_time"), f"trigger.{kind}.end_time")
    if start and end and end <= start:
        raise ApiError(400, f"trigger.{kind}: end_time must be after start_time")
    return {kind: part}


# ------------------------------------------------------------------------------------- scheduler


class Scheduler:
    """A daemon thread that starts the runs of enabled recurring runs when they are due."""

    def __init__(self, state: ServerState, store: RecurringStore) -> None:
        self.state = state
        self.store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for record in self.store.all():
            for run_id in record.get("run_ids", []):
                _RUN_OWNERS[run_id] = record["recurring_run_id"]
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="millpond-scheduler")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except Exception:  # a bad file or a database hiccup must not end the scheduler
                log.exception("scheduler tick failed")

    def tick(self, now: dt.datetime | None = None) -> None:
        now = now or _utcnow()
        for record in self.store.all():
            if record.get("mode") == "ENABLE":
                with self.store.lock:
                    current = self.store.load(record["recurring_run_id"])  # not deleted or disabled meanwhile
                    if current is not None and current.get("mode") == "ENABLE":
                        self._advance(current, now)

    def _advance(self, record: dict[str, Any], now: dt.datetime) -> None:
        kind, value, start, end = _schedule(record)
        last = _parse_time(record.get("last_scheduled_at"), "last_scheduled_at")
        if last is None:  # never fired: count from start_time (cron: due at it, periodic: one interval after)
            last = (start - dt.timedelta(microseconds=1) if kind == "cron_schedule" else start) if start else \
                _parse_time(record["created_at"], "created_at")
        assert last is not None
        due: list[dt.datetime] = []
        moment = _next_after(kind, value, last)
        while moment <= now and (end is None or moment <= end) and len(due) < 10_000:
            due.append(moment)
            moment = _next_after(kind, value, moment)
        if not due:
            return
        if record.get("no_catchup"):
            due = due[-1:]
        changed = False
        for moment in due[:_CATCHUP_PER_TICK]:
            if self._in_flight(record) >= int(record.get("max_concurrency") or 1):
                break  # wait: the time stays due
            self._start_run(record, moment)
            record["last_scheduled_at"] = _iso(moment)
            changed = True
        if changed:
            self.store.save(record)

    def _in_flight(self, record: dict[str, Any]) -> int:
        ids = record.get("run_ids", [])[-(MAX_CONCURRENCY_LIMIT * 10):]
        if not ids:
            return 0
        from sqlalchemy import func, select

        with self.state.sessions() as session:
            return session.scalar(
                select(func.count()).where(Run.id.in_(ids), Run.state.not_in(FINAL_STATES))
            ) or 0

    def _start_run(self, record: dict[str, Any], moment: dt.datetime) -> None:
        from millpond.server.runs import create_run

        body = RunBody(
            display_name=f"{record.get('display_name') or 'recurring'}-{moment.strftime('%Y%m%d%H%M%S')}",
            description=record.get("description") or None,
            experiment_id=record.get("experiment_id") or None,
            pipeline_spec=record.get("pipeline_spec"),
            platform_spec=record.get("platform_spec"),
            pipeline_version_reference=record.get("pipeline_version_reference"),
            pipeline_version_id=record.get("pipeline_version_id"),
            runtime_config=record.get("runtime_config"),
            service_account=record.get("service_account") or None,
        )
        try:
            view = create_run(body, _RequestShim(self.state))  # type: ignore[arg-type]
        except (ApiError, UserError) as exc:
            message = exc.message if isinstance(exc, ApiError) else str(exc)
            record["error"] = {"code": 3, "message": f"run at {_iso(moment)} not started: {message}", "details": []}
            log.warning("recurring run %s: %s", record["recurring_run_id"], message)
            return
        record.pop("error", None)
        record.setdefault("run_ids", []).append(view["run_id"])
        _RUN_OWNERS[view["run_id"]] = record["recurring_run_id"]


class _RequestShim(SimpleNamespace):
    """What ``state_of`` reads from a request, so the scheduler can call the ``POST /runs`` handler."""

    def __init__(self, state: ServerState) -> None:
        super().__init__(app=SimpleNamespace(state=SimpleNamespace(millpond=state)))


def install(app: FastAPI, prefix: str) -> None:
    """Add the routes and run the scheduler with the application (started and stopped with it)."""
    state: ServerState = app.state.millpond
    store = RecurringStore(state.settings.home / "recurring")
    scheduler = Scheduler(state, store)
    app.state.recurring = SimpleNamespace(store=store, scheduler=scheduler)
    app.include_router(router, prefix=prefix)
    app.router.on_startup.append(scheduler.start)  # FastAPI's default lifespan runs these
    app.router.on_shutdown.append(scheduler.stop)


# ---------------------------------------------------------------------------------------- routes


def _store(request: Request) -> RecurringStore:
    return request.app.state.recurring.store  # type: ignore[no-any-return]


def _view(record: dict[str, Any]) -> dict[str, Any]:
    view = {key: value for key, value in record.items() if key not in ("run_ids", "last_scheduled_at")}
    view["max_concurrency"] = str(record.get("max_concurrency", 1))
    view["status"] = "ENABLED" if record.get("mode") == "ENABLE" else "DISABLED"
    return view


def _find(request: Request, recurring_id: str) -> dict[str, Any]:
    record = _store(request).load(recurring_id)
    if record is None:
        raise ApiError(404, f"no recurring run with id {recurring_id!r}")
    return record


@router.post("/recurringruns")
def create_recurring_run(body: RecurringRunBody, request: Request) -> dict[str, Any]:
    from millpond.pipelines.arguments import bind_arguments
    from millpond.pipelines.loader import load_ir_text

    server = state_of(request)
    name = (body.display_name or "").strip()
    if not name:
        raise ApiError(400, "display_name is required")
    trigger = _validate_trigger(body.trigger)
    concurrency = 1 if body.max_concurrency is None else body.max_concurrency
    if not 1 <= concurrency <= MAX_CONCURRENCY_LIMIT:
        raise ApiError(400, f"max_concurrency must be between 1 and {MAX_CONCURRENCY_LIMIT}, not {concurrency}")
    mode = (body.mode or "ENABLE").upper()
    if mode in ("MODE_UNSPECIFIED", ""):
        mode = "ENABLE"
    if mode not in ("ENABLE", "DISABLE"):
        raise ApiError(400, f"mode must be ENABLE or DISABLE, not {body.mode!r}")
    spec, platform = body.pipeline_spec, body.platform_spec
    if spec is not None:
        if "pipeline_spec" in spec:  # kfp.Client's form when the package has a platform spec
            spec, platform = spec["pipeline_spec"], spec.get("platform_spec") or platform
        text = json.dumps(spec) + ("\n---\n" + json.dumps(platform) if platform else "")
        loaded = load_ir_text(text, f"recurring run {name}")  # UserError -> 400
        parameters = dict(body.runtime_config.parameters or {}) if body.runtime_config else {}
        bind_arguments(loaded.spec, {}, parameters, None)
    elif not (body.pipeline_version_reference or body.pipeline_version_id):
        raise ApiError(400, "pipeline_spec or pipeline_version_reference is required")
    if body.experiment_id:
        with server.sessions() as session:
            if session.get(Experiment, body.experiment_id) is None:
                raise ApiError(404, f"no experiment with id {body.experiment_id!r}")
    now = _iso(_utcnow())
    record: dict[str, Any] = {
        "recurring_run_id": new_id(), "display_name": name, "description": body.description or "",
        "experiment_id": body.experiment_id or "", "trigger": trigger, "max_concurrency": concurrency,
        "no_catchup": bool(body.no_catchup), "mode": mode, "created_at": now, "updated_at": now,
        "service_account": body.service_account or "", "namespace": body.namespace or "",
        "runtime_config": body.runtime_config.model_dump(exclude_none=True) if body.runtime_config else {},
        "run_ids": [],
    }
    if spec is not None:
        record["pipeline_spec"] = spec
        if platform:
            record["platform_spec"] = platform
    if body.pipeline_version_reference is not None:
        record["pipeline_version_reference"] = body.pipeline_version_reference.model_dump(exclude_none=True)
    if body.pipeline_version_id:
        record["pipeline_version_id"] = body.pipeline_version_id
    _store(request).save(record)
    return _view(record)


@router.get("/recurringruns")
def list_recurring_runs(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, experiment_id: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    records = _store(request).all()
    if experiment_id:
        records = [r for r in records if r.get("experiment_id") == experiment_id]
    records = _filtered(records, filter)
    field, descending = "created_at", True
    if sort_by:
        parts = sort_by.split()
        if len(parts) > 2 or parts[0] not in _SORTABLE or (len(parts) == 2 and parts[1].lower() not in ("asc", "desc")):
            raise ApiError(400, f"invalid sort_by {sort_by!r}: expected FIELD or 'FIELD desc' "
                                f"(fields: {', '.join(sorted(_SORTABLE))})")
        field = {"id": "recurring_run_id", "name": "display_name"}.get(parts[0], parts[0])
        descending = len(parts) == 2 and parts[1].lower() == "desc"
    records.sort(key=lambda r: (str(r.get(field, "")), r["recurring_run_id"]), reverse=descending)
    from millpond.server.listing import MAX_PAGE_SIZE, _offset

    offset = _offset(page_token)
    size = page_size if page_size and page_size > 0 else 20
    if size > MAX_PAGE_SIZE:
        raise ApiError(400, f"page_size {size} is over the maximum of {MAX_PAGE_SIZE}")
    chunk = records[offset:offset + size]
    following = offset + len(chunk)
    import base64

    token = base64.urlsafe_b64encode(str(following).encode()).decode() if following < len(records) else ""
    return {"recurringRuns": [_view(r) for r in chunk], "total_size": len(records), "next_page_token": token}


def _filtered(records: list[dict[str, Any]], text: str | None) -> list[dict[str, Any]]:
    """The ``display_name`` / ``recurring_run_id`` / ``experiment_id`` / ``status`` predicates of a Filter."""
    if not text:
        return records
    try:
        predicates = json.loads(text).get("predicates") or []
    except (ValueError, AttributeError):
        raise ApiError(400, f"invalid filter: not a JSON Filter object: {text[:200]}") from None
    keys = {"display_name": "display_name", "name": "display_name", "recurring_run_id": "recurring_run_id",
            "id": "recurring_run_id", "experiment_id": "experiment_id", "mode": "mode"}
    for predicate in predicates:
        key = predicate.get("key")
        if key not in keys:
            raise ApiError(400, f"invalid filter: unknown key {key!r} (known: {', '.join(sorted(keys))})")
        operation = predicate.get("operation")
        operation = {1: "EQUALS", 2: "NOT_EQUALS", 9: "IS_SUBSTRING"}.get(operation, operation)
        value = predicate.get("string_value", predicate.get("stringValue"))
        if not isinstance(value, str):
            raise ApiError(400, f"invalid filter: predicate on {key!r} needs a string_value")
        field = keys[key]
        if operation == "EQUALS":
            records = [r for r in records if str(r.get(field, "")) == value]
        elif operation == "NOT_EQUALS":
            records = [r for r in records if str(r.get(field, "")) != value]
        elif operation == "IS_SUBSTRING":
            records = [r for r in records if value in str(r.get(field, ""))]
        else:
            raise ApiError(400, f"invalid filter: operation {predicate.get('operation')!r} is not supported on {key!r}")
    return records


@router.get("/recurringruns/{recurring_run_id}")
def get_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    return _view(_find(request, recurring_run_id))


@router.delete("/recurringruns/{recurring_run_id}")
def delete_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    """Stop scheduling; the runs it started stay."""
    store = _store(request)
    with store.lock:
        _find(request, recurring_run_id)
        store.delete(recurring_run_id)
    return {}


@router.post("/recurringruns/{recurring_run_id}:enable")
def enable_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    return _set_mode(request, recurring_run_id, "ENABLE")


@router.post("/recurringruns/{recurring_run_id}:disable")
def disable_recurring_run(recurring_run_id: str, request: Request) -> dict[str, Any]:
    return _set_mode(request, recurring_run_id, "DISABLE")


def _set_mode(request: Request, recurring_id: str, mode: str) -> dict[str, Any]:
    store = _store(request)
    with store.lock:
        record = _find(request, recurring_id)
        if record.get("mode") != mode:
            record["mode"] = mode
            record["updated_at"] = _iso(_utcnow())
            store.save(record)
    return {}
