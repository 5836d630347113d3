"""The web UI's Models page in Debian's Chromium: an InferenceService applied through the API, served by a
real model server behind the gateway, shows Ready, its URL, traffic, replicas, a sample request that
works, and request counts and latency that grow as requests go through the gateway; its detail view
lists revisions, conditions and curl for three protocols; a hostile annotation stays text."""

from __future__ import annotations

import json
import shlex
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from millpond.serving import lifecycle
from millpond.store.resources import ResourceStore
from tests.server_support import serving
from tests.serving_support import train_digits
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

HOSTILE = '<img src=x onerror="window.pwned=1">'


def _isvc(model_dir: Path) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "digits", "labels": {"team": "ml"}, "annotations": {"note": HOSTILE}},
            "spec": {"predictor": {"sklearn": {"storageUri": f"file://{model_dir}"}}}}


def _json(url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def test_models_page_lists_inference_services_with_live_counts(home: Path, tmp_path: Path) -> None:
    sync_api = _browser()
    model_dir, model, rows = train_digits(tmp_path)
    try:
        for served in serving():
            _json(f"{served.url}/apis/millpond/v1/fluid/apply", [_isvc(model_dir)])  # its supervisor starts
            url = lifecycle.wait_ready(ResourceStore(), "digits", timeout_s=60).status["url"]  # its own port

            [view] = _json(f"{served.url}/ui-api/models")["models"]
            assert view["ready"]["status"] == "True" and view["url"] == url and view["replicas"] == 1
            assert view["metrics"]["requests"] == 0 and view["metrics"]["p50_ms"] is None
            detail = _json(f"{served.url}/ui-api/models/default/digits")
            assert detail["annotations"] == {"note": HOSTILE} and detail["labels"] == {"team": "ml"}
            # the detail's sample is sized from the model's metadata, and works as printed
            sample = subprocess.run(shlex.split(detail["samples"]["v1"]), capture_output=True, text=True, timeout=30)
            assert json.loads(sample.stdout) == {"predictions": [int(model.predict([[0.0] * 64])[0])]}

            with chromium_page() as (page, errors):
                page.goto(served.url + "/#/runs")
                page.click("header nav a[data-nav=models]")
                row = page.locator('tr.model-row[data-model="default/digits"]')
                sync_api.expect(row.locator(".ready")).to_have_text("Ready", timeout=UI_WAIT_MS)
                sync_api.expect(row.locator(".url")).to_have_text(url)
                sync_api.expect(row.locator(".traffic")).to_have_text("digits-predictor-00001: 100% (1 up)")
                sync_api.expect(row.locator(".sample")).to_contain_text("/v1/models/digits:predict")
                for _ in range(5):  # live: requests through the gateway appear at the next poll
                    _json(f"{served.url}/v1/models/digits:predict", {"instances": rows.tolist()})
                sync_api.expect(row.locator(".requests")).to_have_text("6", timeout=UI_WAIT_MS)  # + the sample's
                sync_api.expect(row.locator(".latency")).to_contain_text(" ms")

                row.locator("a").click()
                sync_api.expect(page.locator("#model-requests")).to_have_text("6", timeout=UI_WAIT_MS)
                sync_api.expect(page.locator('#model-revisions tr[data-revision="digits-predictor-00001"] .requests')
                                ).to_have_text("6")
                sync_api.expect(page.locator('#model-codes tr[data-code="200"]')).to_contain_text("6")
                sync_api.expect(page.locator('#model-samples [data-protocol="seldon"]')).to_contain_text(
                    "/seldon/digits/api/v0.1/predictions")
                sync_api.expect(page.locator("#model-annotations")).to_have_text(f"note={HOSTILE}")  # as text
                assert page.locator("#main img").count() == 0
                assert page.evaluate("window.pwned") is None
                assert not errors, errors
    finally:
        lifecycle.stop("digits")
