"""What every kind family gives the one registry of kinds: a :class:`KindHandler`, and the records it trades.

In the spirit of Fluid's ``pkg/ddc/base`` (an ``Engine`` the controller calls beside an
``Implement`` each runtime provides, the shared steps written once): ``millpond apply``/``get``/
``delete``/``describe`` and the server's ``/apis/millpond/v1`` routes call a handler and never
look at which family it is; each family (``datasets``, ``training``, ``scheduling.queues``,
``serving``) writes one handler in its ``handler`` module and registers it once
(``millpond.kinds.REGISTRY.register_handler``). A new kind is one module that does the same
(``docs/development/adding-a-kind.md``).

The records here are plain data, so the floor stays below every layer: the handler reaches its
own stores through ``KindContext.settings``; the schema validator and the batch's planned
Secrets, which live in layers above some families, come in with the :class:`ApplyBatch`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from millpond.settings import Settings

Document = tuple[str, int, Any]  # (source: a file, STDIN or "request body"; document number from 1; the document)
SchemaCheck = Callable[[Path, dict[str, Any]], None]  # a JSON Schema file and a document; UserError names the field


@dataclass(frozen=True)
class KindName:
    """One kind's names and owner (the package whose handler checks, stores and shows its objects)."""

    kind: str
    plural: str
    group: str
    versions: tuple[str, ...]
    owner: str
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = False
    # Its status always describes its current spec: the family resets it within the apply that changes the spec,
    # so the Kubernetes API shows ``status.observedGeneration`` = ``metadata.generation`` (KServe's SDK waits on it).
    status_follows_spec: bool = False

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``dataset.data.fluid.io``; a core kind (group "")
        has no group part: ``pod``."""
        return f"{self.kind.lower()}.{self.group}" if self.group else self.kind.lower()

    def not_found(self, name: str, namespace: str) -> str:
        """kubectl's line for a missing object: ``pytorchjobs.kubeflow.org "x" not found`` (``pods "x" not found``)."""
        plural = f"{self.plural}.{self.group}" if self.group else self.plural
        return f'{plural} "{name}" not found' + (f' in namespace "{namespace}"' if namespace != "default" else "")

    def spellings(self) -> list[str]:
        """Every name kubectl accepts: ``NAME``, ``NAME.GROUP``, ``NAME.VERSION.GROUP`` (a core kind: only
        ``NAME`` and ``NAME.VERSION``, as ``pods.v1``)."""
        names = [self.kind.lower(), self.plural, *self.short_names]
        if not self.group:
            return [*names, *(f"{name}.{version}" for name in names for version in self.versions)]
        return [*names, *(f"{name}.{self.group}" for name in names),
                *(f"{name}.{version}.{self.group}" for name in names for version in self.versions)]


class SecretLookup(Protocol):
    """The Secrets and ConfigMaps a manifest may name, the batch's own included (``store.config_documents``):
    ``in_namespace(ns)`` is the lookup of an object of namespace ``ns`` (``store.secrets``)."""

    def get(self, kind: str, name: str) -> dict[str, str]: ...

    def in_namespace(self, namespace: str) -> SecretLookup: ...


@dataclass(frozen=True)
class KindContext:
    """Where a handler finds its objects (``settings``: the millpond home) and who asks (``user``: "" = the OS user)."""

    settings: Settings
    user: str = ""


@dataclass(frozen=True)
class ApplyBatch:
    """One ``apply``: checked all, then stored all. ``validate`` is ``datasets.schema_check.check_schema_file``,
    passed in because the queue family sits below it; ``secrets`` sees the batch's planned Secrets."""

    context: KindContext
    validate: SchemaCheck
    secrets: SecretLookup


@dataclass(frozen=True)
class Note:
    """An info line of an apply: ``text`` about ``subjects`` (``ClusterQueue alice``); none: the text says it all."""

    text: str
    subjects: tuple[str, ...] = ()

    def grouped(self) -> str:
        """One line naming every subject (the CLI's ``info:`` line)."""
        return f"{', '.join(dict.fromkeys(self.subjects))}: {self.text}" if self.subjects else self.text

    def each(self) -> list[str]:
        """A line per subject (the server's ``notes``)."""
        return [f"{subject}: {self.text}" for subject in self.subjects] if self.subjects else [self.text]


@dataclass(frozen=True)
class Applied:
    """One object an apply stored: ``action`` is created, configured or unchanged; ``started`` when it began
    running (a data operation, a job); ``uid`` where the family shows it in the answer."""

    kind: KindName
    name: str
    namespace: str
    action: str
    started: bool = False
    uid: str | None = None

    @property
    def message(self) -> str:
        """kubectl's line: ``dataset.data.fluid.io/mnist created``."""
        return f"{self.kind.resource}/{self.name} {self.action}"


@dataclass(frozen=True)
class ApplyOutcome:
    applied: list[Applied] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


class ApplyPlan(Protocol):
    """A family's documents of one batch, checked; ``apply`` stores (and starts) them."""

    def apply(self, batch: ApplyBatch) -> ApplyOutcome: ...


@dataclass(frozen=True)
class Table:
    """``millpond get``'s table: headers (NAMESPACE first with ``-A``) and rows; no rows: nothing found."""

    headers: tuple[str, ...]
    rows: list[list[str]]

    @classmethod
    def listing(cls, headers: tuple[str, ...], rows: Sequence[tuple[str, list[str]]], *, cluster_scoped: bool,
                all_namespaces: bool) -> Table:
        """The table of a ``get``: ``rows`` pairs each object's namespace with its cells; kubectl's NAMESPACE
        column leads only with ``-A`` and only for a namespaced kind (a cluster-scoped object has none)."""
        table = cls(headers, [cells for _, cells in rows])
        if all_namespaces and not cluster_scoped:
            return table.with_namespaces([namespace for namespace, _ in rows])
        return table

    def with_namespaces(self, namespaces: Sequence[str]) -> Table:
        """The table led by kubectl's NAMESPACE column (``get -A``), one namespace per row."""
        return Table(("NAMESPACE", *self.headers),
                     [[namespace, *cells] for namespace, cells in zip(namespaces, self.rows, strict=True)])


@dataclass(frozen=True)
class KindEvent:
    """One line of ``describe``'s Events: kubectl's Type (Normal, Warning), Reason, Age, From and Message."""

    type: str
    reason: str
    age: str
    source: str
    message: str
    at: dt.datetime | None = None  # when it happened, where the family keeps it (the v1 Event's timestamps)


class KindHandler(Protocol):
    """What the CLI and the server call for every object of the kinds a family registers.

    - ``kinds``/``refused``: the names resolved (``millpond.kinds``), and kinds refused with a reason.
    - ``apply_order``: batches are checked and stored family by family in this order (Kueue's
      queues before the jobs that name them).
    - ``claims``: whether a document of ``apply`` is this family's (a refused kind included).
    - ``check``: schema, then the webhook's rules; nothing stored; UserError is one line.
    - ``get``/``list_objects``: objects as ``kubectl get -o json`` shows them (metadata with uid,
      generation, resourceVersion, creationTimestamp, labels, annotations where kept; spec; status).
      ``get`` raises NotFoundError (kubectl's line) when there is none.
    - ``table``/``printer_columns``: ``millpond get``'s columns (the CRD's ``additionalPrinterColumns``).
    - ``delete``: forget it, cascading as its controller does (a Dataset's operations and cache).
    - ``status``/``events``: what ``describe`` shows under Status, Conditions and Events.
    """

    @property
    def owner(self) -> str: ...

    @property
    def apply_order(self) -> int: ...

    @property
    def kinds(self) -> tuple[KindName, ...]: ...

    @property
    def refused(self) -> Mapping[str, str]: ...

    def claims(self, doc: object) -> bool: ...

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> ApplyPlan: ...

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]: ...

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]: ...

    def printer_columns(self, kind: KindName) -> tuple[str, ...]: ...

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table: ...

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None: ...

    def status(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]: ...

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]: ...


class HandlerBase:
    """The steps most families share, written once: ``status`` is the shown object's, and no events (a
    family that records events overrides ``events``)."""

    kinds: tuple[KindName, ...] = ()
    refused: Mapping[str, str] = {}

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        raise NotImplementedError

    def status(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        shown = self.get(kind, name, namespace, context).get("status")
        return dict(shown) if isinstance(shown, dict) else {}

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        return []
