"""The one table of the kinds ``millpond apply``, ``get`` and ``delete`` (and the server's resource
routes) know, by every name kubectl accepts for them.

Each package that owns kinds fills it when its kinds module is imported: ``datasets.kinds``
(Fluid's ``data.fluid.io`` kinds), ``training.kinds`` (Kubeflow's) and ``scheduling.queues.kinds``
(Kueue's ``kueue.x-k8s.io`` queueing kinds) and ``serving.kinds`` (KServe's ``serving.kserve.io``
InferenceService and serving runtimes). Those modules keep what
only their package needs (a Fluid kind's category, a training kind's versions and trainer);
this table keeps the names and who owns each kind, so a name is resolved in one place, with
one error line for an unknown one listing every known kind, and the caller dispatches on
``owner``. It lives on the floor (it imports no layer) because every owner must reach it,
and they sit in different layers.

kubectl's spellings: the kind (any case), the plural, the CRD's short names, each of them also
as ``NAME.GROUP`` and ``NAME.VERSION.GROUP`` (``pytorchjobs.kubeflow.org``,
``dataset.v1alpha1.data.fluid.io``). Kubeflow's CRDs declare no short names, so kubectl knows
none for PyTorchJob & co; neither does millpond.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from millpond.errors import MillpondError, UserError

# The packages whose kinds the table must hold before it resolves a name: a dispatcher that
# imported only one of them would call the other's kinds unknown.
OWNERS = ("datasets", "training", "scheduling.queues", "serving")


@dataclass(frozen=True)
class KindName:
    """One kind's names and owner (the package that checks, stores and shows its objects)."""

    kind: str
    plural: str
    group: str
    versions: tuple[str, ...]
    owner: str
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = False

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``dataset.data.fluid.io``."""
        return f"{self.kind.lower()}.{self.group}"

    def not_found(self, name: str, namespace: str) -> str:
        """kubectl's line for a missing object: ``pytorchjobs.kubeflow.org "x" not found``."""
        return f'{self.plural}.{self.group} "{name}" not found' + (
            f' in namespace "{namespace}"' if namespace != "default" else "")

    def spellings(self) -> list[str]:
        names = [self.kind.lower(), self.plural, *self.short_names]
        return [*names, *(f"{name}.{self.group}" for name in names),
                *(f"{name}.{version}.{self.group}" for name in names for version in self.versions)]


class KindTable:
    """Kinds by name; filled by each owner once, read by every dispatcher."""

    def __init__(self, owners: tuple[str, ...]) -> None:
        self._owners = owners
        self._kinds: dict[str, KindName] = {}
        self._names: dict[str, str] = {}
        self._refused: dict[str, str] = {}

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

    def _check_complete(self) -> None:
        missing = [owner for owner in self._owners if not any(k.owner == owner for k in self._kinds.values())]
        if missing:
            raise MillpondError(f"the kinds of {', '.join(missing)} are not registered "
                                f"(import millpond.{missing[0]}.kinds before resolving a kind)")

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


REGISTRY = KindTable(OWNERS)
