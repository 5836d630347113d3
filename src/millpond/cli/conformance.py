"""``millpond conformance DIR``: a table of file, expected, got, seconds and first error line.

With ``--twice``, GOT shows both runs' states and how many tasks of the second were cache hits.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from millpond.cli.render import stdout_console, styled
from millpond.pipelines.conformance import ConformanceRunner, Verdict
from millpond.pipelines.conformance_expected import ExpectedRunner, has_expectations


def conformance(folder: Path, timeout: float, seed: int | None, twice: bool = False) -> int:
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
