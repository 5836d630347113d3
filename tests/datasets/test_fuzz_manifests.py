"""Fuzzing the Fluid manifest checks: a mutated manifest (or YAML text) is accepted or refused with a UserError.

Seeds are the Fluid documentation's samples (tests/fuzz_seeds/fluid); every document goes
through the checks ``millpond apply -f`` and ``POST /fluid/apply`` use (envelope, CRD schema,
what a schema cannot say, secret references), nothing else may come out of them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from millpond.datasets.manifests import check_document, read_documents
from millpond.errors import UserError
from millpond.quantities import parse_quantity
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


# --- numbers where a count, a TTL, a size or a list of levels goes (issue 12, defect 6) -----------

# The samples hold no DataMigrate, DataProcess or DataBackup: one each, as Fluid's docs write them.
OPERATIONS = [
    {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataMigrate", "metadata": {"name": "migrate"},
     "spec": {"from": {"dataset": {"name": "hbase", "namespace": "default"}},
              "to": {"externalStorage": {"uri": "local:///absent/out"}}, "parallelism": 2}},
    {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataProcess", "metadata": {"name": "process"},
     "spec": {"dataset": {"name": "hbase", "namespace": "default", "mountPath": "/data"},
              "processor": {"script": {"image": "debian", "source": "ls /data"}}}},
    {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataBackup", "metadata": {"name": "backup"},
     "spec": {"dataset": "hbase", "backupPath": "local:///absent/backup"}},
]
RUNTIMES = [doc for doc in DOCUMENTS if str(doc.get("kind", "")).endswith("Runtime")]
LOADS = [doc for doc in DOCUMENTS if doc.get("kind") == "DataLoad"]
INT32_MAX = 2**31 - 1

numbers = st.one_of(
    st.integers(), st.integers(-(2**70), 2**70), st.floats(), st.none(), st.booleans(), st.text(max_size=8),
    st.sampled_from([-1, 0, 1, INT32_MAX, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**400, -0.5, 1.5]),
)
quantities = st.one_of(
    numbers,
    st.builds(lambda n, exp, suffix: f"{n}{exp}{suffix}", st.integers(-(2**70), 2**70),
              st.sampled_from(["", "e3", "e400", "e-400", ".5"]),
              st.sampled_from(["", "Ki", "Mi", "Gi", "Ei", "m", "x"])),
)
levels = st.lists(st.fixed_dictionaries({"mediumtype": st.sampled_from(["MEM", "SSD", "HDD"]), "quota": quantities}),
                  max_size=3)


def _count(low: int) -> Any:
    """What an accepted manifest may hold in an int32 count with minimum ``low`` (JSON's 2.0 is an integer too)."""
    return lambda value: (isinstance(value, (int, float)) and not isinstance(value, bool)
                          and float(value).is_integer() and low <= value <= INT32_MAX)


# (seeds, path under the document, values drawn, what an accepted document holds there)
NUMERIC_FIELDS = [
    (RUNTIMES, ("spec", "replicas"), numbers, _count(0)),
    (RUNTIMES, ("spec", "master", "replicas"), numbers, lambda value: True),  # an open object on some runtimes
    (RUNTIMES, ("spec", "tieredstore", "levels"), levels, lambda value: isinstance(value, list) and value != []),
    (LOADS + OPERATIONS, ("spec", "ttlSecondsAfterFinished"), numbers, _count(0)),
    (OPERATIONS[:1], ("spec", "parallelism"), numbers, _count(1)),
]


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
        doc = doc[key]
    doc[path[-1]] = value


@st.composite
def numeric_edits(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[str, ...], Any]:
    """A seed with one count, TTL or levels field set to a drawn value; the rule an accepted document keeps."""
    seeds, path, values, accepted = draw(st.sampled_from(NUMERIC_FIELDS))
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    _set(doc, path, draw(values))
    return doc, path, accepted


@fuzz_settings(examples=600)
@given(edit=numeric_edits())
def test_any_number_in_a_count_ttl_or_size_is_accepted_only_if_it_can_work(
    secrets: ConfigStore, tmp_path_factory: pytest.TempPathFactory, edit: Any
) -> None:
    """Any value, as a document (SDK, API) and as YAML text (apply -f): a UserError or a value that can work."""
    doc, path, accepted = edit
    try:
        manifest = check_document(doc, "fuzz.yaml", 1, secrets)
    except UserError:
        pass
    else:
        value: Any = manifest.body
        for key in path:
            value = value[key]
        assert accepted(value), (path, value)
        for level in (manifest.spec.get("tieredstore") or {}).get("levels") or []:
            if "quota" in level:
                assert parse_quantity(level["quota"]).bytes > 0
    text_path = Path(tmp_path_factory.getbasetemp()) / "fuzz-numbers.yaml"
    text_path.write_text(yaml.safe_dump(doc), encoding="utf-8", errors="surrogatepass")
    try:
        for source, number, parsed in read_documents([str(text_path)]):
            check_document(parsed, source, number, secrets)
    except UserError:
        pass
