"""A corpus that states each file's end state in an ``EXPECTED.tsv`` (the kfp-v1 corpus), run by its protocol.

The v2 corpus is judged by folder; the kfp-v1 corpus (``../shared/conformance/kfp-v1``) lists
every workflow with the state its run must end in (SUCCEEDED, FAILED, or REFUSED: refused
before anything is recorded), the parameters to submit, and preconditions: a secret
``user-gcp-sa`` and a PVC ``data-volume``. ``millpond conformance`` picks this runner when the
folder holds an ``EXPECTED.tsv``, so the same command runs both corpora.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.conformance import Attempt, ConformanceRunner, Verdict, missed_hits
from millpond.pipelines.loader import LoadedPipeline, load_pipeline
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.secrets import ConfigStore

EXPECTED_FILE = "EXPECTED.tsv"
STATES = ("SUCCEEDED", "FAILED", "REFUSED")
# The kfp-v1 README's preconditions: a secret with any content, and an empty PVC.
V1_SECRETS = {"user-gcp-sa": {"user-gcp-sa.json": "{}"}}
V1_VOLUMES = ("data-volume",)


@dataclass(frozen=True)
class Row:
    """One line of EXPECTED.tsv: the file, the state its run must end in, the parameters to submit."""

    file: Path
    expected: str
    params: dict[str, Any]


def has_expectations(folder: Path) -> bool:
    return (folder / EXPECTED_FILE).is_file()


def read_rows(folder: Path) -> list[Row]:
    """EXPECTED.tsv's rows (a header line first); a malformed row is the user's error, naming its line."""
    rows = []
    lines = (folder / EXPECTED_FILE).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        where = f"{folder / EXPECTED_FILE}:{number}"
        if len(fields) < 3 or fields[1] not in STATES:
            raise UserError(f"{where}: expected FILE<TAB>{'|'.join(STATES)}<TAB>PARAMS(JSON or -)")
        try:
            params = {} if fields[2] == "-" else json.loads(fields[2])
        except ValueError:
            raise UserError(f"{where}: the parameters are not JSON") from None
        if not isinstance(params, dict):
            raise UserError(f"{where}: the parameters are not a JSON object")
        rows.append(Row(folder / fields[0], fields[1], params))
    if not rows:
        raise UserError(f"{folder / EXPECTED_FILE}: no rows")
    return rows


class ExpectedRunner(ConformanceRunner):
    """Runs each row's file with its parameters and compares the end state with the row's."""

    def __init__(self, folder: Path, timeout_s: float = 300.0, seed: int | None = None, twice: bool = False) -> None:
        super().__init__(timeout_s=timeout_s, seed=seed, twice=twice)
        self.rows = {row.file: row for row in read_rows(folder)}

    def files(self, folder: Path) -> list[Path]:
        return list(self.rows)

    def _create_secrets(self) -> None:
        settings = load_settings()
        configs = ConfigStore(settings.home)
        for name, data in V1_SECRETS.items():
            configs.create("secret", name, data, replace=True)
        for name in V1_VOLUMES:
            volume_folders.folder(settings.volumes_dir, "default", name).mkdir(parents=True, exist_ok=True)

    def run_one(self, file: Path, scratch: Path) -> Verdict:
        row = self.rows[file]
        started = time.monotonic()
        verdict = Verdict(file, row.expected, "INVALID", 0.0, ok=False)
        try:
            loaded = load_pipeline(file)
            first = self._attempt(file, loaded, dict(row.params))
        except UserError as exc:  # refused before anything ran
            verdict.got, verdict.reason = "REFUSED", str(exc)
            verdict.ok = row.expected == "REFUSED"
        else:
            verdict.got, verdict.reason = first.result.state, first.result.error or ""
            verdict.ok = verdict.got == row.expected
            if verdict.ok and self.twice:
                self._again(file, loaded, row, first, verdict)
        verdict.seconds = time.monotonic() - started
        return verdict

    def _again(self, file: Path, loaded: LoadedPipeline, row: Row, first: Attempt, verdict: Verdict) -> None:
        """The second run on the same home: the same end, and a cache hit for every task that can be one."""
        second = self._attempt(file, loaded, dict(row.params))
        verdict.second = second.result.state
        verdict.cached = sum(1 for t in second.tasks if t.cached)
        missed = missed_hits(loaded.spec, first.tasks, second.tasks)
        if second.result.state != row.expected:
            problem = f"ended {second.result.state}: {second.result.error or ''}"
        elif missed:
            problem = f"task {missed[0]!r} was not a cache hit, though its first run succeeded with the same inputs"
        else:
            return
        verdict.ok, verdict.reason = False, f"second run: {problem}"
