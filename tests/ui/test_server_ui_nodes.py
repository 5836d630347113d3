"""The web UI's Nodes page in Debian's Chromium: this machine's CPU, memory and GPUs (capacity, allocated from
the real ledger, used from the machine), as charts that grow with each poll and follow a grant given back; a
holder's name that looks like HTML stays text; the page carries its Content-Security-Policy."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from millpond.scheduling.ledger import Holder, Ledger, Request
from tests.server_support import serving
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

MIB = 1024 * 1024
HOSTILE = 'x<img src=x onerror="window.pwned=1">'


def _nodes(url: str) -> dict:
    with urllib.request.urlopen(url + "/ui-api/nodes", timeout=30) as answer:
        return json.loads(answer.read())


def test_nodes_page_charts_allocated_and_used_live(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sync_api = _browser()
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPUs: no device is touched
    ledger = Ledger()
    grant = ledger.try_acquire(Request(cpu_millis=500, memory_bytes=64 * MIB, gpus=1),
                               Holder("task", HOSTILE, os.getpid(), None))
    assert grant is not None
    try:
        for served in serving():
            [node] = _nodes(served.url)["nodes"]
            assert node["gpu"]["capacity"] == 2 and node["gpu"]["allocated"] == 1 and node["gpu"]["used"] is None
            assert node["cpu"]["allocated"] == 0.5 and node["memory"]["allocated"] == 64 * MIB
            assert 0 <= node["cpu"]["used"] <= node["cpu"]["total"]
            assert 0 < node["memory"]["used"] <= node["memory"]["total"]
            assert [h["name"] for h in node["holders"]] == [HOSTILE]

            with urllib.request.urlopen(served.url + "/", timeout=30) as page_answer:
                assert "script-src 'self'" in page_answer.headers["content-security-policy"]
            with chromium_page() as (page, errors):
                page.goto(served.url + "/#/runs")
                page.click("header nav a[data-nav=nodes]")
                card = page.locator("section.node-card")
                sync_api.expect(card).to_have_count(1, timeout=UI_WAIT_MS)
                gpus = card.locator('.chart-box[data-kind="gpu"]')
                sync_api.expect(gpus.locator(".legend")).to_contain_text("capacity 2", timeout=UI_WAIT_MS)
                sync_api.expect(gpus.locator(".legend")).to_contain_text("allocated 1")
                sync_api.expect(gpus.locator(".legend")).to_contain_text("used n/a")  # no GPU metrics: unknown
                sync_api.expect(card.locator(".holders")).to_contain_text(HOSTILE)  # as text
                assert card.locator(".holders img").count() == 0
                # live: the CPU chart's used line gains a point at each poll
                page.wait_for_function(
                    "() => (document.querySelector('.chart-box[data-kind=cpu] .series-used')?.getAttribute('points')"
                    " || '').split(' ').length >= 3", timeout=20_000)
                memory = card.locator('.chart-box[data-kind="memory"] .legend')
                sync_api.expect(memory).to_contain_text("allocated 64.0 MiB")
                ledger.release(grant.id)  # given back: the next poll shows it
                sync_api.expect(gpus.locator(".legend")).to_contain_text("allocated 0", timeout=UI_WAIT_MS)
                sync_api.expect(card.locator(".holders")).to_have_count(0)
                assert page.evaluate("window.pwned") is None
                assert not errors, errors
    finally:
        ledger.release(grant.id)
