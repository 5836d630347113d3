"""The Katib pages in Debian's Chromium: an Experiment that ran (created through the server's Kubernetes API, its
batch Job trials host processes printing ``loss=...`` from a double and a categorical parameter) shows on the
Experiments page with its status, trial counts and best trial; its page shows the trials table, one scatter plot
per parameter against the objective (a point per trial, the best one marked) and the best trial's log."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server_support import Served, call, module_home
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

pytestmark = pytest.mark.timeout(600)
EXPERIMENTS = "/apis/kubeflow.org/v1beta1/namespaces/default/experiments"
# loss from x and the optimizer's name: least at x = 2 with adam
SCRIPT = ("import sys; x = float(sys.argv[1]); bonus = {'adam': 0.0, 'sgd': 1.0}[sys.argv[2]]; "
          "print(f'loss={(x - 2) ** 2 + bonus:.6f}')")


def experiment(name: str) -> dict[str, Any]:
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [sys.executable, "-c", SCRIPT, "${trialParameters.x}", "${trialParameters.opt}"]}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "random",
                                   "algorithmSettings": [{"name": "random_state", "value": "4"}]},
                     "parallelTrialCount": 2, "maxTrialCount": 4,
                     "parameters": [
                         {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "-4", "max": "6"}},
                         {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}}],
                     "trialTemplate": {
                         "primaryContainerName": "training-container", "retain": True,
                         "trialParameters": [{"name": "x", "reference": "x"}, {"name": "opt", "reference": "opt"}],
                         "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
                             "containers": [container], "restartPolicy": "Never"}}}}}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "ui-katib"):
        served = Served()
        yield served
        served.stop()  # the experiment's supervisor ended with it: it Succeeded and no trial is active


def _ran(server: Served, name: str) -> dict[str, Any]:
    """The experiment page's data once the experiment has Succeeded."""
    status, answer = call(server.url, "POST", EXPERIMENTS, body=experiment(name))
    assert status == 201, answer
    deadline = time.monotonic() + 180
    while True:
        status, detail = call(server.url, "GET", f"/ui-api/katib/experiments/default/{name}")
        assert status == 200, detail
        if detail["condition"]["type"] in ("Succeeded", "Failed"):
            return detail
        assert time.monotonic() < deadline, detail
        time.sleep(0.5)


def test_an_experiment_that_ran_shows_its_trials_plot_and_best_trials_log(server: Served, tmp_path: Path) -> None:
    sync_api = _browser()
    detail = _ran(server, "quad")
    assert detail["condition"]["type"] == "Succeeded" and detail["counts"]["trialsSucceeded"] == 4
    best = detail["best"]
    trials = detail["trials"]
    assert len(trials) == 4 and best["objective"] == min(t["objective"] for t in trials)
    status, missing = call(server.url, "GET", "/ui-api/katib/experiments/default/no-such")
    assert status == 404 and 'experiments.kubeflow.org "no-such" not found' in missing["message"], missing

    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/katib")
        row = page.locator('tr.katib-row[data-experiment="default/quad"]')
        row.wait_for(timeout=UI_WAIT_MS)
        row.locator('.state[data-state="Succeeded"]').wait_for(timeout=10_000)
        assert row.locator(".katib-succeeded").inner_text() == "4"
        assert row.locator(".katib-failed").inner_text() == "0"
        assert row.locator(".katib-best").inner_text() == best["name"]
        assert row.locator(".katib-objective").inner_text().startswith("loss = ")
        page.screenshot(path=str(tmp_path / "experiments.png"), full_page=True)

        row.click()
        page.wait_for_url("**/#/katib/default/quad")
        table = page.locator("#katib-trials")
        sync_api.expect(table.locator("tr.katib-trial-row")).to_have_count(4, timeout=UI_WAIT_MS)
        shown = {}
        for trial in trials:
            line = table.locator(f'tr.katib-trial-row[data-trial="{trial["name"]}"]')
            assert line.locator('td[data-parameter="x"]').inner_text() == trial["parameters"]["x"]
            assert line.locator('td[data-parameter="opt"]').inner_text() == trial["parameters"]["opt"]
            shown[trial["name"]] = float(line.locator(".katib-trial-objective").inner_text())
        assert all(abs(shown[t["name"]] - t["objective"]) < 1e-4 for t in trials)
        assert "best" in (table.locator(f'tr[data-trial="{best["name"]}"]').get_attribute("class") or "")

        # one scatter per parameter, a point per trial, the best one marked; categories on their own positions
        plots = page.locator("#katib-plot svg.katib-scatter")
        sync_api.expect(plots).to_have_count(2)
        for parameter in ("x", "opt"):
            points = page.locator(f'svg.katib-scatter[data-parameter="{parameter}"] circle.katib-point')
            sync_api.expect(points).to_have_count(4)
            marked = page.locator(f'svg.katib-scatter[data-parameter="{parameter}"] circle.katib-point.best')
            assert marked.get_attribute("data-trial") == best["name"]
            assert marked.get_attribute("data-value") == best["parameters"][parameter]
        heights = {one.get_attribute("data-trial"): float(one.get_attribute("cy") or 0)
                   for one in page.locator('svg.katib-scatter[data-parameter="x"] circle.katib-point').all()}
        assert max(heights, key=lambda name: heights[name]) == best["name"]  # least loss: lowest on the plot
        opt_x = {one.get_attribute("data-value"): one.get_attribute("cx")
                 for one in page.locator('svg.katib-scatter[data-parameter="opt"] circle.katib-point').all()}
        assert len(set(opt_x.values())) == len(opt_x)  # each category at its own place

        # the best trial's log, chosen at first; another trial's on a click of its row
        log = page.locator("#katib-trial-log")
        x = float(best["parameters"]["x"])
        sync_api.expect(log).to_contain_text("loss=", timeout=UI_WAIT_MS)
        assert f"{best['objective']:.6f}" in log.inner_text()
        other = next(t for t in trials if t["name"] != best["name"])
        table.locator(f'tr[data-trial="{other["name"]}"]').click()
        sync_api.expect(log).to_contain_text(f"loss={other['objective']:.6f}", timeout=UI_WAIT_MS)
        assert -4 <= x <= 6
        page.screenshot(path=str(tmp_path / "experiment.png"), full_page=True)

        # the address Katib's SDK prints opens the same page
        page.goto(server.url + "/#/katib/hp_monitor/default/quad")
        sync_api.expect(page.locator("#katib-trials tr.katib-trial-row")).to_have_count(4, timeout=UI_WAIT_MS)
        assert not errors, errors
