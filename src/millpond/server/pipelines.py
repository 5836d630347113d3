"""Pipelines and pipeline versions: IR documents uploaded once and run many times.

``kfp.Client().upload_pipeline`` posts a multipart ``uploadfile`` (IR YAML or JSON, a kfp 1.x
Argo workflow, or a ``.tar.gz``/``.zip`` package holding one as ``pipeline.yaml``) to
``/pipelines/upload``, which creates the pipeline and its first version; ``upload_pipeline_version``
adds versions. Every document is validated with millpond's loader before it is stored, so a bad
file answers 400 at upload rather than when a run starts. A run from a ``pipeline_version_reference`` copies the
version's spec (see ``runs.create_run``), so deleting a version never breaks its runs.

In multi-user mode a pipeline is shared (namespace ``""``: every user reads it, only who may edit
pipelines in KFP's namespace writes it) or belongs to a namespace (KFP 2.x), and every call is
authorized on ``pipelines`` as KFP's ``canAccessPipeline`` does (``kfp_access.check_pipeline``).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, UploadFile
from pydantic import BaseModel, ConfigDict

from millpond.access import kfp
from millpond.errors import UserError
from millpond.pipelines import start
from millpond.pipelines.argo.package import GZIP_MAGIC, ZIP_MAGIC, unpack
from millpond.pipelines.loader import LoadedPipeline, load_ir_text
from millpond.server.errors import ApiError
from millpond.server.kfp_access import check_pipeline, multi_user
from millpond.server.listing import list_query, next_page_token
from millpond.server.namespaces import BodyNamespace
from millpond.server.state import ServerState, state_of
from millpond.store.catalog import MAX_NAME, VersionDraft
from millpond.store.models import Pipeline, PipelineVersion
from millpond.store.timestamps import iso

router = APIRouter(tags=["PipelineService"])
MAX_PACKAGE_BYTES = 32 * 1024 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PipelineBody(_Body):
    display_name: str | None = None
    name: str | None = None
    description: str | None = None
    namespace: BodyNamespace = None
    tags: dict[str, str] | None = None
    # output-only, echoed back by clients
    pipeline_id: str | None = None
    created_at: str | None = None
    error: dict[str, Any] | None = None


class PackageUrl(_Body):
    pipeline_url: str | None = None


class PipelineVersionBody(_Body):
    display_name: str | None = None
    name: str | None = None
    description: str | None = None
    package_url: PackageUrl | None = None
    code_source_url: str | None = None
    pipeline_spec: dict[str, Any] | None = None
    tags: dict[str, str] | None = None
    # output-only, echoed back by clients
    pipeline_id: str | None = None
    pipeline_version_id: str | None = None
    created_at: str | None = None
    error: dict[str, Any] | None = None


class PipelineAndVersionBody(_Body):
    pipeline: PipelineBody
    pipeline_version: PipelineVersionBody


def pipeline_view(pipeline: Pipeline) -> dict[str, Any]:
    return {"pipeline_id": pipeline.id, "name": pipeline.name, "display_name": pipeline.display_name,
            "description": pipeline.description or "", "created_at": iso(pipeline.created_at),
            "namespace": pipeline.namespace}


def version_view(version: PipelineVersion, full: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "pipeline_id": version.pipeline_id, "pipeline_version_id": version.id, "name": version.name,
        "display_name": version.display_name, "description": version.description or "",
        "created_at": iso(version.created_at),
    }
    if full:  # KFP's form: the IR alone, or both documents when there is a platform spec
        view["pipeline_spec"] = (
            {"pipeline_spec": version.pipeline_spec, "platform_spec": version.platform_spec}
            if version.platform_spec else version.pipeline_spec
        )
        if version.workflow is not None:  # a kfp 1.x upload: its workflow, as Kubeflow's v2 backend returns it
            view["pipeline_spec"] = version.workflow
    return view


def resolve_version(server: ServerState, pipeline_id: str | None, version_id: str | None) -> PipelineVersion:
    """The version a request names: by id, or the pipeline's newest when only the pipeline is given."""
    return start.resolve_version(server.pipelines, pipeline_id, version_id)


def readable_version(request: Request, pipeline_id: str | None, version_id: str | None,
                     verb: str = kfp.GET) -> PipelineVersion:
    """``resolve_version``, the caller allowed to ``verb`` its pipeline (``canAccessPipelineVersion``)."""
    server = state_of(request)
    version = resolve_version(server, pipeline_id, version_id)
    _pipeline(request, version.pipeline_id, verb)
    return version


def _pipeline(request: Request, pipeline_id: str, verb: str) -> Pipeline:
    """The pipeline of this id, the caller allowed to ``verb`` it."""
    pipeline = state_of(request).pipelines.get_pipeline(pipeline_id)
    check_pipeline(request, pipeline.namespace, verb, pipeline)
    return pipeline


def _new_namespace(request: Request, namespace: str | None, name: str) -> str:
    """The namespace a new pipeline goes to, the caller allowed to create there: the one named (multi-user
    mode), ``""`` (shared) when none is or in single-user mode (KFP's ``ReplaceNamespace``)."""
    chosen = (namespace or "") if multi_user(request) else ""
    check_pipeline(request, chosen, kfp.CREATE, name=name)
    return chosen


# --- uploads (multipart, what kfp.Client uses) ---------------------------------------------

# Uploads are plain ``def`` routes: FastAPI runs them in its threadpool, so parsing a large or
# hostile document never stalls the event loop (and with it every other request).
@router.post("/pipelines/upload", tags=["PipelineUploadService"])
def upload_pipeline(
    request: Request, uploadfile: UploadFile, name: str | None = None, display_name: str | None = None,
    description: str | None = None, namespace: str | None = None, tags: str | None = None,
) -> dict[str, Any]:
    """Create a pipeline and its first version (named as the pipeline) from an uploaded package."""
    data = _read(uploadfile)
    loaded = _validate(data, uploadfile.filename or "upload")
    name = _name(name, display_name, uploadfile.filename)
    chosen = _new_namespace(request, namespace, name)
    first = _draft(name, display_name or name, description, loaded)
    return pipeline_view(state_of(request).pipelines.create_pipeline(name, display_name or name, description, first,
                                                                     chosen))


@router.post("/pipelines/upload_version", tags=["PipelineUploadService"])
def upload_pipeline_version(
    request: Request, uploadfile: UploadFile, pipelineid: str | None = None, name: str | None = None,
    display_name: str | None = None, description: str | None = None, tags: str | None = None,
) -> dict[str, Any]:
    if not pipelineid:
        raise ApiError(400, "pipelineid is required: the id of the pipeline to add a version to")
    _pipeline(request, pipelineid, kfp.CREATE)
    data = _read(uploadfile)
    loaded = _validate(data, uploadfile.filename or "upload")
    name = _name(name, display_name, uploadfile.filename)
    draft = _draft(name, display_name or name, description, loaded)
    return version_view(state_of(request).pipelines.add_version(pipelineid, draft))


# --- JSON creates ----------------------------------------------------------------------------

@router.post("/pipelines")
def create_pipeline(body: PipelineBody, request: Request) -> dict[str, Any]:
    name = _name(body.name, body.display_name, None)
    chosen = _new_namespace(request, body.namespace, name)
    return pipeline_view(state_of(request).pipelines.create_pipeline(name, body.display_name or name, body.description,
                                                                     namespace=chosen))


@router.post("/pipelines/create")
def create_pipeline_and_version(body: PipelineAndVersionBody, request: Request) -> dict[str, Any]:
    name = _name(body.pipeline.name, body.pipeline.display_name, None)
    chosen = _new_namespace(request, body.pipeline.namespace, name)
    loaded = _version_document(body.pipeline_version)
    version_name = body.pipeline_version.name or body.pipeline_version.display_name or name
    first = _draft(version_name, body.pipeline_version.display_name or version_name,
                   body.pipeline_version.description, loaded)
    pipeline = state_of(request).pipelines.create_pipeline(name, body.pipeline.display_name or name,
                                                           body.pipeline.description, first, chosen)
    return pipeline_view(pipeline)


@router.post("/pipelines/{pipeline_id}/versions")
def create_pipeline_version(pipeline_id: str, body: PipelineVersionBody, request: Request) -> dict[str, Any]:
    pipeline = _pipeline(request, pipeline_id, kfp.CREATE)
    loaded = _version_document(body)
    store = state_of(request).pipelines
    name = body.name or body.display_name or f"{pipeline.name}-{store.count_versions(pipeline.id) + 1}"
    draft = _draft(name, body.display_name or name, body.description, loaded)
    return version_view(store.add_version(pipeline.id, draft))


# --- reads and deletes -----------------------------------------------------------------------

@router.get("/pipelines")
def list_pipelines(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    query = list_query(filter, sort_by, page_token, page_size)
    scope = (namespace or "") if multi_user(request) else None  # a namespace's, or the shared ones ("")
    check_pipeline(request, scope or "", kfp.LIST)
    page = state_of(request).pipelines.page_pipelines(query, scope)
    return {"pipelines": [pipeline_view(p) for p in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/pipelines/names/{name}")
def get_pipeline_by_name(name: str, request: Request, namespace: str | None = None) -> dict[str, Any]:
    scope = (namespace or "") if multi_user(request) else None
    check_pipeline(request, scope or "", kfp.GET, name=name)
    pipeline = state_of(request).pipelines.pipeline_named(name, scope)
    if pipeline is None:
        raise ApiError(404, f"no pipeline named {name!r}")
    return pipeline_view(pipeline)


@router.get("/pipelines/{pipeline_id}")
def get_pipeline(pipeline_id: str, request: Request) -> dict[str, Any]:
    return pipeline_view(_pipeline(request, pipeline_id, kfp.GET))


@router.delete("/pipelines/{pipeline_id}")
def delete_pipeline(pipeline_id: str, request: Request, cascade: bool = False) -> dict[str, Any]:
    """As Kubeflow: refused while the pipeline has versions, unless ``cascade=true``."""
    store = state_of(request).pipelines
    pipeline = _pipeline(request, pipeline_id, kfp.DELETE)
    versions = store.count_versions(pipeline.id)
    if versions and not cascade:
        raise ApiError(
            412, f"pipeline {pipeline.name!r} has {versions} version(s); delete them first or pass cascade=true"
        )
    store.delete_pipeline(pipeline.id)
    return {}


@router.get("/pipelines/{pipeline_id}/versions")
def list_pipeline_versions(
    pipeline_id: str, request: Request, page_token: str | None = None, page_size: int | None = None,
    sort_by: str | None = None, filter: str | None = None,
) -> dict[str, Any]:
    query = list_query(filter, sort_by, page_token, page_size)
    _pipeline(request, pipeline_id, kfp.LIST)
    page = state_of(request).pipelines.page_versions(pipeline_id, query)
    return {"pipeline_versions": [version_view(v) for v in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/pipelines/{pipeline_id}/versions/{pipeline_version_id}")
def get_pipeline_version(pipeline_id: str, pipeline_version_id: str, request: Request) -> dict[str, Any]:
    return version_view(readable_version(request, pipeline_id, pipeline_version_id))


@router.delete("/pipelines/{pipeline_id}/versions/{pipeline_version_id}")
def delete_pipeline_version(pipeline_id: str, pipeline_version_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    server.pipelines.delete_version(readable_version(request, pipeline_id, pipeline_version_id, kfp.DELETE).id)
    return {}


# --- helpers ---------------------------------------------------------------------------------

def _name(name: str | None, display_name: str | None, filename: str | None) -> str:
    chosen = (name or display_name or "").strip()
    if not chosen and filename:
        chosen = Path(filename).name.split(".")[0].strip()
    if not chosen:
        raise ApiError(400, "a pipeline needs a name (query 'name' or 'display_name')")
    if len(chosen) > MAX_NAME:
        raise ApiError(400, f"name is over {MAX_NAME} characters: {chosen[:40]}...")
    return chosen


def _read(upload: UploadFile) -> bytes:
    data = upload.file.read(MAX_PACKAGE_BYTES + 1)
    if len(data) > MAX_PACKAGE_BYTES:
        raise ApiError(400, f"uploadfile is over {MAX_PACKAGE_BYTES // (1024 * 1024)} MiB")
    if not data.strip():
        raise ApiError(400, "uploadfile is empty: expected a KFP pipeline spec (YAML or JSON)")
    return data


def _validate(data: bytes, source: str) -> LoadedPipeline:
    """The IR (and platform spec, or kfp 1.x workflow) of a package, validated; a bad one answers 400."""
    text = _unpack(data, source)
    try:
        return load_ir_text(text, source)
    except UserError as exc:
        raise ApiError(400, f"invalid pipeline package: {exc}") from None


def _draft(name: str, display_name: str, description: str | None, loaded: LoadedPipeline) -> VersionDraft:
    return VersionDraft(name, display_name, description, loaded.spec, loaded.platform_spec, loaded.workflow)


def _unpack(data: bytes, source: str) -> str:
    """The YAML text of a package: the file itself, or the ``pipeline.yaml`` inside a .tar.gz or .zip.

    Archives are read by ``argo.package.unpack`` (what the CLI reads them with): in memory, bounded
    while decompressing (a zip or gzip bomb stops at its limit), refused when a member's name plays
    path tricks (``..``, absolute, a link).
    """
    if data[:2] == GZIP_MAGIC or data[:4] == ZIP_MAGIC:
        try:
            return unpack(data, source)
        except UserError as exc:
            raise ApiError(400, f"invalid pipeline package: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, f"invalid pipeline package {source}: not UTF-8 text") from None


def _version_document(body: PipelineVersionBody) -> LoadedPipeline:
    """A JSON-created version's IR: inline ``pipeline_spec``, or fetched from ``package_url``."""
    if body.pipeline_spec is not None:
        spec = body.pipeline_spec
        platform = None
        if "pipeline_spec" in spec:
            spec, platform = spec["pipeline_spec"], spec.get("platform_spec")
        text = json.dumps(spec) + ("\n---\n" + json.dumps(platform) if platform else "")
        return _validate(text.encode(), "pipeline_spec")
    url = body.package_url.pipeline_url if body.package_url else None
    if not url:
        raise ApiError(400, "a pipeline version needs package_url.pipeline_url or pipeline_spec")
    try:
        parsed = urllib.parse.urlparse(url)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL"
        raise ApiError(400, f"package_url {url!r} is not a valid URL ({exc})") from None
    try:
        if parsed.scheme in ("http", "https"):
            with urllib.request.urlopen(url, timeout=30) as response:
                data = response.read(MAX_PACKAGE_BYTES + 1)
        elif parsed.scheme in ("", "file"):
            data = Path(urllib.parse.unquote(parsed.path) if parsed.scheme else url).read_bytes()
        else:
            raise ApiError(400, f"package_url {url!r}: only http(s), file:// and local paths are supported")
    except OSError as exc:
        raise ApiError(400, f"package_url {url!r} could not be read: {exc}") from None
    if len(data) > MAX_PACKAGE_BYTES:
        raise ApiError(400, f"package_url {url!r} is over {MAX_PACKAGE_BYTES // (1024 * 1024)} MiB")
    return _validate(data, Path(parsed.path).name or url)
