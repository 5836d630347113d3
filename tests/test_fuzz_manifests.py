"""Fuzzing the Fluid manifest checks: a mutated manifest (or YAML text) is accepted or refused with a UserError.

Seeds are the Fluid documentation's samples (tests/fuzz_seeds/fluid); every document goes
through the checks ``millpond apply -f`` and ``POST /fluid/apply`` use (envelope, CRD schema,
what a schema cannot say, secret references), nothing else may come out of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given

from millpond.datasets.manifests import check_document, read_documents
from millpond.errors import UserError
from millpond.store.secrets import ConfigStore
from tests.fuzz_support import SEEDS, fuzz_settings, mutated, mutated_text

FILES = sorted((SEEDS / "fluid").glob("*.yaml"))
TEXTS = [path.read_text() for path in FILES]
DOCUMENTS = [doc for text in TEXTS for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> ConfigStore:
    """The secrets the samples name, so that mutations reach past the secret-reference check."""
    store = ConfigStore(tmp_path_factory.mktemp("fuzz-home"))
    store.create("secret", "mysecret", {"aws.accessKeyId": "AKIA-fuzz", "aws.secretKey": "fuzz-secret"})
    store.create("secret", "jfs-secret", {"metaurl": "redis://fuzz", "access-key": "ak", "secret-key": "sk",
                                          "token": "tk"})
    return store


def check_or_refuse(doc: Any, secrets: ConfigStore) -> None:
    try:
        check_document(doc, "fuzz.yaml", 1, secrets)
    except UserError:
        pass


def test_there_are_seeds() -> None:
    assert len(DOCUMENTS) >= 30


@fuzz_settings(examples=1000)
@given(doc=mutated(DOCUMENTS))
def test_mutated_manifest_is_accepted_or_refused(secrets: ConfigStore, doc: Any) -> None:
    check_or_refuse(doc, secrets)


@fuzz_settings(examples=800)
@given(text=mutated_text(TEXTS))
def test_mutated_manifest_text_is_accepted_or_refused(secrets: ConfigStore, text: str, tmp_path_factory:
                                                      pytest.TempPathFactory) -> None:
    path = Path(tmp_path_factory.getbasetemp()) / "fuzz-manifest.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        documents = read_documents([str(path)])
    except UserError:
        return
    for source, number, doc in documents:
        try:
            check_document(doc, source, number, secrets)
        except UserError:
            pass
