"""Every row of every manifest corpus under ``../shared/conformance/`` by its README's protocol.

The family tests (``test_training_manifests``, ``test_queue_manifests``, ``test_serving_manifests``,
``test_fluid_manifests``) check their own kinds' rows in depth (what starts, what is stored). This
file is the floor under all of them: it finds every corpus whose README's protocol is ``millpond
apply -f FILE`` (today ``k8s-manifests`` and ``platform-manifests``), and runs each row of its
``EXPECTED.tsv`` through the real CLI in a fresh home, so a row of a kind no family claims (a
RayCluster, a batch Job, a Notebook) is never silently skipped.

A row that can pass only once a later issue's work lands is named in ``conformance/allowlist.tsv``
with that issue's number. Such a row must still fail *cleanly* (one ``error:`` line, exit 2,
nothing stored, no traceback), and it must still fail: once it passes, this test says so, and the
row leaves the list. So the list only shrinks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from millpond.cli.manifest_corpus import Allowed, read_allowlist
from millpond.kinds import REGISTRY
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from millpond.store.secrets import KINDS as CONFIG_KINDS
from millpond.store.secrets import ConfigStore
from millpond.store.training import JobStore

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance"
ALLOWLIST = Path(__file__).resolve().parents[2] / "conformance" / "allowlist.tsv"  # .ci/run passes it too
APPLY_PROTOCOL = "Run each file as `millpond apply -f FILE`"
OUTCOMES = ("apply", "refuse", "either")
MOST_LINES = 4  # "never print more than a few lines"


@dataclass(frozen=True)
class Row:
    """One line of a corpus' EXPECTED.tsv."""

    corpus: str
    file: str
    expected: str
    kinds: str

    @property
    def path(self) -> Path:
        return CONFORMANCE / self.corpus / self.file

    @property
    def key(self) -> str:
        return f"{self.corpus}/{self.file}"


def apply_corpora() -> list[str]:
    """The corpora whose README's protocol is ``millpond apply -f FILE``."""
    if not CONFORMANCE.is_dir():
        return []
    return sorted(readme.parent.name for readme in CONFORMANCE.glob("*/README.md")
                  if APPLY_PROTOCOL in readme.read_text() and (readme.parent / "EXPECTED.tsv").is_file())


def corpus_rows() -> list[Row]:
    rows = []
    for corpus in apply_corpora():
        for line in (CONFORMANCE / corpus / "EXPECTED.tsv").read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            file, expected, kinds = line.split("\t")[:3]
            rows.append(Row(corpus, file, expected, kinds))
    return rows


def allowlist() -> dict[str, Allowed]:
    """The allow-list as ``millpond conformance --allowlist`` reads it (a key listed twice is an error)."""
    return read_allowlist(ALLOWLIST)


def stored_anything() -> list[str]:
    """What a refused apply must not have left: objects of every registered kind, jobs, configs."""
    store, left = ResourceStore(), []
    for kind in REGISTRY.loaded().kinds():
        left += [f"{kind}/{r.namespace}/{r.name}" for r in store.list(kind, None)]
    left += [f"job/{job.namespace}/{job.name}" for job in JobStore().list(None)]
    configs = ConfigStore(load_settings().home)
    left += [f"{kind}/{name}" for kind in CONFIG_KINDS for name, _ in configs.list(kind)]
    return left


def protocol_failures(row: Row, code: int, err: str) -> list[str]:
    """How one ``millpond apply -f`` broke the README's protocol for ``row`` (empty: it passed)."""
    failures = []
    lines = err.strip().splitlines()
    if "Traceback" in err:
        failures.append("printed a traceback")
    if len(lines) > MOST_LINES:
        failures.append(f"printed {len(lines)} lines on stderr")
    if code not in (0, 2):
        failures.append(f"exit {code}")
    if code == 2:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            failures.append("a refusal is not one `error:` line")
        if stored_anything():
            failures.append(f"a refusal stored {stored_anything()}")
    wanted = {"apply": (0,), "refuse": (2,), "either": (0, 2)}[row.expected]
    if code not in wanted:
        failures.append(f"expected {row.expected}, got exit {code}")
    return failures


ROWS = corpus_rows()


def test_the_corpora_are_found_and_every_row_says_an_outcome() -> None:
    if not CONFORMANCE.is_dir():
        pytest.skip("the shared conformance corpora are not beside this checkout")
    assert {"k8s-manifests", "platform-manifests"} <= set(apply_corpora())
    for row in ROWS:
        assert row.expected in OUTCOMES, row
        assert row.path.is_file(), f"{row.key} is in EXPECTED.tsv but not on disk"


def test_the_allowlist_names_only_corpus_rows_and_later_issues() -> None:
    """Each entry is a real row of a corpus and waits for an issue after this one (28)."""
    if not CONFORMANCE.is_dir():
        pytest.skip("the shared conformance corpora are not beside this checkout")
    keys = {row.key for row in ROWS}
    for entry in allowlist().values():
        assert entry.key in keys, f"{entry.key} is allow-listed but is no corpus row"
        assert entry.issue > 28 and entry.why.strip(), entry


@pytest.mark.skipif(not ROWS, reason="the shared conformance corpora are not beside this checkout")
@pytest.mark.parametrize("row", ROWS, ids=[re.sub(r"\W+", "-", row.key)[:90] for row in ROWS])
def test_every_corpus_row_follows_its_protocol(cli, monkeypatch: pytest.MonkeyPatch, row: Row) -> None:
    """``millpond apply -f FILE`` as the README says; a GPU-less machine follows it with gpu-fallback cpu."""
    monkeypatch.setenv("MILLPOND_GPU_FALLBACK", "cpu")
    waiting = allowlist().get(row.key)
    result = cli("apply", "-f", row.path)  # what it started ends with the test's home (conftest)
    failures = protocol_failures(row, result.code, result.err)
    if waiting is None:
        assert not failures, f"{row.key}: {'; '.join(failures)}\n{result.err}"
        return
    # An allow-listed row fails cleanly today, and is taken off the list the day it passes.
    assert failures, f"{row.key} now passes: take it off {ALLOWLIST.name} (it waited for issue {waiting.issue})"
    clean = protocol_failures(Row(row.corpus, row.file, "refuse", row.kinds), result.code, result.err)
    assert not clean, f"{row.key} (waits for issue {waiting.issue}) fails uncleanly: {'; '.join(clean)}"
