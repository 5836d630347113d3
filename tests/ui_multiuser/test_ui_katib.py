"""The Katib pages of a multi-user ``millpond server`` in Chromium: a user sees the Experiments of her namespace
only, opens hers with its trials and reads a trial's log through the Kubernetes API with her session; another
team's experiment is refused (403) to her page.

A real ``millpond server --multi-user`` in a process of its own (``test_ui_login``'s helpers); the two teams'
Experiments (one trial each, run to their end) are created by the administrator through the Kubernetes API.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

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
LIST = "/ui-api/katib/experiments"


def experiment(namespace: str) -> dict[str, Any]:
    script = f"import sys; print('{namespace} loss=' + str(float(sys.argv[1]) ** 2))"
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [sys.executable, "-c", script, "${trialParameters.x}"]}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": f"tune-{namespace[-1]}"},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "random"}, "maxTrialCount": 1, "parallelTrialCount": 1,
                     "parameters": [{"name": "x", "parameterType": "double",
                                     "feasibleSpace": {"min": "-1", "max": "1"}}],
                     "trialTemplate": {"primaryContainerName": "training-container", "retain": True,
                                       "trialParameters": [{"name": "x", "reference": "x"}],
                                       "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                                           "spec": {"containers": [container], "restartPolicy": "Never"}}}}}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiUserServer]:
    _browser()  # skips before anything is made when Chromium or playwright is missing
    for home in module_home(tmp_path_factory, "ui-katib-multi-user"):
        for name in ("alice", "bob", "root"):
            _millpond(home, "user", "add", name, "--password-stdin", *(["--admin"] if name == "root" else []),
                      stdin=PASSWORDS[name] + "\n")
        _make_profiles(home, {"team-a": "alice", "team-b": "bob"})
        with multi_user_server(home) as served:
            for namespace in ("team-a", "team-b"):
                status, answer = served.call(f"/apis/kubeflow.org/v1beta1/namespaces/{namespace}/experiments", "POST",
                                             experiment(namespace))
                assert status == 201, answer
            deadline = time.monotonic() + 120
            for namespace in ("team-a", "team-b"):
                while (shown := served.call(f"{LIST}/{namespace}/tune-{namespace[-1]}")[1])["condition"][
                        "type"] != "Succeeded":
                    assert time.monotonic() < deadline, shown
                    time.sleep(0.5)
            yield served


def test_a_user_sees_her_namespaces_experiments_and_their_trials_logs(server: MultiUserServer) -> None:
    sync_api = _browser()
    with chromium_page() as (page, errors):
        _log_in(page, server.url, "alice", PASSWORDS["alice"])
        sync_api.expect(page.locator("#user-name")).to_have_text("alice", timeout=UI_WAIT_MS)
        page.click("header nav a[data-nav=katib]")
        mine = page.locator('tr.katib-row[data-experiment="team-a/tune-a"]')
        sync_api.expect(mine).to_be_visible(timeout=UI_WAIT_MS)
        assert page.locator('tr.katib-row[data-experiment="team-b/tune-b"]').count() == 0
        refused = page.evaluate(f"fetch('{LIST}/team-b/tune-b').then((r) => r.status)")
        assert refused == 403
        refused = page.evaluate(f"fetch('{LIST}?namespace=team-b').then((r) => r.status)")
        assert refused == 403

        mine.click()
        sync_api.expect(page.locator("#katib-trials tr.katib-trial-row")).to_have_count(1, timeout=UI_WAIT_MS)
        sync_api.expect(page.locator("#katib-trial-log")).to_contain_text("team-a loss=", timeout=UI_WAIT_MS)
        assert not errors, errors
