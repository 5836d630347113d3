"""The rules behind the confinement, without a sandbox: what is covered, what a spec may bind, what a task
inherits of the server's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from millpond.runners import isolation, sandbox
from millpond.runners.environment import inherited_environment, server_secret
from millpond.settings import load_settings
from tests.isolation.conftest import NEEDS_ISOLATION


def test_the_covered_folders_are_the_home_and_the_roots_named_none_inside_another(home: Path, tmp_path: Path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setenv(isolation.HIDDEN_ROOTS_ENV, f"{tmp_path / 'tier'}:{home / 'inside'}")
    roots = isolation.hidden_roots(load_settings(), [tmp_path / "root"])
    assert home.resolve() in roots and (tmp_path / "tier").resolve() in roots and (tmp_path / "root") in roots
    assert (home / "inside") not in roots  # the home's cover hides it already


def test_a_host_folder_showing_the_home_is_refused_in_multi_user_mode_only(home: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    for folder in (home, home / "volumes" / "b", home.parent):  # the home, inside it, above it
        isolation.check_host_folder(folder, "hostPath")  # single-user: as before
    monkeypatch.setenv("MILLPOND_MULTI_USER", "1")
    for folder in (home, home / "volumes" / "b", home.parent):
        with pytest.raises(isolation.HostFolderRefused, match="millpond's own files"):
            isolation.check_host_folder(folder, "hostPath")
    isolation.check_host_folder(tmp_path / "data", "hostPath")  # beside the home: the host's, as it is


def test_a_multi_user_task_inherits_none_of_the_server_s_secrets(monkeypatch) -> None:
    kept = {"PATH": "/usr/bin", "MILLPOND_ENGINE_TOKEN": "engine", "MILLPOND_HOME": "/h", "LANG": "C"}
    dropped = {"MILLPOND_TOKEN": "t", "MILLPOND_DATABASE_URL": "postgresql://u:p@h/db", "AWS_SECRET_ACCESS_KEY": "k",
               "GITHUB_TOKEN": "g", "DB_PASSWORD": "p", "KUBECONFIG": "/k"}
    for name, value in {**kept, **dropped}.items():
        monkeypatch.setenv(name, value)
    assert all(server_secret(name) for name in dropped if name != "MILLPOND_TOKEN")
    assert set(dropped) - {"MILLPOND_TOKEN"} <= set(inherited_environment())  # single-user: as before
    monkeypatch.setenv("MILLPOND_MULTI_USER", "1")
    inherited = inherited_environment()
    assert not set(dropped) & set(inherited)
    assert all(inherited[name] == value for name, value in kept.items())


@NEEDS_ISOLATION
def test_millpond_s_own_interpreter_runs_in_a_confined_task_when_a_covered_root_holds_it(
        home: Path, tmp_path: Path, monkeypatch) -> None:
    """A clone under ``/tmp`` (or a virtualenv inside a covered root) keeps its interpreter: tasks run
    ``sys.executable`` without its ``bin`` on their ``PATH``; the rest of the covered root stays hidden."""
    interpreter_env = Path(os.path.realpath(sys.prefix))
    beside = interpreter_env.parent / f"beside-{os.getpid()}.txt"
    beside.write_text("hidden")
    try:
        monkeypatch.setenv(isolation.HIDDEN_ROOTS_ENV, str(interpreter_env.parent))
        monkeypatch.setenv("MILLPOND_MULTI_USER", "1")
        work = tmp_path / "work"
        work.mkdir()
        script = f"import os, sys; print(sys.prefix, os.path.exists({str(beside)!r}))"
        argv = sandbox.wrap([sys.executable, "-c", script], [], work, path="/usr/bin:/bin")
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split() == [sys.prefix, "False"]
    finally:
        beside.unlink()
