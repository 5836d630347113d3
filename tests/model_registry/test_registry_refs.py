"""``model-registry://`` references read as the model registry's KServe storage initializer reads them, and the
``storageUri`` parser taking them beside the other schemes."""

from __future__ import annotations

import pytest

from millpond.errors import UserError
from millpond.serving.registry_refs import RegistryRef, parse_ref
from millpond.serving.storage_uri import parse_storage_uri


@pytest.mark.parametrize(("uri", "ref"), [
    ("model-registry://iris", RegistryRef(None, "iris", None)),
    ("model-registry://iris/v1", RegistryRef(None, "iris", "v1")),
    ("model-registry://iris/v1?x=1", RegistryRef(None, "iris", "v1")),
    ("model-registry://registry.example/iris/v1", RegistryRef(None, "iris", "v1")),
    ("model-registry://model-registry-service.team-a.svc.cluster.local:8080/iris",
     RegistryRef("team-a", "iris", None)),
    ("model-registry://model-registry-service.team-a.svc:8080/iris/2", RegistryRef("team-a", "iris", "2")),
    ("model-registry://localhost:8080/iris", RegistryRef(None, "iris", None)),
])
def test_the_four_forms(uri: str, ref: RegistryRef) -> None:
    assert parse_ref(uri) == ref


@pytest.mark.parametrize("uri", ["model-registry://", "model-registry://a/b/c/d", "model-registry://a//b",
                                 "s3://bucket/model"])
def test_malformed_references_are_refused(uri: str) -> None:
    with pytest.raises(UserError):
        parse_ref(uri)


def test_storage_uri_takes_the_scheme_and_refuses_climbing() -> None:
    parsed = parse_storage_uri("model-registry://iris/v1")
    assert (parsed.scheme, parsed.authority, parsed.path, parsed.unreadable) == ("model-registry", "iris", "v1", None)
    with pytest.raises(UserError, match=r"'\.\.' is not allowed"):
        parse_storage_uri("model-registry://iris/../v1")
