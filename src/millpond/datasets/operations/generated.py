"""Operations millpond creates for a command (``millpond dataset load``), named as kubectl's ``generateName``.

The object is checked exactly as ``millpond apply -f`` checks a file, then stored as a new
object: ``<prefix><5 random characters>``, the prefix cut to 58 characters as the API server
cuts it, a name already taken drawn again (never overwritten). It is then an operation like
any other: ``millpond get dataloads`` lists it, ``ttlSecondsAfterFinished`` applies.
"""

from __future__ import annotations

import secrets
from typing import Any

from millpond.datasets.kinds import API_VERSION
from millpond.datasets.manifests import check_document
from millpond.errors import ConflictError
from millpond.settings import load_settings
from millpond.store.resources import Resource, ResourceStore
from millpond.store.secrets import ConfigStore

# Kubernetes' utilrand alphabet: no vowels (no words), no 0, 1, 3 (no look-alikes).
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX = 5
MAX_PREFIX = 63 - SUFFIX
DRAWS = 8


def generated_name(prefix: str) -> str:
    return prefix[:MAX_PREFIX] + "".join(secrets.choice(ALPHABET) for _ in range(SUFFIX))


def create(kind: str, generate_name: str, namespace: str, spec: dict[str, Any], source: str) -> Resource:
    """Check and store a new ``kind`` named ``generate_name`` + 5 random characters; the stored object.

    ``source`` names the command in an error line, as a file name would (``dataset load``).
    """
    store = ResourceStore()
    secrets_store = ConfigStore(load_settings().home)
    for _ in range(DRAWS):
        name = generated_name(generate_name)
        body = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": namespace},
                "spec": spec}
        created = store.create(check_document(body, source, 1, secrets_store).body)
        if created is not None:
            return created
    raise ConflictError(f"{source}: no free name for a {kind} starting {generate_name!r} after {DRAWS} draws")
