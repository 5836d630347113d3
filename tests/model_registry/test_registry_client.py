"""The real ``model-registry`` Python client (0.3.x, from PyPI) against ``millpond server``, unchanged:
register, get, list with paging, archive, and the errors it raises for what is not there or taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server_support import Served, call

pytest.importorskip("model_registry")
from model_registry.exceptions import StoreError  # noqa: E402
from model_registry.types import ModelVersionState, RegisteredModelState  # noqa: E402


def test_register_get_list_and_archive(registry, server: Served, models_root: Path) -> None:
    uri = f"file://{models_root}/iris/1"
    metadata = {"accuracy": 0.97, "epochs": 12, "framework": "sklearn", "tuned": True}
    model = registry.register_model("iris", uri, version="v1", model_format_name="sklearn",
                                    model_format_version="1", version_description="first", metadata=metadata,
                                    model_source_kind="kfp", model_source_id="run-1")
    assert model.id and model.name == "iris" and model.owner == "alice" and model.state == RegisteredModelState.LIVE
    registry.register_model("iris", f"file://{models_root}/iris/2", version="v2", model_format_name="sklearn",
                            model_format_version="1")

    got = registry.get_registered_model("iris")
    assert got is not None and got.id == model.id and got.owner == "alice"
    version = registry.get_model_version("iris", "v1")
    assert version is not None and version.author == "alice" and version.description == "first"
    assert version.registered_model_id == model.id
    assert version.custom_properties == metadata  # double, int, string and bool MetadataValues, back as written
    artifact = registry.get_model_artifact("iris", "v1")
    assert artifact is not None and artifact.uri == uri and artifact.name == "iris"
    assert (artifact.model_format_name, artifact.model_format_version) == ("sklearn", "1")
    assert (artifact.model_source_kind, artifact.model_source_id) == ("kfp", "run-1")
    assert registry.get_model_artifact("iris", "v2").uri.endswith("/iris/2")  # each version its own artifact

    assert registry.get_registered_model("no-such") is None
    assert registry.get_model_version("iris", "v9") is None
    with pytest.raises(StoreError, match="does not exist"):
        registry.get_model_version("no-such", "v1")
    with pytest.raises(StoreError, match="already exists"):
        registry.register_model("iris", uri, version="v1", model_format_name="sklearn", model_format_version="1")

    for index in range(3):  # more models than a page, listed through the client's pager
        registry.register_model(f"extra-{index}", uri, version="1", model_format_name="sklearn",
                                model_format_version="1")
    names = [m.name for m in registry.get_registered_models().page_size(2)]
    assert names == ["iris", "extra-0", "extra-1", "extra-2"]
    newest_first = [m.name for m in registry.get_registered_models().order_by_creation_time().descending()]
    assert newest_first == ["extra-2", "extra-1", "extra-0", "iris"]
    assert [v.name for v in registry.get_model_versions("iris").page_size(1)] == ["v1", "v2"]

    version.state = ModelVersionState.ARCHIVED  # archiving is an update of the state
    archived = registry.update(version)
    assert archived.state == ModelVersionState.ARCHIVED
    assert registry.get_model_version("iris", "v1").state == ModelVersionState.ARCHIVED
    assert registry.get_model_version("iris", "v1").custom_properties == metadata  # kept through the update
    got.state = RegisteredModelState.ARCHIVED
    assert registry.update(got).state == RegisteredModelState.ARCHIVED
    assert registry.get_registered_model("iris").state == RegisteredModelState.ARCHIVED

    # the same objects through the OpenAPI's prefix, as the upstream server answers them
    status, listed = call(server.url, "GET", f"/api/model_registry/v1alpha3/registered_models/{model.id}/versions")
    assert status == 200 and [v["name"] for v in listed["items"]] == ["v1", "v2"]
    assert listed["items"][0]["state"] == "ARCHIVED" and listed["nextPageToken"] == "" and listed["size"] == 2


def test_over_https_with_the_servers_ca_and_a_token(home: Path, models_root: Path) -> None:
    """``millpond server --tls`` with a token: the client trusts the server's CA (``custom_ca``) and sends the
    token as a bearer; a wrong token is refused (401) before anything is read."""
    from model_registry import ModelRegistry
    from mr_openapi.exceptions import UnauthorizedException

    served = Served(token="registry-secret", tls=True)
    try:
        secure = ModelRegistry("https://127.0.0.1", served.port, author="bob", is_secure=True,
                               custom_ca=str(served.ca), user_token="registry-secret")
        secure.register_model("tls-model", f"file://{models_root}/tls", version="1", model_format_name="sklearn",
                              model_format_version="1")
        assert secure.get_model_artifact("tls-model", "1").uri == f"file://{models_root}/tls"
        with pytest.raises(UnauthorizedException):
            ModelRegistry("https://127.0.0.1", served.port, author="bob", is_secure=True, custom_ca=str(served.ca),
                          user_token="wrong")
    finally:
        served.stop()
