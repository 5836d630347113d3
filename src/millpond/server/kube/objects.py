"""Create, read, update, patch and delete any kind's objects, through its handler in the one registry.

Every write goes the way ``millpond apply -f`` goes (``REGISTRY.plan`` then ``plan.apply``: the
family's schema and webhook checks, then its store and controllers), so an object made with
``kubectl`` is the same object ``millpond get`` shows and millpond's supervisors run. What the API
adds is the API server's bookkeeping: resource versions and generations (``history``), optimistic
concurrency (409 on a stale ``resourceVersion``), ``dryRun``, ``fieldValidation``, ``generateName``,
field managers, and errors as ``Status`` objects (``status``).

Simplified, and said where it shows: ``ownerReferences`` and ``finalizers`` a client sets are not
kept (each family cascades deletes as its own controller does); ``propagationPolicy`` is read and
every delete cascades in the background as the default policy does; the ``status`` subresource is
read-only (millpond's controllers write status: a write answers 405).
"""

from __future__ import annotations

import copy
import datetime as dt
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from millpond.datasets.schema_check import check_schema_file
from millpond.documents import without_nulls
from millpond.errors import ConflictError, NotFoundError, UserError
from millpond.kind_handler import ApplyBatch, KindContext, KindHandler, KindName
from millpond.kinds import REGISTRY
from millpond.server.kube import fields, patches, ssa
from millpond.server.kube.history import Histories, KindHistory, key_of
from millpond.server.kube.selectors import Match
from millpond.server.kube.status import KubeError, already_exists, conflict, not_found
from millpond.settings import Settings
from millpond.store import config_documents
from millpond.store.secrets import ConfigStore

_SOURCE = "request body"
_GENERATED = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet (no vowels, no 0/1/3)


@dataclass(frozen=True)
class WriteOptions:
    """A write's query: ``dryRun=All``, ``fieldValidation``, ``fieldManager``, ``force`` (server-side apply); and
    ``admit``, what the object as it would be stored must pass (the API's admission: RBAC's escalation rules),
    raising the refusal."""

    dry_run: bool = False
    validation: str = "Strict"
    manager: str = ""
    force: bool = False
    admit: Callable[[KindName, dict[str, Any]], None] | None = None


@dataclass
class Written:
    """What a write answers: the object, the HTTP status (201 for a create) and ``Warning`` headers."""

    object: dict[str, Any]
    code: int = 200
    warnings: list[str] = field(default_factory=list)


class Resources:
    """Objects of every kind as the Kubernetes API serves them, over one millpond home."""

    def __init__(self, settings: Settings, histories: Histories) -> None:
        self.settings = settings
        self.histories = histories

    # -- reads ------------------------------------------------------------------------------------

    def history(self, kind: KindName) -> KindHistory:
        return self.histories.of(kind.kind, kind.status_follows_spec)

    def context(self, user: str) -> KindContext:
        return KindContext(self.settings, user)

    def sync(self, kind: KindName, user: str = "") -> tuple[int, list[dict[str, Any]]]:
        """Every object of the kind, all namespaces, observed by its history (changes logged for watches)."""
        objects = REGISTRY.handler(kind).list_objects(kind, "default", True, self.context(user))
        return self.history(kind).sync(_served(kind, obj) for obj in objects)

    def select(self, kind: KindName, namespace: str, match: Match, user: str = "") -> tuple[int, list[dict[str, Any]]]:
        version, objects = self.sync(kind, user)
        chosen = [obj for obj in objects
                  if (not namespace or key_of(obj)[0] == namespace) and match(obj)]
        return version, sorted(chosen, key=key_of)

    def get(self, kind: KindName, namespace: str, name: str, user: str = "") -> dict[str, Any]:
        handler = REGISTRY.handler(kind)
        try:
            obj = handler.get(kind, name, namespace or "default", self.context(user))
        except NotFoundError:
            raise not_found(_resource(kind), name) from None
        return self.history(kind).stamp(_served(kind, obj))

    def _live(self, kind: KindName, namespace: str, name: str, user: str) -> dict[str, Any] | None:
        try:
            return self.get(kind, namespace, name, user)
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    # -- writes -----------------------------------------------------------------------------------

    def create(self, kind: KindName, namespace: str, body: Any, options: WriteOptions, user: str = "") -> Written:
        doc = self._body(kind, namespace, body)
        meta = doc["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not isinstance(prefix, str) or not prefix:
                raise KubeError(422, f"{kind.kind}.{kind.group or 'core'} is invalid: metadata.name: Required value: "
                                     "name or generateName is required", "Invalid")
            meta["name"] = prefix[:58] + "".join(random.choices(_GENERATED, k=5))
        meta.pop("generateName", None)
        name = str(meta["name"])
        if self._live(kind, namespace, name, user) is not None:
            raise already_exists(_resource(kind), name, kind.group, kind.plural)
        written = self._store(kind, doc, options, user, before=None)
        written.code = 201
        return written

    def replace(self, kind: KindName, namespace: str, name: str, body: Any, options: WriteOptions,
                user: str = "") -> Written:
        doc = self._body(kind, namespace, body, name)
        live = self._live(kind, namespace, name, user)
        if live is None:
            raise not_found(_resource(kind), name)
        wanted = doc["metadata"].get("resourceVersion")
        if wanted and str(wanted) != live["metadata"]["resourceVersion"]:
            raise conflict(_resource(kind), name, kind.group, kind.plural)
        return self._store(kind, doc, options, user, before=live)

    def patch(self, kind: KindName, namespace: str, name: str, media: str, raw: bytes, options: WriteOptions,
              user: str = "") -> Written:
        live = self._live(kind, namespace, name, user)
        if media == patches.APPLY:
            return self._server_side_apply(kind, namespace, name, raw, live, options, user)
        if live is None:
            raise not_found(_resource(kind), name)
        body = patches.body_json(raw)
        base = copy.deepcopy(live)  # all of it: a JSON patch may test resourceVersion or replace managedFields
        if media == patches.MERGE:
            doc = patches.merge_patch(base, body)
        elif media == patches.JSON_PATCH:
            doc = patches.json_patch(base, body)
        elif media == patches.STRATEGIC:
            if kind.group not in _BUILT_IN_GROUPS:
                raise KubeError(415, f"the body of the request was in an unknown format - accepted media types "
                                     f"include: {', '.join(t for t in patches.TYPES if t != patches.STRATEGIC)}")
            doc = patches.strategic_merge_patch(base, body)
        else:
            raise KubeError(415, f"the body of the request was in an unknown format - accepted media types include: "
                                 f"{', '.join(patches.TYPES)}")
        if not isinstance(doc, dict):
            raise KubeError(422, "the patch leaves no object")
        meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
        if str(meta.get("resourceVersion", "")) not in ("", live["metadata"]["resourceVersion"]):
            raise conflict(_resource(kind), name, kind.group, kind.plural)
        entries = meta.get("managedFields")  # kubectl's migration of client-side apply's managers replaces them
        entries = entries if isinstance(entries, list) and entries != live["metadata"].get("managedFields") else None
        doc = self._body(kind, namespace, _without_stamps(doc), name)
        return self._store(kind, doc, options, user, before=live, entries=entries)

    def _server_side_apply(self, kind: KindName, namespace: str, name: str, raw: bytes, live: dict[str, Any] | None,
                           options: WriteOptions, user: str) -> Written:
        config = patches.body_yaml(raw)
        if not options.manager:
            raise KubeError(400, "PATCH with application/apply-patch+yaml requires fieldManager to be set")
        config = self._body(kind, namespace, config, name)
        history = self.history(kind)
        managed = history.managed(namespace, name) if live is not None else []
        merged, entries = ssa.apply(_without_stamps(live) if live else None, config, managed, options.manager,
                                    options.force, f"{kind.group}/{config['apiVersion'].rsplit('/', 1)[-1]}"
                                    if kind.group else "v1")
        merged = self._body(kind, namespace, merged, name)
        written = self._store(kind, merged, options, user, before=live, entries=entries)
        written.code = 201 if live is None else 200
        return written

    def _body(self, kind: KindName, namespace: str, body: Any, name: str = "") -> dict[str, Any]:
        """The request's object, checked against its URL, nulls pruned, namespace filled in."""
        if not isinstance(body, dict):
            raise KubeError(400, "the body of the request must be a JSON or YAML object")
        doc = without_nulls(copy.deepcopy(body))
        expected = f"{kind.group}/" if kind.group else ""
        if kind.group in _BUILT_IN_GROUPS:  # the API server fills a built-in kind's type from the URL (typed clients
            doc.setdefault("apiVersion", f"{expected}{kind.versions[0]}")  # such as the Python client's leave it
            doc.setdefault("kind", kind.kind)  # out); a custom resource must name it

        api_version = doc.get("apiVersion")
        if not (isinstance(api_version, str) and api_version.startswith(expected)
                and api_version[len(expected):] in kind.versions):
            raise KubeError(400, f"the API version in the data ({api_version}) does not match the expected API "
                                 f"version ({expected}{kind.versions[0]})")
        if doc.get("kind") != kind.kind:
            raise KubeError(400, f"the kind in the data ({doc.get('kind')}) does not match the kind of the URL "
                                 f"({kind.kind})")
        meta = doc.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise KubeError(400, "metadata: expected an object")
        if name and meta.get("name", name) != name:
            raise KubeError(400, f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                                 f"({name})")
        if name:
            meta["name"] = name
        if kind.cluster_scoped:
            meta.pop("namespace", None)
        else:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise KubeError(400, "the namespace of the provided object does not match the namespace sent on "
                                     "the request")
            meta["namespace"] = namespace
        return doc

    def _store(self, kind: KindName, doc: dict[str, Any], options: WriteOptions, user: str,
               before: dict[str, Any] | None, entries: list[dict[str, Any]] | None = None) -> Written:
        """Check ``doc`` as ``millpond apply`` does and (unless a dry run) store it; the object as served after."""
        name = str(doc["metadata"]["name"])
        namespace = str(doc["metadata"].get("namespace") or "")
        warnings: list[str] = []
        settings = self.settings
        batch = ApplyBatch(self.context(user), check_schema_file,
                           config_documents.WithPlanned(ConfigStore(settings.home), []))
        handler = REGISTRY.handler(kind)
        if options.admit is not None:
            options.admit(kind, doc)
        plan = self._checked(kind, handler, doc, batch, options, warnings)
        if options.dry_run:
            return Written(_dry_run(kind, doc, before), warnings=warnings)
        try:
            plan.apply(batch)
        except ConflictError as exc:
            raise KubeError(409, _one_line(exc), "Conflict") from None
        except UserError as exc:
            raise _invalid(kind, name, _without_source(_one_line(exc), kind.kind, name)) from None
        history = self.history(kind)
        manager = options.manager or "millpond"
        api_version = str(doc.get("apiVersion"))
        history_key_managed = entries if entries is not None else ssa.updated(
            _without_stamps(before) if before else None, doc, history.managed(namespace, name) if before else [],
            manager, api_version)
        shown = self.get(kind, namespace, name, user)
        history.set_managed(namespace, name, history_key_managed)
        shown["metadata"]["managedFields"] = history_key_managed
        return Written(shown, warnings=warnings)

    def _checked(self, kind: KindName, handler: KindHandler, doc: dict[str, Any], batch: ApplyBatch,
                 options: WriteOptions, warnings: list[str]) -> Any:
        """The family's plan for ``doc``; unknown fields refused (Strict) or dropped (Warn: with a warning)."""
        name = str(doc["metadata"]["name"])
        for _ in range(64):  # each round drops the fields one error line names
            try:
                plans = REGISTRY.plan([(_SOURCE, 1, doc)], batch)
                return _One(plans)
            except UserError as exc:
                message = _without_source(_one_line(exc), kind.kind, name)
                unknown = fields.unknown_fields(message)
                if not unknown:
                    raise _invalid(kind, name, message) from None
                if options.validation == "Strict" or not all(fields.drop(doc, path) for path in unknown):
                    version = str(doc.get("apiVersion", "")).rsplit("/", 1)[-1]
                    raise KubeError(400, f'{kind.kind} in version "{version}" cannot be handled as a {kind.kind}: '
                                         f"strict decoding error: {message.split(': ', 1)[-1]}") from None
                if options.validation == "Warn":
                    warnings.extend(f'unknown field "{path}"' for path in unknown)
        raise KubeError(422, f'{kind.kind} "{name}" is invalid: too many unknown fields')

    def delete(self, kind: KindName, namespace: str, name: str, dry_run: bool, user: str = "") -> dict[str, Any]:
        live = self._live(kind, namespace, name, user)
        if live is None:
            raise not_found(_resource(kind), name)
        if not dry_run:
            try:
                REGISTRY.handler(kind).delete(kind, name, namespace or "default", self.context(user))
            except NotFoundError:
                raise not_found(_resource(kind), name) from None
            except UserError as exc:
                raise KubeError(409, _one_line(exc), "Conflict") from None
            self.history(kind).forget(namespace, name)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": kind.group, "kind": kind.plural,
                            "uid": live["metadata"].get("uid", "")}}


class _One:
    """The plans of one document's apply (one family's; a document may bring none)."""

    def __init__(self, plans: list[Any]) -> None:
        self.plans = plans

    def apply(self, batch: ApplyBatch) -> None:
        for plan in self.plans:
            plan.apply(batch)


_BUILT_IN_GROUPS = frozenset({"", "batch", "apps", "rbac.authorization.k8s.io", "policy", "autoscaling",
                              "networking.k8s.io", "storage.k8s.io", "scheduling.k8s.io", "coordination.k8s.io"})


def _resource(kind: KindName) -> str:
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def _served(kind: KindName, obj: dict[str, Any]) -> dict[str, Any]:
    """A family's object as the API serves it: a cluster-scoped one names no namespace."""
    obj = dict(obj)
    meta = dict(obj.get("metadata") or {})
    if kind.cluster_scoped:
        meta.pop("namespace", None)
    obj["metadata"] = meta
    return obj


def _without_stamps(obj: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(obj)
    meta = result.get("metadata") or {}
    for key in ("resourceVersion", "generation", "managedFields", "uid", "creationTimestamp"):
        meta.pop(key, None)
    result.pop("status", None)
    return result


def _dry_run(kind: KindName, doc: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """What a dry run answers: the object as it would be stored (its server metadata made up or kept)."""
    shown = copy.deepcopy(doc)
    meta = shown["metadata"]
    old = (before or {}).get("metadata") or {}
    meta["uid"] = old.get("uid") or str(uuid.uuid4())
    meta["creationTimestamp"] = old.get("creationTimestamp") or dt.datetime.now(dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    meta["resourceVersion"] = old.get("resourceVersion", "")
    meta["generation"] = int(old.get("generation", 1))
    if before is not None and "status" in before:
        shown["status"] = copy.deepcopy(before["status"])  # a dry run changes what is asked, not what is observed
    return shown


def _without_source(message: str, kind: str, name: str) -> str:
    """A family's error line without what only ``millpond apply`` needs (which file, which document, which object):
    the API answers about one object, named in the Status."""
    message = re.sub(r"^request body: document \d+: ", "", message)
    for prefix in (f"{kind} {name}: ", f"{kind}: "):
        message = message.removeprefix(prefix)
    return message


def _invalid(kind: KindName, name: str, message: str) -> KubeError:
    """422 Invalid, its cause naming the field when the line starts with one (``spec.x: …``), as kubectl prints it."""
    found = re.match(r"((?:metadata|spec|status|data|stringData)(?:[.\[][^:\s]*)?): (.+)", message)
    cause: dict[str, Any] = {"reason": "FieldValueInvalid", "message": found[2] if found else message}
    if found:
        cause["field"] = found[1]
    return KubeError(422, f'{kind.kind} "{name}" is invalid: {message}', "Invalid",
                     {"name": name, "group": kind.group, "kind": kind.kind, "causes": [cause]})


def _one_line(exc: BaseException) -> str:
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or "invalid request"
