"""Pipelines and pipeline versions: IR documents uploaded once and run many times.

``kfp.Client().upload_pipeline`` posts a multipart ``uploadfile`` (IR YAML or JSON, or a
``.tar.gz``/``.zip`` package holding one) to ``/pipelines/upload``, which creates the
pipeline and its first version; ``upload_pipeline_version`` adds versions. Every document is
validated with millpond's loader before it is stored, so a bad file answers 400 at upload
rather than when a run starts. A run from a ``pipeline_version_reference`` copies the
version's spec (see ``runs.create_run``), so deleting a version never breaks its runs.
"""

from __future__ import annotations

import io
import tarfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, UploadFile
from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from millpond.server.app import state_of
from millpond.server.errors import ApiError
from millpond.server.listing import apply_filter, apply_sort, page
from millpond.store.models import Pipeline, PipelineVersion
from millpond.store.timestamps import iso

router = APIRouter(tags=["PipelineService"])
_PIPELINE_COLUMNS = {"display_name": Pipeline.display_name, "name": Pipeline.name, "pipeline_id": Pipeline.id,
                     "id": Pipeline.id, "created_at": Pipeline.created_at, "description": Pipeline.description}
_VERSION_COLUMNS = {"display_name": PipelineVersion.display_name, "name": PipelineVersion.name,
                    "pipeline_version_id": PipelineVersion.id, "id": PipelineVersion.id,
                    "created_at": PipelineVersion.created_at, "description": PipelineVersion.description}
MAX_PACKAGE_BYTES = 32 * 1024 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PipelineBody(_Body):
    display_name: str | None = None
    name: str | None = None
    description: str | None = None
    namespace: str | None = None
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
            "description": pipeline.description or "", "created_at": iso(pipeline.created_at), "namespace": ""}


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
    return view


def resolve_version(session: Session, pipeline_id: str | None, version_id: str | None) -> PipelineVersion:
    """The version a run refers to: by id, or the pipeline's newest when only the pipeline is given."""
    if version_id:
        version = session.get(PipelineVersion, version_id)
        if version is None or (pipeline_id and version.pipeline_id != pipeline_id):
            raise ApiError(404, f"no pipeline version with id {version_id!r}"
                           + (f" in pipeline {pipeline_id!r}" if pipeline_id else ""))
        return version
    if not pipeline_id:
        raise ApiError(400, "pipeline_version_reference needs pipeline_id or pipeline_version_id")
    _find_pipeline(session, pipeline_id)
    newest = session.scalars(select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id)
                             .order_by(PipelineVersion.created_at.desc()).limit(1)).first()
    if newest is None:
        raise ApiError(412, f"pipeline {pipeline_id!r} has no versions to run")
    return newest


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
    spec, platform = _validate(data, uploadfile.filename or "upload")
    name = _name(name, display_name, uploadfile.filename)
    with state_of(request).sessions() as session:
        pipeline = _new_pipeline(session, name, display_name or name, description)
        session.add(_new_version(session, pipeline.id, name, display_name or name, description, spec, platform))
        session.commit()
        return pipeline_view(pipeline)


@router.post("/pipelines/upload_version", tags=["PipelineUploadService"])
def upload_pipeline_version(
    request: Request, uploadfile: UploadFile, pipelineid: str | None = None, name: str | None = None,
    display_name: str | None = None, description: str | None = None, tags: str | None = None,
) -> dict[str, Any]:
    if not pipelineid:
        raise ApiError(400, "pipelineid is required: the id of the pipeline to add a version to")
    data = _read(uploadfile)
    spec, platform = _validate(data, uploadfile.filename or "upload")
    name = _name(name, display_name, uploadfile.filename)
    with state_of(request).sessions() as session:
        _find_pipeline(session, pipelineid)
        version = _new_version(session, pipelineid, name, display_name or name, description, spec, platform)
        session.add(version)
        session.commit()
        return version_view(version)


# --- JSON creates ----------------------------------------------------------------------------

@router.post("/pipelines")
def create_pipeline(body: PipelineBody, request: Request) -> dict[str, Any]:
    name = _name(body.name, body.display_name, None)
    with state_of(request).sessions() as session:
        pipeline = _new_pipeline(session, name, body.display_name or name, body.description)
        session.commit()
        return pipeline_view(pipeline)


@router.post("/pipelines/create")
def create_pipeline_and_version(body: PipelineAndVersionBody, request: Request) -> dict[str, Any]:
    name = _name(body.pipeline.name, body.pipeline.display_name, None)
    spec, platform = _version_document(body.pipeline_version)
    version_name = body.pipeline_version.name or body.pipeline_version.display_name or name
    with state_of(request).sessions() as session:
        pipeline = _new_pipeline(session, name, body.pipeline.display_name or name, body.pipeline.description)
        session.add(_new_version(session, pipeline.id, version_name, body.pipeline_version.display_name or version_name,
                                 body.pipeline_version.description, spec, platform))
        session.commit()
        return pipeline_view(pipeline)


@router.post("/pipelines/{pipeline_id}/versions")
def create_pipeline_version(pipeline_id: str, body: PipelineVersionBody, request: Request) -> dict[str, Any]:
    spec, platform = _version_document(body)
    with state_of(request).sessions() as session:
        pipeline = _find_pipeline(session, pipeline_id)
        name = body.name or body.display_name or f"{pipeline.name}-{_count_versions(session, pipeline.id) + 1}"
        version = _new_version(session, pipeline.id, name, body.display_name or name, body.description, spec, platform)
        session.add(version)
        session.commit()
        return version_view(version)


# --- reads and deletes -----------------------------------------------------------------------

@router.get("/pipelines")
def list_pipelines(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    query = apply_sort(apply_filter(select(Pipeline), filter, _PIPELINE_COLUMNS), sort_by, _PIPELINE_COLUMNS,
                       Pipeline.created_at.asc())
    with state_of(request).sessions() as session:
        rows, total, token = page(session, query, page_token, page_size)
    return {"pipelines": [pipeline_view(p) for (p,) in rows], "total_size": total, "next_page_token": token}


@router.get("/pipelines/names/{name}")
def get_pipeline_by_name(name: str, request: Request, namespace: str | None = None) -> dict[str, Any]:
    with state_of(request).sessions() as session:
        pipeline = session.scalars(select(Pipeline).where(Pipeline.name == name)).first()
        if pipeline is None:
            pipeline = session.scalars(select(Pipeline).where(Pipeline.display_name == name)).first()
        if pipeline is None:
            raise ApiError(404, f"no pipeline named {name!r}")
        return pipeline_view(pipeline)


@router.get("/pipelines/{pipeline_id}")
def get_pipeline(pipeline_id: str, request: Request) -> dict[str, Any]:
    with state_of(request).sessions() as session:
        return pipeline_view(_find_pipeline(session, pipeline_id))


@router.delete("/pipelines/{pipeline_id}")
def delete_pipeline(pipeline_id: str, request: Request, cascade: bool = False) -> dict[str, Any]:
    """As Kubeflow: refused while the pipeline has versions, unless ``cascade=true``."""
    with state_of(request).sessions() as session:
        pipeline = _find_pipeline(session, pipeline_id)
        versions = _count_versions(session, pipeline.id)
        if versions and not cascade:
            raise ApiError(412, f"pipeline {pipeline.name!r} has {versions} version(s); delete them first or pass cascade=true")
        session.execute(delete(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline.id))
        session.execute(delete(Pipeline).where(Pipeline.id == pipeline.id))
        session.commit()
    return {}


@router.get("/pipelines/{pipeline_id}/versions")
def list_pipeline_versions(
    pipeline_id: str, request: Request, page_token: str | None = None, page_size: int | None = None,
    sort_by: str | None = None, filter: str | None = None,
) -> dict[str, Any]:
    query = select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id)
    query = apply_sort(apply_filter(query, filter, _VERSION_COLUMNS), sort_by, _VERSION_COLUMNS,
                       PipelineVersion.created_at.asc())
    with state_of(request).sessions() as session:
        _find_pipeline(session, pipeline_id)
        rows, total, token = page(session, query, page_token, page_size)
    return {"pipeline_versions": [version_view(v) for (v,) in rows], "total_size": total, "next_page_token": token}


@router.get("/pipelines/{pipeline_id}/versions/{pipeline_version_id}")
def get_pipeline_version(pipeline_id: str, pipeline_version_id: str, request: Request) -> dict[str, Any]:
    with state_of(request).sessions() as session:
        return version_view(resolve_version(session, pipeline_id, pipeline_version_id))


@router.delete("/pipelines/{pipeline_id}/versions/{pipeline_version_id}")
def delete_pipeline_version(pipeline_id: str, pipeline_version_id: str, request: Request) -> dict[str, Any]:
    with state_of(request).sessions() as session:
        version = resolve_version(session, pipeline_id, pipeline_version_id)
        session.execute(delete(PipelineVersion).where(PipelineVersion.id == version.id))
        session.commit()
    return {}


# --- helpers ---------------------------------------------------------------------------------

def _find_pipeline(session: Session, pipeline_id: str) -> Pipeline:
    pipeline = session.get(Pipeline, pipeline_id)
    if pipeline is None:
        raise ApiError(404, f"no pipeline with id {pipeline_id!r}")
    return pipeline


def _count_versions(session: Session, pipeline_id: str) -> int:
    return session.scalar(select(func.count()).where(PipelineVersion.pipeline_id == pipeline_id)) or 0


def _name(name: str | None, display_name: str | None, filename: str | None) -> str:
    chosen = (name or display_name or "").strip()
    if not chosen and filename:
        chosen = Path(filename).name.split(".")[0].strip()
    if not chosen:
        raise ApiError(400, "a pipeline needs a name (query 'name' or 'display_name')")
    if len(chosen) > 255:
        raise ApiError(400, f"name is over 255 characters: {chosen[:40]}...")
    return chosen


def _new_pipeline(session: Session, name: str, display_name: str, description: str | None) -> Pipeline:
    if session.scalar(select(Pipeline.id).where(Pipeline.name == name)):
        raise ApiError(409, f"pipeline {name!r} already exists; upload a version to it instead")
    pipeline = Pipeline(name=name, display_name=display_name[:255], description=description or "")
    session.add(pipeline)
    session.flush()
    return pipeline


def _new_version(
    session: Session, pipeline_id: str, name: str, display_name: str, description: str | None,
    spec: dict[str, Any], platform: dict[str, Any] | None,
) -> PipelineVersion:
    if len(name) > 255:
        raise ApiError(400, f"version name is over 255 characters: {name[:40]}...")
    taken = session.scalar(select(PipelineVersion.id).where(PipelineVersion.pipeline_id == pipeline_id,
                                                            PipelineVersion.name == name))
    if taken:
        raise ApiError(409, f"pipeline {pipeline_id!r} already has a version named {name!r}")
    return PipelineVersion(pipeline_id=pipeline_id, name=name, display_name=display_name[:255],
                           description=description or "", pipeline_spec=spec, platform_spec=platform)


def _read(upload: UploadFile) -> bytes:
    data = upload.file.read(MAX_PACKAGE_BYTES + 1)
    if len(data) > MAX_PACKAGE_BYTES:
        raise ApiError(400, f"uploadfile is over {MAX_PACKAGE_BYTES // (1024 * 1024)} MiB")
    if not data.strip():
        raise ApiError(400, "uploadfile is empty: expected a KFP pipeline spec (YAML or JSON)")
    return data


def _validate(data: bytes, source: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The IR (and platform spec) of a package, validated; a bad one answers 400 with one message."""
    from millpond.errors import UserError
    from millpond.pipelines.loader import load_ir_text

    text = _unpack(data, source)
    try:
        loaded = load_ir_text(text, source)
    except UserError as exc:
        raise ApiError(400, f"invalid pipeline package: {exc}") from None
    return loaded.spec, loaded.platform_spec


def _unpack(data: bytes, source: str) -> str:
    """The YAML text of a package: the file itself, or the one .yaml/.json inside a .tar.gz or .zip."""
    members: dict[str, bytes] = {}
    try:
        if data[:2] == b"\x1f\x8b":
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.name.endswith((".yaml", ".yml", ".json")):
                        extracted = archive.extractfile(member)
                        members[member.name] = extracted.read(MAX_PACKAGE_BYTES) if extracted else b""
        elif data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir() and info.filename.endswith((".yaml", ".yml", ".json")):
                        members[info.filename] = archive.read(info)
        else:
            members[source] = data
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ApiError(400, f"invalid pipeline package {source}: not a readable archive ({exc})") from None
    if len(members) != 1:
        raise ApiError(400, f"invalid pipeline package {source}: expected exactly one .yaml or .json file inside, found {len(members)}")
    try:
        return next(iter(members.values())).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, f"invalid pipeline package {source}: not UTF-8 text") from None


def _version_document(body: PipelineVersionBody) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A JSON-created version's IR: inline ``pipeline_spec``, or fetched from ``package_url``."""
    import json

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
