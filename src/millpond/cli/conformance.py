"""``millpond conformance DIR``: a table of file, expected, got, seconds and first error line.

With ``--twice``, GOT shows both runs' states and how many tasks of the second were cache hits.
A manifest corpus (``--manifests``, or a README whose protocol is ``millpond apply -f FILE``) runs
through ``manifest_corpus``: one line per row, then the rows that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from millpond.cli.manifest_corpus import (
    CorpusRunner,
    RowVerdict,
    is_manifest_corpus,
    read_allowlist,
    read_rows,
    stale_entries,
)
from millpond.cli.render import stdout_console, styled
from millpond.errors import UserError
from millpond.pipelines.conformance import ConformanceRunner, Verdict
from millpond.pipelines.conformance_expected import ExpectedRunner, has_expectations


@dataclass(frozen=True)
class ManifestOptions:
    """How to run a manifest corpus: asked for explicitly, its allow-list, and what a corpus lacks."""

    required: bool = False  # --manifests: a folder that is no manifest corpus is an error, not a KFP run
    allowlist: Path | None = None
    expected: Path | None = None
    before: Path | None = None
    jobs: int = 2


def conformance(folder: Path, timeout: float, seed: int | None, twice: bool = False,
                manifests: ManifestOptions | None = None) -> int:
    options = manifests or ManifestOptions()
    if options.required or options.expected or is_manifest_corpus(folder):
        return manifest_conformance(folder, timeout, options)
    console = stdout_console()
    runner = (ExpectedRunner(folder, timeout_s=timeout, seed=seed, twice=twice) if has_expectations(folder)
              else ConformanceRunner(timeout_s=timeout, seed=seed, twice=twice))

    def report(verdict: Verdict) -> None:
        mark = "skip" if verdict.skipped else "ok" if verdict.ok else "FAIL"
        line = f"{mark:4} {_name(verdict, folder)}  {_got(verdict)}  {verdict.seconds:.1f}s"
        console.print(line, highlight=False, markup=False)

    verdicts = runner.run_all(folder, report)
    table = Table(box=None, header_style="bold")
    for column in ("FILE", "EXPECTED", "GOT", "SECONDS", "FIRST ERROR LINE"):
        table.add_column(column)
    for v in verdicts:
        first_line = (v.reason or "").strip().splitlines()[0][:140] if v.reason else ""
        got = _got(v) if v.skipped else styled(_got(v)) if v.ok else f"[red]{_got(v)}[/]"
        table.add_row(_name(v, folder), v.expected, got, f"{v.seconds:.1f}", first_line)
    console.print(table)
    judged = [v for v in verdicts if not v.skipped]
    passed = sum(1 for v in judged if v.ok)
    failed = len(judged) - passed
    skipped = len(verdicts) - len(judged)
    summary = f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "")
    console.print(summary, highlight=False, markup=False)
    return 1 if failed else 0


def _got(verdict: Verdict) -> str:
    """The end state, and with ``--twice`` the second run's too: ``SUCCEEDED, then SUCCEEDED (3 cached)``."""
    if not verdict.second:
        return verdict.got
    return f"{verdict.got}, then {verdict.second} ({verdict.cached} cached)"


def _name(verdict: Verdict, folder: Path) -> str:
    try:
        return str(verdict.file.relative_to(folder))
    except ValueError:
        return str(verdict.file)


def manifest_conformance(folder: Path, timeout: float, options: ManifestOptions) -> int:
    """Every row of a manifest corpus; allow-listed rows must fail cleanly, and one that passes fails the run."""
    if options.expected is None and not is_manifest_corpus(folder):
        raise UserError(f"{folder}: not a manifest corpus millpond knows (no README with the `millpond apply -f FILE` "
                        "protocol and EXPECTED.tsv, and no --expected file)")
    rows = read_rows(folder, options.expected)
    allowlist = read_allowlist(options.allowlist) if options.allowlist else {}
    console = stdout_console()

    def report(verdict: RowVerdict) -> None:
        mark = "FAIL" if not verdict.ok else "ok" if verdict.allowed is None else "known"
        got = {0: "applied", 2: "refused"}.get(verdict.applied.code, f"exit {verdict.applied.code}")
        line = f"{mark:5} {verdict.row.file.name}  {verdict.row.expected}  {got}  {verdict.applied.seconds:.1f}s"
        if verdict.allowed is not None:
            line += f"  (allow-listed, issue {verdict.allowed.issue})"
        console.print(line, highlight=False, markup=False)

    verdicts = CorpusRunner(options.before, options.jobs, timeout).run(rows, allowlist, report)
    failed = [v for v in verdicts if not v.ok]
    for verdict in failed:
        first = (verdict.applied.err.strip().splitlines() or [""])[-1][:200]
        console.print(f"[red]FAIL[/] {verdict.row.key}: {'; '.join(verdict.failures)}", highlight=False)
        if first:
            console.print(f"      {first}", highlight=False, markup=False)
    stale = stale_entries(folder.name, rows, allowlist)
    for key in stale:
        console.print(f"[red]FAIL[/] {key} is allow-listed but is no row of {folder}", highlight=False)
    known = sum(1 for v in verdicts if v.ok and v.allowed is not None)
    passed = len(verdicts) - len(failed) - known
    console.print(f"{passed} passed, {known} known failures (allow-listed), {len(failed) + len(stale)} failed",
                  highlight=False, markup=False)
    return 1 if failed or stale else 0
