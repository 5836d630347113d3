"""Every row of the shared manifest corpora through the real ``kubectl apply -f`` against one real server.

The corpora's protocol (their README) is written for ``millpond apply -f``; issue 30 asks that the
same files behave as their EXPECTED.tsv line says when a Kubeflow user brings them with kubectl.
kubectl sends a file's documents one by one, so a refused document is refused by the server
(``Error from server (…)``, kubectl exits 1) after the documents before it were applied, as on any
cluster; what the protocol checks here is that the refused document's object is not stored.
A row on the allow-list (conformance/allowlist.tsv) is refused until its issue lands, as with
``millpond apply``. Files whose objects carry only ``generateName`` are created (``kubectl create
-f``): kubectl itself refuses to apply them, on any cluster. Each row's objects are deleted after it
(``kubectl delete -f``), so one server serves the whole corpus and every delete is exercised too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from millpond.cli.manifest_corpus import read_allowlist, read_rows
from tests.kube_support import Kubectl, kubectl_for
from tests.server_support import Served, module_home

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MILLPOND_SHARED", ROOT.parent / "shared"))
CORPORA = {
    "k8s-manifests": (SHARED / "conformance" / "k8s-manifests", None, None),
    "fluid-manifests": (SHARED / "conformance" / "fluid-manifests", ROOT / "conformance" / "fluid-manifests" /
                        "EXPECTED.tsv", ROOT / "conformance" / "fluid-manifests" / "before.yaml"),
}
ALLOWED = read_allowlist(ROOT / "conformance" / "allowlist.tsv")


def rows() -> list[pytest.param]:
    found = []
    for corpus, (folder, expected, _) in CORPORA.items():
        if folder.is_dir():
            found += [pytest.param(corpus, row, id=f"{corpus}/{row.file.name}") for row in read_rows(folder, expected)]
    return found or [pytest.param(None, None, marks=pytest.mark.skip(reason=f"no corpora under {SHARED}"))]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "kubectl-corpora"):
        server = Served()
        yield server
        server.stop()


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    client = kubectl_for(served, tmp_path_factory.mktemp("kubectl"))
    for _, (_, _, before) in CORPORA.items():
        if before is not None and before.exists():
            client.ok("apply", "-f", str(before))
    return client


def _only_generated(path: Path) -> bool:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]
    return bool(docs) and all(not (doc.get("metadata") or {}).get("name") for doc in docs)


@pytest.mark.parametrize(("corpus", "row"), rows())
def test_a_corpus_row_through_kubectl(kubectl: Kubectl, corpus: str, row: object) -> None:
    file = row.file  # type: ignore[attr-defined]
    expected = row.expected  # type: ignore[attr-defined]
    allowed = ALLOWED.get(f"{corpus}/{file.name}")
    verb = "create" if _only_generated(file) else "apply"
    done = kubectl.run(verb, "-f", str(file), timeout=300)
    try:
        output = done.stdout + done.stderr
        assert "InternalError" not in output and "Traceback" not in output, output
        if allowed is not None or expected == "refuse":
            assert done.returncode != 0, f"{file.name} should be refused ({allowed or expected}): {output}"
            refused = ("Error from server", "error:", " is invalid: ")  # Invalid: 'The KIND "x" is invalid: …'
            assert any(line in done.stderr for line in refused), output
        elif expected == "apply":
            assert done.returncode == 0, output
    finally:
        kubectl.run("delete", "-f", str(file), "--ignore-not-found", "--wait=false", timeout=300)
