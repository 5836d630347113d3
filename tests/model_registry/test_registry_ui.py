"""The web UI's Model registry page in Debian's Chromium: models registered with the real client show their
versions, states (an archived one too), authors, formats, URIs and properties; a hostile name stays text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server_support import Served
from tests.ui.test_server_ui import _browser, chromium_page

pytest.importorskip("model_registry")

HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_registry_page_lists_models_versions_state_and_uri(registry, server: Served, models_root: Path) -> None:
    from model_registry.types import ModelVersionState

    sync_api = _browser()
    uri = f"file://{models_root}/ui/1"
    registry.register_model("ui-model", uri, version="1", model_format_name="sklearn", model_format_version="1",
                            metadata={"accuracy": 0.93})
    registry.register_model("ui-model", f"file://{models_root}/ui/2", version="2", model_format_name="sklearn",
                            model_format_version="1")
    registry.register_model(HOSTILE, uri, version="1", model_format_name="onnx", model_format_version="8")
    version = registry.get_model_version("ui-model", "2")
    version.state = ModelVersionState.ARCHIVED
    registry.update(version)

    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/runs")
        page.click("header nav a[data-nav=registry]")
        first = page.locator('tr.registry-row[data-model="ui-model"][data-version="1"]')
        sync_api.expect(first.locator(".uri")).to_have_text(uri, timeout=15_000)
        assert "accuracy=0.93" in first.inner_text() and "sklearn 1" in first.inner_text()
        assert "model-registry://ui-model/1" in first.inner_text() and "alice" in first.inner_text()
        second = page.locator('tr.registry-row[data-model="ui-model"][data-version="2"]')
        sync_api.expect(second.locator(".state-cell")).to_have_text("ARCHIVED")
        hostile = page.locator("tr.registry-row").filter(has_text="onerror")
        sync_api.expect(hostile).to_have_count(1)
        assert page.evaluate("window.pwned") is None and not errors, errors
