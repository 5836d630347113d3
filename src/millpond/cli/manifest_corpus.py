"""Manifest corpora (``k8s-manifests``, ``platform-manifests``, ``fluid-manifests``) under their protocol.

A manifest corpus is a folder of upstream YAML files and an ``EXPECTED.tsv`` (file, expected, kinds,
...) whose README says: run each file as ``millpond apply -f FILE``; ``apply`` exits 0, ``refuse``
exits 2 with ONE ``error:`` line and stores nothing, ``either`` is one of the two; never a traceback,
never more than a few lines. Each row runs as its own ``millpond apply`` process in a fresh home, so
one row cannot change another's outcome, and whatever it started is ended with that home. The
processes are forks of one warm process (``millpond.cli.forked_cli``): ~0.2 s a row instead of ~1.5 s.

A corpus that ships no ``EXPECTED.tsv`` (``fluid-manifests``) is given one (``--expected``), and a
``--before`` manifest (the Secrets its files name) applied in each row's home first.

Rows that can pass only once a later issue lands are named in an allow-list (``--allowlist``:
``corpus/file``, issue, why). Such a row must still fail cleanly, as a refusal would; the day it
passes the run fails, saying to take it off the list, so the list only shrinks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from millpond.cli.forked_cli import Finished, ForkedCli
from millpond.errors import UserError

EXPECTED_FILE = "EXPECTED.tsv"
APPLY_PROTOCOL = "Run each file as `millpond apply -f FILE`"
OUTCOMES = {"apply": (0,), "refuse": (2,), "either": (0, 2)}
MOST_LINES = 4  # the README's "never print more than a few lines"
ROW_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Row:
    """One line of a corpus' EXPECTED.tsv."""

    corpus: str  # the corpus folder's name: the allow-list's keys start with it
    file: Path
    expected: str  # apply | refuse | either
    kinds: str

    @property
    def key(self) -> str:
        return f"{self.corpus}/{self.file.name}"


@dataclass(frozen=True)
class Allowed:
    """An allow-listed row: the issue whose work will make it pass, and why it cannot yet."""

    key: str
    issue: int
    why: str


@dataclass(frozen=True)
class Applied:
    """What ``millpond apply -f FILE`` did in a fresh home."""

    code: int
    out: str
    err: str
    stored_by_refusal: tuple[str, ...]  # objects a refusal left behind (empty when it applied)
    seconds: float


@dataclass(frozen=True)
class RowVerdict:
    row: Row
    applied: Applied
    failures: tuple[str, ...]  # how the row broke the protocol (empty: it followed it)
    allowed: Allowed | None

    @property
    def ok(self) -> bool:
        """A plain row follows the protocol; an allow-listed one fails, cleanly (see ``judge``)."""
        return not self.failures


def is_manifest_corpus(folder: Path) -> bool:
    """A folder whose README's protocol is ``millpond apply -f FILE``, with its EXPECTED.tsv."""
    readme = folder / "README.md"
    return (folder / EXPECTED_FILE).is_file() and readme.is_file() and APPLY_PROTOCOL in readme.read_text()


def read_rows(folder: Path, expected: Path | None = None) -> list[Row]:
    """The corpus' rows, from ``expected`` or the folder's own EXPECTED.tsv; a bad line is one error."""
    table = expected or folder / EXPECTED_FILE
    if not table.is_file():
        raise UserError(f"{folder}: no {EXPECTED_FILE}, and no --expected file given: not a manifest corpus")
    rows = []
    for number, line in enumerate(table.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 3 or fields[1] not in OUTCOMES:
            raise UserError(f"{table}:{number}: want file, apply|refuse|either, kinds (tab-separated)")
        file = folder / fields[0]
        if not file.is_file():
            raise UserError(f"{table}:{number}: {fields[0]} is not in {folder}")
        rows.append(Row(folder.name, file, fields[1], fields[2]))
    listed = {row.file.name for row in rows}
    unlisted = sorted(p.name for p in folder.glob("*.yaml") if p.name not in listed)
    if unlisted:
        raise UserError(f"{table}: {len(unlisted)} file(s) of {folder} have no row, first {unlisted[0]}")
    return rows


def read_allowlist(path: Path) -> dict[str, Allowed]:
    """``corpus/file<TAB>issue<TAB>why`` lines; ``#`` starts a comment."""
    allowed: dict[str, Allowed] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].strip():
            raise UserError(f"{path}:{number}: want corpus/file, issue number, why (tab-separated)")
        if fields[0] in allowed:
            raise UserError(f"{path}:{number}: {fields[0]} is listed twice")
        allowed[fields[0]] = Allowed(fields[0], int(fields[1]), fields[2])
    return allowed


def protocol_failures(expected: str, applied: Applied) -> list[str]:
    """How one apply broke the README's protocol for a row expecting ``expected`` (empty: it followed it)."""
    failures = []
    lines = applied.err.strip().splitlines()
    if "Traceback" in applied.err:
        failures.append("printed a traceback")
    if len(lines) > MOST_LINES:
        failures.append(f"printed {len(lines)} lines on stderr")
    if applied.code not in (0, 2):
        failures.append(f"exit {applied.code}")
    if applied.code == 2:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            failures.append("a refusal is not one `error:` line")
        if applied.stored_by_refusal:
            failures.append(f"a refusal stored {list(applied.stored_by_refusal)}")
    if applied.code not in OUTCOMES[expected]:
        failures.append(f"expected {expected}, got exit {applied.code}")
    return failures


def judge(row: Row, applied: Applied, allowed: Allowed | None) -> RowVerdict:
    """A plain row must follow the protocol. An allow-listed row must fail, and fail as a clean refusal."""
    failures = protocol_failures(row.expected, applied)
    if allowed is None:
        return RowVerdict(row, applied, tuple(failures), None)
    if not failures:
        return RowVerdict(row, applied, (f"now passes: remove it from the allow-list (issue {allowed.issue})",),
                          allowed)
    unclean = protocol_failures("refuse", applied)
    return RowVerdict(row, applied, tuple(f"fails uncleanly: {f}" for f in unclean), allowed)


class CorpusRunner:
    """Runs a corpus' rows, ``jobs`` at a time, each in a fresh home of its own."""

    def __init__(self, before: Path | None = None, jobs: int = 2, timeout_s: float = ROW_TIMEOUT_S) -> None:
        self.before = before
        self.jobs = max(1, jobs)
        self.timeout_s = timeout_s
        self._home_lock = threading.Lock()  # the stores read MILLPOND_HOME from the environment
        self._template_lock = threading.Lock()
        self._made: Path | Applied | None = None  # the template home, made by the first row
        self._baseline: frozenset[str] = frozenset()  # what the before home holds
        self._cli: ForkedCli | None = None  # the warm process each row's `millpond apply` is forked from
        self._cli_lock = threading.Lock()

    def run(self, rows: list[Row], allowlist: dict[str, Allowed],
            report: Callable[[RowVerdict], None]) -> list[RowVerdict]:
        lock = threading.Lock()

        def one(row: Row) -> RowVerdict:
            verdict = judge(row, self.apply(row.file), allowlist.get(row.key))
            with lock:
                report(verdict)
            return verdict

        try:
            with ThreadPoolExecutor(self.jobs) as pool:
                return list(pool.map(one, rows))
        finally:
            self.close()

    def apply(self, file: Path) -> Applied:
        """``millpond apply -f FILE`` in a fresh home (a copy of the template); the home ends with it."""
        template = self._template()
        home = Path(tempfile.mkdtemp(prefix="millpond-corpus-"))
        try:
            if isinstance(template, Applied):
                return template
            shutil.copytree(template, home, dirs_exist_ok=True, symlinks=True)
            started = time.monotonic()
            done = self._millpond(self._env(home), "apply", "-f", str(file))
            seconds = time.monotonic() - started
            left = tuple(sorted(set(self._stored(home)) - self._baseline)) if done.returncode == 2 else ()
            return Applied(done.returncode, done.stdout, done.stderr, left, seconds)
        finally:
            self._end_background(home)
            shutil.rmtree(home, ignore_errors=True)

    def close(self) -> None:
        if isinstance(self._made, Path):
            shutil.rmtree(self._made.parent, ignore_errors=True)
        if self._cli is not None:
            self._cli.close()
            self._cli = None

    def _millpond(self, env: dict[str, str], *args: str) -> Finished:
        """The real CLI as its own process, forked from a warm one (``millpond.cli.forked_cli``): a row
        costs its command, not an interpreter's start-up."""
        with self._cli_lock:
            if self._cli is None:
                self._cli = ForkedCli()
            cli = self._cli
        return cli.run(list(args), env, self.timeout_s)

    def _template(self) -> Path | Applied:
        """The home every row starts from, made once: its database created (each row would pay ~0.4 s to
        migrate a new one) and ``before`` applied. An Applied: ``before`` failed, and so does every row."""
        with self._template_lock:
            if self._made is None:
                home = Path(tempfile.mkdtemp(prefix="millpond-corpus-template-")) / "home"
                home.mkdir()
                setup = (self._millpond(self._env(home), "apply", "-f", str(self.before))
                         if self.before is not None else None)
                if setup is not None and setup.returncode != 0:
                    self._made = Applied(setup.returncode, setup.stdout, f"--before {self.before}: {setup.stderr}",
                                         (), 0.0)
                else:
                    self._baseline = frozenset(self._stored(home))  # creates the database too
                    self._made = home
            return self._made

    def _env(self, home: Path) -> dict[str, str]:
        env = {**os.environ, "MILLPOND_HOME": str(home)}
        env.setdefault("MILLPOND_GPU_FALLBACK", "cpu")  # the READMEs: a GPU request is no reason to refuse
        return env

    def _stored(self, home: Path) -> list[str]:
        """Objects of every registered kind, jobs, secrets and config maps the home holds."""
        from millpond.kinds import REGISTRY
        from millpond.settings import load_settings
        from millpond.store.resources import ResourceStore
        from millpond.store.secrets import KINDS as CONFIG_KINDS
        from millpond.store.secrets import ConfigStore
        from millpond.store.training import JobStore

        with self._home(home):
            settings = load_settings()
            store, left = ResourceStore(settings), []
            for kind in REGISTRY.loaded().kinds():
                left += [f"{kind}/{r.namespace}/{r.name}" for r in store.list(kind, None)]
            left += [f"job/{job.namespace}/{job.name}" for job in JobStore(settings).list(None)]
            configs = ConfigStore(home)
            left += [f"{kind}/{name}" if namespace == "default" else f"{kind}/{namespace}/{name}"
                     for kind in CONFIG_KINDS for namespace, name, _ in configs.everywhere(kind)]
        return left

    def _end_background(self, home: Path) -> None:
        """SIGKILL what the row left running in its home (a job's supervisor, an operation's runner)."""
        from millpond.runners import background

        if not (home / "processes").is_dir():
            return
        with self._home(home):
            for record in background.running():
                record.identity.kill_group()

    @contextlib.contextmanager
    def _home(self, home: Path) -> Iterator[None]:
        with self._home_lock:
            saved = os.environ.get("MILLPOND_HOME")
            os.environ["MILLPOND_HOME"] = str(home)
            try:
                yield
            finally:
                if saved is None:
                    os.environ.pop("MILLPOND_HOME", None)
                else:
                    os.environ["MILLPOND_HOME"] = saved


def stale_entries(corpus: str, rows: list[Row], allowlist: dict[str, Allowed]) -> list[str]:
    """Allow-list keys of this corpus that name no row (a renamed or removed file)."""
    keys = {row.key for row in rows}
    return sorted(key for key in allowlist if key.split("/", 1)[0] == corpus and key not in keys)
