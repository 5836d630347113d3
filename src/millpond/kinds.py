"""The one registry of the kinds ``millpond apply``, ``get``, ``delete`` and ``describe`` (and the server's
resource routes) know: every name kubectl accepts for them, and the handler that serves each.

Each package that owns kinds registers its names when its ``kinds`` module is imported, and its
:class:`~millpond.kind_handler.KindHandler` once, when its ``handler`` module is: ``datasets``
(Fluid's ``data.fluid.io`` kinds), ``training`` (Kubeflow's), ``scheduling.queues`` (Kueue's
``kueue.x-k8s.io`` queueing kinds), ``kuberay`` (KubeRay's ``ray.io`` kinds), ``serving`` (KServe's
``serving.kserve.io`` InferenceService and serving runtimes), ``serving.seldon`` (Seldon Core's
``machinelearning.seldon.io`` SeldonDeployment), ``training.batch`` (Kubernetes' ``batch/v1``
Job), ``pods`` (``v1`` Pods: views of what runs) and ``core`` (Kubernetes' other built-in ``v1`` kinds,
RBAC's, and Kubeflow's Profile). The handler module sits
beside the family's ``kinds`` table (which its checks and objects import), so registering does not
make the table import what imports it; and a command that resolves a name loads only the light
tables, then only the handler of the family it reaches. A name is resolved here, with one error line
for an unknown one listing every known kind, and the caller calls the kind's handler: no dispatcher
asks which family a kind belongs to. It lives on the floor (it imports no layer) because every owner
must reach it, and they sit in different layers; it loads the owners' modules by name (``OWNERS``)
when first needed, as a plug-in table does, so a name resolves only once every owner has registered.

kubectl's spellings: the kind (any case), the plural, the CRD's short names, each of them also
as ``NAME.GROUP`` and ``NAME.VERSION.GROUP`` (``pytorchjobs.kubeflow.org``,
``dataset.v1alpha1.data.fluid.io``). Kubeflow's CRDs declare no short names, so kubectl knows
none for PyTorchJob & co; neither does millpond.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from millpond.documents import without_nulls
from millpond.errors import MillpondError, UserError
from millpond.kind_handler import ApplyBatch, ApplyPlan, Document, KindHandler, KindName

__all__ = ["OWNERS", "REGISTRY", "KindName", "KindTable"]

# The packages whose kinds the table must hold before it resolves a name (each one's ``kinds`` module
# registers the names, its ``handler`` module the handler): a dispatcher that loaded only one of them
# would call the others' kinds unknown.
OWNERS = ("datasets", "training", "training.batch", "scheduling.queues", "kuberay", "pods", "core", "serving",
          "notebooks", "serving.seldon", "katib")


class KindTable:
    """Kinds by name with their handlers; filled by each owner once, read by every dispatcher."""

    def __init__(self, owners: tuple[str, ...], package: str = "millpond") -> None:
        self._owners = owners
        self._package = package
        self._kinds: dict[str, KindName] = {}
        self._names: dict[str, str] = {}
        self._refused: dict[str, str] = {}
        self._handlers: dict[str, KindHandler] = {}
        self._fallback: str | None = None
        self._sorted: list[KindHandler] | None = None  # every handler in apply order, once all are loaded

    def register_handler(self, handler: KindHandler, *, fallback: bool = False) -> None:
        """Add a family: its kinds' names, the kinds it refuses, and the handler that serves them.

        ``fallback``: the handler whose checks receive the documents of an apply that no handler
        claims (Fluid's: its envelope check says what is wrong with them: not a mapping, no kind,
        an unknown kind, with every known kind named). One owner has one handler.
        """
        known = self._handlers.get(handler.owner)
        if known is not None and type(known) is not type(handler):
            raise MillpondError(f"owner {handler.owner!r} registers two handlers")
        self.add_owner(handler.owner)  # a family outside OWNERS (a plug-in) registers itself
        self.register(handler.kinds, handler.refused)
        self._handlers[handler.owner] = handler
        self._sorted = None
        if fallback:
            self._fallback = handler.owner

    def register(self, names: Iterable[KindName], refused: Mapping[str, str] | None = None) -> None:
        """Add an owner's kinds (``refused``: kinds that mean nothing here, with the reason).

        Registering the same kind again (a module reloaded) is harmless; two owners claiming
        one name is a mistake in the tables, said at once.
        """
        for entry in names:
            if entry.owner not in self._owners:
                raise MillpondError(f"kind {entry.kind}: unknown owner {entry.owner!r}")
            if self._kinds.setdefault(entry.kind, entry) != entry:
                raise MillpondError(f"kind {entry.kind} is registered twice, differently")
            for spelling in entry.spellings():
                if self._names.setdefault(spelling.lower(), entry.kind) != entry.kind:
                    raise MillpondError(f"{spelling!r} names both {self._names[spelling.lower()]} and {entry.kind}")
        for kind, reason in (refused or {}).items():
            for spelling in (kind.lower(), kind.lower() + "es"):
                self._refused[spelling] = reason

    def add_owner(self, owner: str) -> None:
        """Accept kinds from ``owner`` too (a package outside ``OWNERS``: a plug-in, a test's made-up kind)."""
        if owner not in self._owners:
            self._owners = (*self._owners, owner)
            self._sorted = None

    def remove_owner(self, owner: str) -> None:
        """Forget a plug-in's kinds, names and handler (``OWNERS``' own families stay)."""
        if owner in OWNERS:
            raise MillpondError(f"the kinds of {owner} cannot be removed")
        self._kinds = {kind: entry for kind, entry in self._kinds.items() if entry.owner != owner}
        self._names = {spelling: kind for spelling, kind in self._names.items() if kind in self._kinds}
        self._handlers.pop(owner, None)
        self._owners = tuple(known for known in self._owners if known != owner)
        self._sorted = None
        if self._fallback == owner:
            self._fallback = None

    def _check_complete(self) -> None:
        """Load every owner's ``kinds`` module not loaded yet (a light table: it registers the names)."""
        named = {entry.owner for entry in self._kinds.values()}
        for owner in self._owners:
            if owner not in named and owner not in self._handlers:
                importlib.import_module(f"{self._package}.{owner}.kinds")
        named = {entry.owner for entry in self._kinds.values()}
        missing = [owner for owner in self._owners if owner not in named]
        if missing:
            raise MillpondError(f"the kinds of {', '.join(missing)} are not registered "
                                f"(millpond.{missing[0]}.kinds registers none)")

    def _load_handler(self, owner: str) -> KindHandler:
        """The owner's handler, its ``handler`` module loaded first if need be (only the family a command
        reaches pays for importing its checks, stores and controllers)."""
        if owner not in self._handlers:
            importlib.import_module(f"{self._package}.{owner}.handler")
        if owner not in self._handlers:
            raise MillpondError(f"millpond.{owner}.handler registers no handler")
        return self._handlers[owner]

    def loaded(self) -> KindTable:
        """The table with every owner's kinds registered (each one's ``kinds`` module loaded)."""
        self._check_complete()
        return self

    def handler(self, entry: KindName) -> KindHandler:
        """The handler serving ``entry``'s objects."""
        return self._load_handler(entry.owner)

    def handlers(self) -> list[KindHandler]:
        """Every family's handler, in the order a batch is checked and applied."""
        self._check_complete()
        loaded = [self._load_handler(owner) for owner in self._owners]
        return sorted(loaded, key=lambda handler: (handler.apply_order, handler.owner))

    def plan(self, documents: Sequence[Document], batch: ApplyBatch) -> list[ApplyPlan]:
        """Every document of an apply checked by its family's handler (family by family, in ``apply_order``),
        nothing stored; the first problem raises its one-line UserError. A document no handler claims goes
        to the fallback handler's checks, which say why it is refused."""
        self._check_complete()
        claimed: dict[str, list[Document]] = defaultdict(list)
        documents = [(source, number, without_nulls(doc)) for source, number, doc in documents]  # as Kubernetes
        for document in documents:
            owner = self._claimant(document[2])
            if owner is None:
                raise UserError(f"{document[0]}: document {document[1]}: kind: not one of "
                                f"{', '.join(self.kinds())}")
            claimed[owner].append(document)
        handlers = sorted((self._load_handler(owner) for owner in claimed),
                          key=lambda handler: (handler.apply_order, handler.owner))
        return [handler.check(claimed[handler.owner], batch) for handler in handlers]

    def _claimant(self, doc: object) -> str | None:
        """The family that checks ``doc``: the one its kind is registered to, when that family claims it
        (only its handler is loaded: applying one Kueue object does not import the serving stack); else
        the first family, in apply order, that claims it; else the fallback."""
        entry = self.named(doc.get("kind")) if isinstance(doc, dict) else None
        if entry is not None and self._load_handler(entry.owner).claims(doc):
            return entry.owner
        return next((handler.owner for handler in self._in_apply_order() if handler.claims(doc)), self._fallback)

    def _in_apply_order(self) -> list[KindHandler]:
        """Every handler in apply order, sorted once (an apply of many unclaimed documents asks per document)."""
        if self._sorted is None:
            self._sorted = self.handlers()
        return self._sorted

    def find(self, text: str) -> KindName | None:
        """The kind spelt ``text`` as kubectl spells it, or None."""
        self._check_complete()
        found = self._names.get(text.strip().lower())
        return self._kinds[found] if found else None

    def resolve(self, text: str) -> KindName:
        """The kind spelt ``text``; UserError (one line) says why a refused one means nothing here, or
        lists every known kind."""
        found = self.find(text)
        if found is not None:
            return found
        reason = self._refused.get(text.strip().lower())
        if reason:
            raise UserError(reason)
        valid = ", ".join(f"{info.kind.lower()} ({info.plural})" for info in self._ordered())
        raise UserError(f"unknown resource type {text!r}: use one of {valid}")

    def __getitem__(self, kind: str) -> KindName:
        """The registered kind named exactly ``kind`` (KeyError if none: a caller's mistake)."""
        return self._kinds[kind]

    def named(self, kind: object) -> KindName | None:
        """The kind named exactly ``kind`` (a manifest's ``kind:``, a stored row's), or None."""
        return self._kinds.get(kind) if isinstance(kind, str) else None

    def kinds(self) -> tuple[str, ...]:
        """Every kind registered so far, Fluid's first (for messages)."""
        return tuple(info.kind for info in self._ordered())

    def _ordered(self) -> list[KindName]:
        """By owner in ``OWNERS`` order, each owner's in its table's order: the same whichever imported first."""
        return sorted(self._kinds.values(), key=lambda info: self._owners.index(info.owner))

    def __iter__(self) -> Iterator[KindName]:
        """Every registered kind (each owner's loaded first)."""
        self._check_complete()
        return iter(self._ordered())


REGISTRY = KindTable(OWNERS)
