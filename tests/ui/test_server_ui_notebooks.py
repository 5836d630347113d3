"""The Notebooks page in Debian's Chromium: the spawner form's errors, each shown beside its field with nothing
created; a notebook spawned from the form (a share of a fake GPU, a new workspace PVC, a PVC and a Fluid
dataset as data volumes) turning running; Connect opening JupyterLab through the server's proxy in a new tab;
Stop, Start and Delete from the list. ``MILLPOND_FAKE_GPUS``: one fake GPU of 16 GiB."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from millpond.notebooks import objects
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.datasets_support import manifest
from tests.server_support import Served, call, module_home
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

pytestmark = pytest.mark.timeout(600)
API = "/apis/millpond/v1"
NOTEBOOKS = "/ui-api/namespaces/default/notebooks"
IMAGE = "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:latest"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    old = os.environ.get("MILLPOND_FAKE_GPUS")
    os.environ["MILLPOND_FAKE_GPUS"] = "1x16Gi"
    for home in module_home(tmp_path_factory, "ui-notebooks"):
        served = Served()
        source = home.parent / "ds-source"
        source.mkdir()
        (source / "a.txt").write_text("a")
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "scratch"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        for body in (manifest("ds", f"local://{source}", secret=False), [claim]):  # YAML text in a JSON string
            status, answer = call(served.url, "POST", f"{API}/fluid/apply", body=body)
            assert status == 200, answer
        yield served
        for resource in ResourceStore(load_settings()).list("Notebook", None):
            objects.delete(load_settings(), resource.namespace, resource.name)
        served.stop()
    if old is None:
        os.environ.pop("MILLPOND_FAKE_GPUS", None)
    else:
        os.environ["MILLPOND_FAKE_GPUS"] = old


def _pvc_names(server: Served) -> list[str]:
    status, answer = call(server.url, "GET", "/ui-api/namespaces/default/pvcs")
    assert status == 200, answer
    return sorted(one["name"] for one in answer["pvcs"])


# (what is typed, what then makes it right, the field whose error shows, words of the error), in order
FORM_ERRORS = [
    ([("#nb-name", "Not_DNS")], [("#nb-name", "lab")], "name", "RFC 1123 label"),
    ([("#nb-image", "")], [], "image", "Required value"),
    ([("#nb-image", "Not An Image!")], [("#nb-image", IMAGE)], "image", "is not a valid image reference"),
    ([("#nb-cpu", "100000")], [("#nb-cpu", "0.5")], "cpu", "can never run on this machine: requests 100000 CPUs"),
    ([("#nb-memory", "100Ti")], [("#nb-memory", "1Gi")], "memory", "can never run on this machine"),
    ([("#nb-gpu-kind", "whole"), ("#nb-gpu-count", "2")], [], "gpus",
     "requests 2 nvidia.com/gpu but this machine has only 1"),
    ([("#nb-gpu-kind", "shared"), ("#nb-gpu-memory", "64")], [("#nb-gpu-memory", "4")], "gpus",
     "can never run on this machine"),
]


def _submit_and_expect(sync_api: Any, page: Any, field: str, text: str) -> None:
    page.click("#nb-create")
    sync_api.expect(page.locator(f"#nb-error-{field}")).to_contain_text(text, timeout=10_000)
    shown = [one for one in page.locator(".field-error").all_inner_texts() if one.strip()]
    assert len(shown) == 1, shown  # one error, beside its field


def test_the_forms_errors_are_shown_beside_their_fields_and_nothing_is_created(server: Served) -> None:
    sync_api = _browser()
    before = _pvc_names(server)
    assert before == ["ds", "scratch"]
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/notebooks")
        sync_api.expect(page.locator("#notebooks")).to_contain_text("No notebooks in default", timeout=10_000)
        page.click("#new-notebook")
        page.locator("#notebook-form").wait_for(timeout=10_000)
        for bad, fixed, field, words in FORM_ERRORS:
            for selector, value in bad:
                (page.select_option if selector == "#nb-gpu-kind" else page.fill)(selector, value)
            _submit_and_expect(sync_api, page, field, words)
            for selector, value in fixed:
                page.fill(selector, value)
        # a data volume of another namespace: a hostile page sends what no option offers
        page.click("#nb-add-datavol")
        hostile = "document.querySelector('#nb-datavol-claim-0').append(new Option('x', '%s', true, true))"
        page.evaluate(hostile % "team-b/data")
        _submit_and_expect(sync_api, page, "datavols-0", "is a PVC of another namespace ('team-b')")
        page.evaluate(hostile % "gone")
        _submit_and_expect(sync_api, page, "datavols-0", "no PVC 'gone' in namespace default")
        assert not errors, errors
    status, answer = call(server.url, "GET", NOTEBOOKS)
    assert status == 200 and answer["notebooks"] == []  # nothing created: no Notebook, no workspace PVC
    assert _pvc_names(server) == before


def test_spawn_connect_stop_start_and_delete_a_notebook(server: Served) -> None:
    sync_api = _browser()
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/notebooks/new")
        page.locator("#notebook-form").wait_for(timeout=10_000)
        page.fill("#nb-name", "lab")
        page.fill("#nb-cpu", "0.5")
        page.fill("#nb-memory", "1Gi")
        page.select_option("#nb-gpu-kind", "shared")
        page.fill("#nb-gpu-memory", "4")
        page.fill("#nb-gpu-core", "50")
        page.click("#nb-add-datavol")
        page.select_option("#nb-datavol-claim-0", "scratch")
        page.click("#nb-add-datavol")
        page.select_option("#nb-datavol-claim-1", "ds")
        page.fill("#nb-datavol-mount-1", "/home/jovyan/datasets/ds")
        page.click("#nb-create")
        row = page.locator('tr.notebook-row[data-notebook="default/lab"]')
        sync_api.expect(row).to_be_visible(timeout=UI_WAIT_MS)
        sync_api.expect(row.locator(".nb-cpu")).to_have_text("0.5")
        sync_api.expect(row.locator(".nb-memory")).to_have_text("1Gi")
        sync_api.expect(row.locator(".nb-gpus")).to_have_text("share: 4 GiB of one GPU, 50% of its compute")
        sync_api.expect(row.locator(".nb-image")).to_have_text("jupyter-scipy:latest")
        sync_api.expect(row.locator(".nb-status [data-phase]")).to_have_text("running", timeout=180_000)

        # the Notebook the JWA's backend would make of that form: requests, equal limits, the volumes
        status, made = call(server.url, "GET", f"{API}/notebooks.kubeflow.org/lab?namespace=default")
        assert status == 200, made
        pod = made["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["resources"] == {"requests": {"cpu": "0.5", "memory": "1Gi"}, "limits": {
            "cpu": "0.5", "memory": "1Gi", "aliyun.com/gpu-mem": "4", "aliyun.com/gpu-core.percentage": "50"}}
        assert container["volumeMounts"] == [{"name": "lab-workspace", "mountPath": "/home/jovyan"},
                                             {"name": "scratch", "mountPath": "/home/jovyan/scratch"},
                                             {"name": "ds", "mountPath": "/home/jovyan/datasets/ds"}]
        assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]] == ["lab-workspace", "scratch", "ds"]
        assert made["metadata"]["annotations"]["notebooks.kubeflow.org/creator"] == "anonymous"
        assert "lab-workspace" in _pvc_names(server)

        # a notebook that wants the whole GPU this one shares waits, saying why, in its row
        status, answer = call(server.url, "POST", NOTEBOOKS, body={
            "name": "waiter", "image": IMAGE, "cpu": "0.1", "memory": "256Mi", "workspace": None,
            "gpus": {"num": "1", "vendor": "nvidia.com/gpu"}})
        assert status == 200, answer
        waiter = page.locator('tr.notebook-row[data-notebook="default/waiter"]')
        sync_api.expect(waiter.locator(".nb-status [data-phase]")).to_have_text("waiting", timeout=60_000)
        sync_api.expect(waiter.locator(".nb-reason")).to_contain_text("GPU", timeout=60_000)
        assert call(server.url, "DELETE", f"{NOTEBOOKS}/waiter")[0] == 200

        with page.context.expect_page(timeout=30_000) as opened:
            row.locator("a.nb-connect").click()
        lab = opened.value
        lab.wait_for_load_state()
        assert lab.url == f"{server.url}/notebook/default/lab/lab"
        lab.locator(".jp-LabShell").wait_for(timeout=90_000)  # JupyterLab's own scripts ran, through the proxy
        lab.close()

        row.locator("button.nb-stop").click()
        sync_api.expect(row.locator(".nb-status [data-phase]")).to_have_text("stopped", timeout=60_000)
        sync_api.expect(row.locator("span.nb-connect")).to_be_visible()  # no Connect while stopped
        row.locator("button.nb-start").click()
        sync_api.expect(row.locator(".nb-status [data-phase]")).to_have_text("running", timeout=180_000)

        page.once("dialog", lambda dialog: dialog.accept())
        row.locator("button.nb-delete").click()
        sync_api.expect(page.locator("#notebooks")).to_contain_text("No notebooks in default", timeout=60_000)
        assert not errors, errors
    assert ResourceStore(load_settings()).get("Notebook", "lab", "default") is None
    assert "lab-workspace" in _pvc_names(server)  # the workspace outlives its notebook, as a PVC does
