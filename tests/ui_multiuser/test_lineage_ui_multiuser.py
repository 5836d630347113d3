"""The lineage pages of a multi-user ``millpond server`` in Chromium: alice (team-a's owner) sees her namespace's
artifacts and executions only; team-b's lineage is refused (403) to her page's calls, and team-b's artifact or
execution page shows the refusal, none of its data.

A real ``millpond server --multi-user`` in a process of its own (``test_ui_login``'s helpers: users, profiles, the
login page); each team's run made by the administrator with ``kfp.Client``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.lineage.pipelines import fit_one
from tests.server_support import module_home
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page
from tests.ui_multiuser.test_ui_login import (
    PASSWORDS,
    TOKEN,
    MultiUserServer,
    _log_in,
    _make_profiles,
    _millpond,
    multi_user_server,
)

kfp = pytest.importorskip("kfp")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiUserServer]:
    _browser()  # skips before anything is made when Chromium or playwright is missing
    for home in module_home(tmp_path_factory, "ui-lineage-multi-user"):
        for name in ("alice", "bob"):
            _millpond(home, "user", "add", name, "--password-stdin", stdin=PASSWORDS[name] + "\n")
        _make_profiles(home, {"team-a": "alice", "team-b": "bob"})
        with multi_user_server(home) as served:
            yield served


def _lineage_of(server: MultiUserServer, namespace: str) -> dict[str, Any]:
    """The administrator's run of fit_one in ``namespace``, then its artifacts' and executions' ids."""
    client = kfp.Client(host=server.url, existing_token=TOKEN)
    run = client.create_run_from_pipeline_func(fit_one, run_name=f"{namespace} fit", namespace=namespace,
                                               experiment_name=f"{namespace} lineage")
    assert client.wait_for_run_completion(run.run_id, timeout=180, sleep_duration=0.3).state == "SUCCEEDED"
    status, artifacts = server.call(f"/apis/v2beta1/artifacts?namespace={namespace}")
    assert status == 200, artifacts
    status, executions = server.call(f"/ui-api/lineage/executions?namespace={namespace}")
    assert status == 200, executions
    return {"artifacts": [a["artifact_id"] for a in artifacts["artifacts"]],
            "executions": [x["execution_id"] for x in executions["executions"] if x["run_id"] == run.run_id]}


def test_a_user_sees_her_namespaces_lineage_only(server: MultiUserServer) -> None:
    sync_api = _browser()
    mine, theirs = _lineage_of(server, "team-a"), _lineage_of(server, "team-b")
    assert len(mine["artifacts"]) == len(theirs["artifacts"]) == 2 and theirs["executions"]
    with chromium_page() as (page, errors):
        _log_in(page, server.url, "alice", PASSWORDS["alice"])
        sync_api.expect(page.locator("#user-name")).to_have_text("alice", timeout=UI_WAIT_MS)
        page.click("header nav a[data-nav=artifacts]")
        sync_api.expect(page.locator("tr.artifact-row")).to_have_count(2, timeout=UI_WAIT_MS)
        shown = {page.locator("tr.artifact-row").nth(i).get_attribute("data-artifact-id") for i in range(2)}
        assert shown == set(mine["artifacts"])
        page.click("header nav a[data-nav=executions]")
        sync_api.expect(page.locator("tr.execution-row").first).to_be_visible(timeout=UI_WAIT_MS)
        listed = page.locator("tr.execution-row")
        ids = {listed.nth(i).get_attribute("data-execution-id") for i in range(listed.count())}
        assert ids and not ids & set(theirs["executions"])

        # team-b's lineage: every call refused, the pages show the refusal and nothing of it
        for path in ("/ui-api/lineage/executions?namespace=team-b",
                     f"/ui-api/lineage/artifacts/{theirs['artifacts'][0]}",
                     f"/ui-api/lineage/executions/{theirs['executions'][0]}",
                     "/apis/v2beta1/artifacts?namespace=team-b"):
            assert page.evaluate(f"fetch('{path}').then((r) => r.status)") == 403, path
        page.goto(f"{server.url}/#/artifacts/{theirs['artifacts'][0]}/lineage")
        sync_api.expect(page.locator("#artifact-error")).to_contain_text("team-b", timeout=UI_WAIT_MS)
        assert page.locator("#artifact-title, #lineage-explorer").count() == 0
        page.goto(f"{server.url}/#/executions/{theirs['executions'][0]}")
        sync_api.expect(page.locator("#execution-error")).to_contain_text("team-b", timeout=UI_WAIT_MS)
        assert page.locator("#execution-title").count() == 0
        assert not errors, errors
