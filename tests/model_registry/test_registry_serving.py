"""A registered version served: an InferenceService with ``storageUri: model-registry://NAME/VERSION`` applied
through the Kubernetes API, ``millpond serve --model NAME:VERSION``, and a reference to a missing version (the
service not Ready, naming it, until the version is registered)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from millpond.serving import lifecycle
from millpond.store.resources import ResourceStore
from tests.conftest import CliResult
from tests.server_support import Served, call
from tests.serving.test_serving_cli import _invoke, predictions
from tests.serving_support import train_digits

pytest.importorskip("model_registry")

ISVC = "/apis/serving.kserve.io/v1beta1/namespaces/default/inferenceservices"


@pytest.fixture
def millpond(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from millpond.cli.main import main

    return lambda *args: _invoke(main, capsys, *args)


def _service(name: str, uri: str) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"predictor": {"sklearn": {"storageUri": uri}}}}


def _condition(store: ResourceStore, name: str, reason: str | None, timeout_s: float = 60) -> str:
    """The Ready condition's message once its reason is ``reason`` (None: once it is Ready)."""
    deadline = time.monotonic() + timeout_s
    while True:
        resource = store.get("InferenceService", name, "default")
        status = lifecycle.observed_status(resource) if resource is not None else {}
        ready, found, message = lifecycle.ready_condition(status)
        if (reason is None and ready == "True") or (reason is not None and found == reason):
            return str(message)
        assert time.monotonic() < deadline, (ready, found, message)
        time.sleep(0.2)


def test_a_registered_version_is_served_through_model_registry_uris(registry, server: Served, models_root: Path,
                                                                    millpond) -> None:
    folder = models_root / "digits" / "1"
    folder.mkdir(parents=True)
    _, model, rows = train_digits(folder)
    registry.register_model("digits", f"file://{folder}", version="1", model_format_name="sklearn",
                            model_format_version="1")
    store = ResourceStore()

    status, created = call(server.url, "POST", ISVC, body=_service("digits-reg", "model-registry://digits/1"))
    assert status == 201, created
    lifecycle.wait_ready(store, "digits-reg", "default", 90)
    assert predictions(server.url, "digits-reg", rows) == model.predict(rows).tolist()

    # the latest version, and the registry's address before the name (as KServe's initializer reads both)
    status, created = call(server.url, "POST", ISVC, body=_service(
        "digits-latest", "model-registry://model-registry-service.default.svc.cluster.local:8080/digits"))
    assert status == 201, created
    lifecycle.wait_ready(store, "digits-latest", "default", 90)
    assert predictions(server.url, "digits-latest", rows[:3]) == model.predict(rows[:3]).tolist()

    # a missing version: stored, not Ready, the reason naming what is missing; registered later, it is served
    status, created = call(server.url, "POST", ISVC, body=_service("digits-v2", "model-registry://digits/2"))
    assert status == 201, created
    message = _condition(store, "digits-v2", "ModelLoadFailed")
    assert "model-registry://digits/2" in message and "no version '2'" in message, message
    status, created = call(server.url, "POST", ISVC, body=_service("no-model", "model-registry://nothing"))
    assert "no registered model 'nothing'" in _condition(store, "no-model", "ModelLoadFailed")
    folder2 = models_root / "digits" / "2"
    folder2.mkdir()
    _, model2, _ = train_digits(folder2)
    registry.register_model("digits", f"file://{folder2}", version="2", model_format_name="sklearn",
                            model_format_version="1")
    _condition(store, "digits-v2", None, 120)  # the failed fetch is tried again, with back-off
    assert predictions(server.url, "digits-v2", rows) == model2.predict(rows).tolist()

    # millpond serve --model NAME:VERSION
    served = millpond("serve", "--model", "digits:1", "--name", "digits-cli", "--wait", "--timeout", "90")
    assert served.code == 0, served.err
    assert served.out.splitlines()[0] == "inferenceservice.serving.kserve.io/digits-cli created"
    resource = store.get("InferenceService", "digits-cli", "default")
    assert resource is not None
    assert resource.manifest["spec"]["predictor"]["sklearn"]["storageUri"] == "model-registry://digits/1"
    assert predictions(server.url, "digits-cli", np.asarray(rows)) == model.predict(rows).tolist()
    for args, says in ((("--model", "digits:7"), "has no version '7'"),
                       (("--model", "absent:1"), "no registered model 'absent'"),
                       (("--model", "digits:"), "expected NAME or NAME:VERSION"),
                       (("--model", "digits:1", "--from-run", "r", "--artifact", "t.o"), "give --model"),
                       ((), "give --model")):
        refused = millpond("serve", *args, "--name", "refused")
        assert refused.code == 2 and refused.err.strip().splitlines() == [refused.err.strip()], refused.err
        assert says in refused.err, refused.err
    assert store.get("InferenceService", "refused", "default") is None  # nothing stored by a refusal
    for name in ("digits-reg", "digits-latest", "digits-v2", "no-model", "digits-cli"):
        status, _ = call(server.url, "DELETE", f"{ISVC}/{name}")
        assert status == 200
