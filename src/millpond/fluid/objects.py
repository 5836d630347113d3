"""Fluid objects made by the SDK, stored exactly as ``millpond apply -f`` stores manifests.

The SDK builds manifest dicts; each goes through the same envelope, schema and semantic
checks as a file would, so a bad argument is the same one-line UserError ``apply`` prints
(prefixed with the SDK call instead of a file name), and nothing is stored unless all pass.
"""

from __future__ import annotations

import logging
from typing import Any

from millpond.datasets.kinds import GROUP, KINDS
from millpond.datasets.manifests import check_document
from millpond.datasets.status import resource_status
from millpond.errors import ConflictError, NotFoundError
from millpond.settings import load_settings
from millpond.store.resources import Resource, ResourceStore
from millpond.store.secrets import ConfigStore

logger = logging.getLogger("fluidsdk")


class NotFound(NotFoundError, LookupError):
    """The named Fluid object does not exist (kubectl's wording)."""


class AlreadyExists(ConflictError):
    """A create found an object of that name: Fluid's create does not overwrite."""


def plural(kind: str) -> str:
    return f"{KINDS[kind].plural}.{GROUP}"


def not_found(kind: str, name: str, namespace: str) -> NotFound:
    return NotFound(f'{plural(kind)} "{name}" not found in namespace "{namespace}"')


def already_exists(kind: str, name: str, namespace: str) -> AlreadyExists:
    return AlreadyExists(f'{plural(kind)} "{name}" already exists in namespace "{namespace}"')


def check(documents: list[dict[str, Any]], call: str, log_notes: bool = True) -> list[dict[str, Any]]:
    """Each document checked as ``millpond apply`` checks a file; the bodies to store.

    ``call`` names the SDK call in error messages (``create_dataset: Dataset x: spec.…: …``).
    Fields that mean nothing on one machine are logged at INFO, as apply's ``info:`` lines.
    """
    secrets = ConfigStore(load_settings().home)
    bodies: list[dict[str, Any]] = []
    for number, doc in enumerate(documents, start=1):
        manifest = check_document(doc, call, number, secrets)
        if log_notes:
            for note in manifest.notes:
                logger.info(note)
        bodies.append(manifest.body)
    return bodies


def apply(documents: list[dict[str, Any]], call: str, store: ResourceStore) -> list[tuple[Resource, str]]:
    """Check every document, then store them all in one transaction (all or none)."""
    return store.apply(check(documents, call))



def shown(resource: Resource, store: ResourceStore) -> dict[str, Any]:
    """The object as ``millpond get KIND NAME -o json`` shows it: metadata with uid, spec, status now."""
    return resource.as_object(resource_status(resource, store))
