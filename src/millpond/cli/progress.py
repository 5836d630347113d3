"""Live progress of a run on the terminal: a table of tasks that redraws, or one line per change."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from millpond.cli.render import STATE_STYLE

_SHOWN_ROWS = 20  # a large run shows its running and failed tasks and the latest others, not all of them


class RunProgress:
    """An engine Listener that shows each task's state while the run goes on (on stderr).

    On a terminal it redraws a table: every task of a small run; for a large one, counts by
    state plus the tasks worth watching, so drawing stays cheap at thousands of tasks.
    Elsewhere (CI, a pipe) it prints one line per task that ends.
    """

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.tasks: dict[str, tuple[str, str, float, float | None, str | None]] = {}
        self.run_state = "PENDING"
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live: Live | None = None

    def __enter__(self) -> "RunProgress":
        if self.console.is_terminal:
            self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=8)
            self._live.__enter__()
        else:
            self.console.print(f"run {self.title}")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None:
        now = time.monotonic()
        with self._lock:
            previous = self.tasks.get(path)
            started = previous[2] if previous and previous[1] != "PENDING" else now  # a wait is not run time
            finished = now if state not in ("RUNNING", "PENDING") else None
            self.tasks[path] = (name, state, started, finished, error)
        if self._live is None and state not in ("RUNNING", "PENDING"):
            # Written as it is, not through rich's renderer (~1 ms a line): a cancelled loop of
            # 20,000 tasks prints 20,000 lines, and the process should end in well under that.
            suffix = f": {error}" if error else ""
            with self._lock:
                self.console.file.write(f"  {path}: {state}{suffix}\n")

    def run_changed(self, state: str, error: str | None) -> None:
        self.run_state = state

    def note(self, line: str) -> None:
        """Something the run says once (the images it did not use), under the progress."""
        with self._lock:
            self.console.file.write(f"note: {line}\n")

    def _render(self) -> Group:
        table = Table(box=None, show_header=False, padding=(0, 1))
        table.add_column(width=2)
        table.add_column()
        table.add_column()
        table.add_column(justify="right")
        now = time.monotonic()
        with self._lock:
            rows = list(self.tasks.items())
        counts: dict[str, int] = {}
        for _path, (_name, state, *_rest) in rows:
            counts[state] = counts.get(state, 0) + 1
        shown = rows
        if len(rows) > _SHOWN_ROWS:
            watch = [r for r in rows if r[1][1] in ("RUNNING", "FAILED")][:_SHOWN_ROWS]
            shown = watch + [r for r in rows[-(_SHOWN_ROWS - len(watch)):] if r[1][1] not in ("RUNNING", "FAILED")]
        for path, (_name, state, started, finished, error) in shown:
            icon: Spinner | Text
            if state == "RUNNING":
                icon = Spinner("dots", style="cyan")
            else:
                icon = Text(
                    {"SUCCEEDED": "✔", "FAILED": "✘", "SKIPPED": "↷"}.get(state, "·"), style=STATE_STYLE.get(state, "")
                )
            seconds = (finished or now) - started
            label = Text(state, style=STATE_STYLE.get(state, ""))
            if error and state == "FAILED":
                label.append(f"  {error[:100]}", style="dim")
            table.add_row(icon, Text(path), label, f"{seconds:.1f}s")
        done = sum(n for state, n in counts.items() if state not in ("RUNNING", "PENDING"))
        header = Text.assemble(
            ("run ", "bold"), (self.title, "bold"), f"  {done}/{len(rows)} tasks final  ",
            *[(f"{state.lower()} {n}  ", STATE_STYLE.get(state, "")) for state, n in sorted(counts.items())],
            (f"{now - self.started:.1f}s", "dim"),
        )
        return Group(header, table)


@contextmanager
def step_status(console: Console, message: str) -> Iterator[None]:
    """One long step before a run (installing kfp 1.8 for v1 code): a spinner on a terminal, a line elsewhere.

    It ends with a line saying how long the step took, so a log shows where a slow start went.
    """
    started = time.monotonic()
    if console.is_terminal:
        with console.status(message):
            yield
    else:
        console.print(f"{message}...", markup=False, highlight=False, soft_wrap=True)
        yield
    console.print(f"{message}: done in {time.monotonic() - started:.0f} s", markup=False, highlight=False,
                  soft_wrap=True)
