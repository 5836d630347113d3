"""The Notebooks page of a multi-user ``millpond server`` in Chromium: a user sees the notebooks of the namespace the
header's selector shows, among hers only; another team's list is refused (403) to her page, and a notebook she
spawns from the form is hers (its creator annotation names her).

A real ``millpond server --multi-user`` in a process of its own (``test_ui_login``'s helpers: users, profiles,
the login page); team-b's notebook is made by the administrator through the same route the form posts to.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server_support import module_home
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page
from tests.ui_multiuser.test_ui_login import (
    PASSWORDS,
    MultiUserServer,
    _log_in,
    _make_profiles,
    _millpond,
    multi_user_server,
)

pytestmark = pytest.mark.timeout(600)


def _notebooks(namespace: str) -> str:
    return f"/ui-api/namespaces/{namespace}/notebooks"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiUserServer]:
    _browser()  # skips before anything is made when Chromium or playwright is missing
    for home in module_home(tmp_path_factory, "ui-notebooks-multi-user"):
        for name in ("alice", "bob", "root"):
            _millpond(home, "user", "add", name, "--password-stdin", *(["--admin"] if name == "root" else []),
                      stdin=PASSWORDS[name] + "\n")
        _make_profiles(home, {"team-a": "alice", "team-b": "bob"})
        with multi_user_server(home) as served:
            for namespace, name in (("team-a", "alpha"), ("team-b", "beta")):
                status, answer = served.call(_notebooks(namespace), "POST", {
                    "name": name, "image": "jupyter-scipy", "cpu": "0.1", "memory": "256Mi", "workspace": None})
                assert status == 200, answer
            yield served
            for namespace in ("team-a", "team-b"):
                for row in served.call(_notebooks(namespace))[1]["notebooks"]:
                    served.call(f"{_notebooks(namespace)}/{row['name']}", "DELETE")


def test_a_user_sees_the_notebooks_of_her_namespace_only(server: MultiUserServer) -> None:
    sync_api = _browser()
    with chromium_page() as (page, errors):
        _log_in(page, server.url, "alice", PASSWORDS["alice"])
        sync_api.expect(page.locator("#user-name")).to_have_text("alice", timeout=UI_WAIT_MS)
        page.click("header nav a[data-nav=notebooks]")
        sync_api.expect(page.locator('tr.notebook-row[data-notebook="team-a/alpha"]')).to_be_visible(timeout=UI_WAIT_MS)
        assert page.locator('tr.notebook-row[data-notebook="team-b/beta"]').count() == 0
        assert page.locator("#notebooks-namespace").count() == 0  # the header's selector is the namespace
        refused = page.evaluate(f"fetch('{_notebooks('team-b')}').then((r) => r.status)")
        assert refused == 403
        refused = page.evaluate(f"fetch('{_notebooks('team-b')}/beta', {{method: 'DELETE'}}).then((r) => r.status)")
        assert refused == 403

        page.click("#new-notebook")
        sync_api.expect(page.locator("#notebook-form h1")).to_contain_text("team-a", timeout=10_000)
        page.fill("#nb-name", "mine")
        page.fill("#nb-cpu", "0.1")
        page.fill("#nb-memory", "256Mi")
        page.select_option("#nb-workspace-kind", "none")
        page.click("#nb-create")
        sync_api.expect(page.locator('tr.notebook-row[data-notebook="team-a/mine"]')).to_be_visible(timeout=UI_WAIT_MS)
        assert not errors, errors
    status, made = server.call("/apis/millpond/v1/notebooks.kubeflow.org/mine?namespace=team-a")
    assert status == 200, made
    assert made["metadata"]["annotations"]["notebooks.kubeflow.org/creator"] == "alice"
    status, answer = server.call(_notebooks("team-b"))
    assert [row["name"] for row in answer["notebooks"]] == ["beta"]  # bob's namespace untouched
