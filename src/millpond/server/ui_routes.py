"""The web UI: static files at ``/`` (with a Content-Security-Policy) and ``/ui/...`` (``app.js`` and the ES
modules it imports under ``lib/`` and ``pages/``), and JSON helpers
under ``/ui-api/`` (``nodes_routes`` adds ``/ui-api/nodes``, ``serving_routes`` ``/ui-api/models``).

The KFP routes give a run and its task details, but not what a DAG drawing needs (each
task's place in the pipeline, its dependencies, its inputs and outputs) nor the tasks' logs:

- ``GET /ui-api/runs/{run_id}/graph``: every task of the run's pipeline spec (sub-DAGs and
  loop iterations included) with its dependencies inside its DAG, merged with what the store
  recorded for it (state, cache hit, inputs, outputs, error, times), each output artifact as a node
  between its producer and its consumers, and a condition's expression (``ir_graph``). A kfp 1.x run is drawn from
  its Argo workflow instead (``workflow_graph``: the workflow's own steps, ``"source": "workflow"``).
- ``GET /ui-api/runs/{run_id}/tasks/{task_id}/log?offset=N``: the task's log from byte ``N``,
  as ``millpond runs logs`` reads it; the UI follows it by asking again from the returned offset.
- ``GET /favicon.ico``: the UI's icon.
- ``GET /ui-api/queues``: every ClusterQueue as ``millpond queue list -o json`` shows it (quota and
  usage per flavor and resource as quantities, policies, the LocalQueues reaching it, the
  workloads holding quota and the pending ones with reason and position), for the Queues page.
- ``GET /ui-api/runs/{run_id}/artifacts?uri=URI``: the content of one output artifact file, for
  the previews (Markdown, HTML, images). Only a URI the store recorded for this run (an artifact
  row, or an artifact in one of its tasks' outputs) is read, never an arbitrary path; at most
  ``MAX_PREVIEW_BYTES``. It is sent as ``text/plain`` (images as themselves) with
  ``Content-Security-Policy: sandbox`` and ``nosniff``: opened directly, an HTML artifact cannot run
  script on the UI's origin; the UI shows it in an ``<iframe sandbox="">``.

Multi-user mode (``route_access``): a run's graph is KFP's ``get`` on ``runs`` in the run's namespace, its
tasks' logs and artifacts KFP's ``readArtifact`` on ``runs`` there (what KFP's UI server asks before it reads
an artifact); another namespace's run is refused (403) with nothing read. The Queues page shows a
ClusterQueue to whoever may ``get`` ClusterQueues, or reaches it through a LocalQueue of a namespace where
it may ``list`` LocalQueues; inside, the LocalQueues and the admitted and pending workloads of the
namespaces where it may ``list`` LocalQueues (a workload is its LocalQueue's), so no other namespace's
names show (the counts and quota figures are the queue's own).

The log path comes from the store, never from the request. Secrets never reach these
answers: tasks get them as files or environment variables, not as inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse

from millpond.access import kfp
from millpond.access.attributes import Attributes
from millpond.scheduling.queues.views import current, queue_views
from millpond.server.errors import ApiError
from millpond.server.ir_graph import ir_nodes
from millpond.server.kfp_access import check_run
from millpond.server.route_access import allows, list_scope, shows
from millpond.server.runs import run_view
from millpond.server.security import UI_FILE_NAME
from millpond.server.state import state_of
from millpond.server.workflow_graph import parsed_workflow, workflow_nodes
from millpond.store.artifacts import filesystem, is_remote, remote_key
from millpond.store.journal import FINAL_STATES

router = APIRouter()
_STATIC = Path(__file__).parent / "ui"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
_MAX_LOG_CHUNK = 512 * 1024
MAX_PREVIEW_BYTES = 5 * 1024 * 1024
_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}


# The page's own policy: its scripts and styles come from this server only, never inline script (a name that
# slipped into the page as HTML could not run), its data from this origin, and no other site may frame it.
# Inline style attributes stay allowed (bars' widths); images may be blobs (artifact previews).
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; "
            "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return FileResponse(_STATIC / "index.html", media_type="text/html",
                        headers={"Cache-Control": "no-cache", "Content-Security-Policy": PAGE_CSP})


FAVICON = _STATIC / "favicon.ico"


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> FileResponse:
    """The UI's icon (a 32x32 PNG inside an ICO), where browsers ask for it and where index.html links it."""
    return FileResponse(FAVICON, media_type="image/x-icon", headers={"Cache-Control": "max-age=86400"})


@router.get("/ui/{name:path}", include_in_schema=False)
def static_file(name: str) -> FileResponse:
    """A file of the UI: ``app.js`` and ``app.css``, and the ES modules it imports under ``lib/`` and ``pages/``.

    The name must be one of those folders' plain file names (no ``..``, no hidden file, no other
    folder), so nothing else under the package can be read through this route.
    """
    path = _STATIC / name
    if not UI_FILE_NAME.fullmatch(name) or path.suffix not in _TYPES or not path.is_file():
        raise ApiError(404, f"no UI file {name!r}")
    return FileResponse(path, media_type=_TYPES[path.suffix], headers={"Cache-Control": "no-cache"})


@router.get("/ui-api/queues", tags=["UI"])
def queues(request: Request) -> dict[str, Any]:
    """The Queues page: every ClusterQueue's quota and usage, policies, LocalQueues, holders and pending workloads."""
    views = queue_views(*current(state_of(request).settings))
    return {"queues": [shown for shown in (_visible_queue(request, view) for view in views) if shown is not None]}


KUEUE_GROUP = "kueue.x-k8s.io"


def _visible_queue(request: Request, view: dict[str, Any]) -> dict[str, Any] | None:
    """The ClusterQueue's view as the caller may see it (see the module's docstring), or None."""
    def namespace_of(key: str) -> str:
        return key.split("/", 1)[0]

    locals_ = list(view["localQueues"])
    workloads = [*view["admitted"], *view["pending"]]
    scope = list_scope(request, ((KUEUE_GROUP, "localqueues"),),
                       lambda: {namespace_of(key) for key in locals_} | {w["namespace"] for w in workloads})
    if scope is None:
        return view
    reached = [key for key in locals_ if namespace_of(key) in scope]
    if not reached and not allows(request, Attributes("get", "", KUEUE_GROUP, "clusterqueues", name=view["name"])):
        return None
    return {**view, "localQueues": reached,
            "admitted": [w for w in view["admitted"] if shows(scope, w["namespace"])],
            "pending": [w for w in view["pending"] if shows(scope, w["namespace"])]}


@router.get("/ui-api/runs/{run_id}/graph", tags=["UI"])
def run_graph(run_id: str, request: Request) -> dict[str, Any]:
    """The run (without its spec) and its DAG's nodes, each with ``path``, ``parent``, ``deps`` and its record."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.GET)  # multi-user: a run of the caller's namespaces
    tasks = {task.path: task for task in server.store.list_tasks(run.id)}
    final = run.state in FINAL_STATES
    workflow = parsed_workflow(run.workflow) if run.workflow is not None else None
    view = run_view(run, full=False)
    view["pipeline_name"] = run.pipeline_name
    if workflow is not None:  # kfp 1.x: the workflow's own steps, as v1's UI drew them
        return {"run": view, "nodes": workflow_nodes(workflow, tasks, ended=final), "final": final,
                "source": "workflow"}
    return {"run": view, "nodes": ir_nodes(run.pipeline_spec or {}, tasks), "final": final, "source": "ir"}


@router.get("/ui-api/runs/{run_id}/tasks/{task_id}/log", tags=["UI"])
def task_log(run_id: str, task_id: str, request: Request, offset: int = 0) -> dict[str, Any]:
    """The task's log from byte ``offset`` (at most 512 KiB a call).

    ``done`` once the task is final and read to the end.
    """
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.READ_ARTIFACT)  # multi-user: as KFP reads a run's outputs
    task = server.store.get_task(run.id, task_id)
    if offset < 0:
        raise ApiError(400, "offset must not be negative")
    path = Path(task.log_path or "")
    text, size = "", offset
    if task.log_path and path.is_file():
        with open(path, "rb") as log:
            size = log.seek(0, 2)
            start = min(offset, size)
            log.seek(start)
            data = log.read(_MAX_LOG_CHUNK)
        text, size = data.decode("utf-8", errors="replace"), start + len(data)
        final_size = path.stat().st_size
    else:
        final_size = size
    return {"text": text, "offset": size, "has_log": bool(task.log_path),
            "done": task.state in FINAL_STATES and size >= final_size}


@router.get("/ui-api/runs/{run_id}/artifacts", tags=["UI"])
def artifact_content(run_id: str, request: Request, uri: str) -> Response:
    """One output artifact file of the run, by its URI as the store recorded it (at most 5 MiB)."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.READ_ARTIFACT)  # multi-user: KFP's readArtifact on the run
    if uri not in server.store.run_artifact_uris(run.id):
        raise ApiError(404, f"no artifact {uri!r} in run {run.id}")
    data = read_artifact(uri)
    media = _IMAGES.get(Path(uri.split("?", 1)[0]).suffix.lower(), "text/plain; charset=utf-8")
    return Response(data, media_type=media, headers={
        "Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


def read_artifact(uri: str) -> bytes:
    too_big = ApiError(413, f"artifact {uri!r} is over {MAX_PREVIEW_BYTES // (1024 * 1024)} MiB: too big to preview")
    if is_remote(uri):
        try:
            fs = filesystem(uri)
            key = remote_key(uri)
            if not fs.isfile(key):
                raise ApiError(404, f"artifact {uri!r} is not a file")
            if (fs.size(key) or 0) > MAX_PREVIEW_BYTES:
                raise too_big
            with fs.open(key, "rb") as remote:
                return remote.read(MAX_PREVIEW_BYTES + 1)[:MAX_PREVIEW_BYTES]
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001  s3fs/botocore errors come in many types
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ApiError(502, f"could not read {uri}: {why}") from None
    path = Path(uri.removeprefix("file://"))
    if not path.is_file():
        raise ApiError(404, f"artifact {uri!r} is not a file (a folder, or gone)")
    if path.stat().st_size > MAX_PREVIEW_BYTES:
        raise too_big
    with open(path, "rb") as local:
        return local.read(MAX_PREVIEW_BYTES)
