"""`millpond run FILE.py` with KFP v1 code: kfp 1.8.22 compiles it in a cached side environment.

All real: the environment is a venv that pip fills from the package index (one per session,
see tests/kfp1_env.py, whose first build is killed with SIGKILL half-way), the compile runs
kfp 1.8 in a subprocess, and the workflow it writes runs on the engine. Every failure is one
``error:`` line with exit status 2 and no run recorded.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from millpond.pipelines.kfp1.side_env import KFP1_VERSION, READY
from tests.conftest import CliResult
from tests.kfp1_env import SEED003, VENV_NAME, SideEnv, pip_cache

Cli = Callable[..., CliResult]
CONTAINER_OP = """\
from kfp import dsl


def echo(text):
    return dsl.ContainerOp(name='echo', image='alpine', command=['sh', '-c', 'echo "$0"', text])
"""


def _error_line(result: CliResult) -> str:
    """The one ``error:`` line of a refused command (progress lines may precede it), and no traceback."""
    assert result.code == 2, (result.out, result.err)
    assert "Traceback" not in result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.err
    return errors[0]


def _nothing_recorded(cli: Cli) -> None:
    listed = cli("runs", "list", "-o", "json")
    assert listed.code == 0 and json.loads(listed.out) == []


def test_a_build_killed_half_way_leaves_nothing_trusted_and_the_next_run_builds(kfp1: SideEnv) -> None:
    story = kfp1.story
    if story is None:
        pytest.skip("the session reused an existing side environment (XDG_CACHE_HOME): no first build to kill")
    # The kill left the half-made venv under its temporary name only, and pip died with millpond.
    assert VENV_NAME not in story.leftovers
    assert any(name.startswith(f".{VENV_NAME}.building-") for name in story.leftovers), story.leftovers
    assert story.pip_survivors == []
    # The next runs built it (once), ran the pipeline, and cleared the leftover.
    for code, out, err in story.runs:
        assert code == 0, err
        assert json.loads(out)["state"] == "SUCCEEDED"
    assert VENV_NAME in story.after
    assert not [name for name in story.after if ".building-" in name or ".stale-" in name], story.after
    assert (kfp1.venv / READY).read_text().startswith(f"kfp=={KFP1_VERSION}")


def test_a_build_stopped_by_a_signal_cleans_up_and_says_so(kfp1: SideEnv) -> None:
    if kfp1.story is None:
        pytest.skip("the session reused an existing side environment (XDG_CACHE_HOME): no first build to stop")
    code, err, left = kfp1.story.interrupted
    assert code == 130 and "Traceback" not in err, err
    assert left == [f"{VENV_NAME}.lock", f"{VENV_NAME}.log"]  # pip stopped, its half-made venv removed


def test_two_first_runs_at_once_build_the_environment_once(kfp1: SideEnv) -> None:
    story = kfp1.story
    if story is None:
        pytest.skip("the session reused an existing side environment (XDG_CACHE_HOME)")
    installing = [err for _, _, err in story.runs if f"installing kfp {KFP1_VERSION}" in err]
    waiting = [err for _, _, err in story.runs if "waiting for another millpond" in err]
    assert len(installing) == 1 and len(waiting) == 1, [err for _, _, err in story.runs]
    log = (kfp1.cache / "millpond" / f"{VENV_NAME}.log").read_text()
    assert log.count("$ ") == 3 and f"kfp=={KFP1_VERSION}" in log  # venv, pip install, import check: once


def test_the_environment_is_usable_under_its_final_name(kfp1: SideEnv) -> None:
    """Built under a temporary name then renamed: its scripts point at where it now is."""
    pip = (kfp1.venv / "bin" / "pip").read_text().splitlines()[0]
    assert pip == f"#!{kfp1.venv}/bin/python{sys.version_info.major}.{sys.version_info.minor}" or pip.startswith(
        f"#!{kfp1.venv}/bin/python"
    )
    assert ".building-" not in (kfp1.venv / "pyvenv.cfg").read_text()


def test_a_cached_run_compiles_in_about_a_second(v1: SideEnv, home: Path, cli: Cli) -> None:
    started = time.monotonic()
    result = cli("run", SEED003, "-p", "a=3", "-o", "json")
    elapsed = time.monotonic() - started
    assert result.code == 0, result.err
    assert "installing" not in result.err  # nothing built
    assert result.json()["state"] == "SUCCEEDED"
    assert elapsed < 30  # ~1.5 s idle: the compile is one kfp 1.8 import; generous for a loaded machine


def test_offline_the_error_says_v1_and_how_to_compile_it(home: Path, tmp_path: Path, cli: Cli,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache, links = tmp_path / "empty-cache", tmp_path / "no-links"
    links.mkdir()
    for name, value in {
        "XDG_CACHE_HOME": str(cache), "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_CONFIG_FILE": os.devnull,
        "PIP_FIND_LINKS": str(links), "PIP_RETRIES": "0", "PIP_TIMEOUT": "3", "PIP_CACHE_DIR": pip_cache(),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("MILLPOND_KFP1_PYTHON", raising=False)
    line = _error_line(cli("run", SEED003, "-p", "a=3"))
    evidence = "comp.func_to_container_op at line 20"
    assert line.startswith(f"error: {SEED003}: this is KFP v1 code ({evidence}). "), line
    assert "side environment, which could not be installed: pip install failed: ERROR: " in line
    assert f"pip install kfp=={KFP1_VERSION}" in line
    assert f"dsl-compile --py {SEED003} --output {SEED003.with_suffix('.yaml')}" in line
    assert f"millpond run {SEED003.with_suffix('.yaml')}" in line
    _nothing_recorded(cli)
    left = sorted(p.name for p in (cache / "millpond").iterdir())
    assert left == [f"{VENV_NAME}.lock", f"{VENV_NAME}.log"]  # no venv, no half-made one


def test_a_cache_folder_that_cannot_be_written_is_one_line(home: Path, tmp_path: Path, cli: Cli,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file" / "cache"))
    monkeypatch.delenv("MILLPOND_KFP1_PYTHON", raising=False)
    line = _error_line(cli("run", SEED003, "-p", "a=3"))
    assert f"which could not be installed: Not a directory: {tmp_path / 'a-file' / 'cache'}" in line, line
    assert "dsl-compile --py" in line
    _nothing_recorded(cli)


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_a_v1_file_raising_at_import_is_one_line(v1: SideEnv, home: Path, tmp_path: Path, cli: Cli) -> None:
    file = _write(tmp_path, "raising.py", CONTAINER_OP + "\n\nraise ValueError('no cluster here\\nsecond line')\n")
    assert _error_line(cli("run", file)) == f"error: {file}:8: ValueError: no cluster here"
    _nothing_recorded(cli)


def test_a_v1_file_with_a_syntax_error_is_one_line(home: Path, tmp_path: Path, cli: Cli,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # never needed: Python says it first
    file = _write(tmp_path, "broken.py", CONTAINER_OP + "\ndef pipeline(:\n    pass\n")
    assert _error_line(cli("run", file)) == f"error: {file}:7: syntax error: invalid syntax"
    assert not (tmp_path / "cache").exists()
    _nothing_recorded(cli)


def test_a_v1_file_without_a_pipeline_is_one_line(v1: SideEnv, home: Path, tmp_path: Path, cli: Cli) -> None:
    file = _write(tmp_path, "ops_only.py", CONTAINER_OP)
    assert _error_line(cli("run", file)) == f"error: {file}: no @dsl.pipeline function found"
    _nothing_recorded(cli)


def test_several_v1_pipelines_need_pipeline_name(v1: SideEnv, home: Path, tmp_path: Path, cli: Cli) -> None:
    file = _write(tmp_path, "two.py", CONTAINER_OP + (
        "\n\n@dsl.pipeline(name='first one')\ndef first():\n    echo('first')\n"
        "\n\n@dsl.pipeline(name='second one')\ndef second(text: str = 'second'):\n    echo(text)\n"
    ))
    line = _error_line(cli("run", file))
    assert line == f"error: {file}: 2 pipelines found (first, second); pick one with --pipeline NAME"
    line = _error_line(cli("run", file, "--pipeline", "third"))
    assert line == f"error: {file}: no pipeline named 'third' (found: first, second)"
    _nothing_recorded(cli)
    for name in ("second", "second one"):  # the function's name or the pipeline's
        result = cli("run", file, "--pipeline", name, "-p", f"text=hello {name}", "-o", "json")
        assert result.code == 0, result.err
        data = result.json()
        assert data["state"] == "SUCCEEDED" and data["name"].startswith("second-one-")
        log = Path(next(t["log"] for t in data["tasks"] if t["name"] == "echo")).read_text()
        assert log.strip() == f"hello {name}"


def test_v1_code_reached_through_a_module_of_its_own_is_found_by_kfp2s_error(
    v1: SideEnv, home: Path, tmp_path: Path, cli: Cli
) -> None:
    """The file itself looks like v2 code; kfp 2 fails inside the helper it imports, on a v1 name."""
    _write(tmp_path, "my_ops.py", CONTAINER_OP)
    file = _write(tmp_path, "main.py", (
        "from kfp import dsl\n\nfrom my_ops import echo\n\n\n"
        "@dsl.pipeline(name='through a helper')\ndef p(text: str = 'from the helper'):\n    echo(text)\n"
    ))
    result = cli("run", file, "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED"
    log = Path(next(t["log"] for t in data["tasks"] if t["name"] == "echo")).read_text()
    assert log.strip() == "from the helper"


def test_a_v1_file_that_never_finishes_is_stopped(v1: SideEnv, home: Path, tmp_path: Path, cli: Cli,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_KFP1_COMPILE_TIMEOUT", "3")
    file = _write(tmp_path, "forever.py", CONTAINER_OP + "\nimport time\nwhile True:\n    time.sleep(1)\n")
    started = time.monotonic()
    line = _error_line(cli("run", file))
    assert line == (f"error: {file}: kfp {KFP1_VERSION} did not finish compiling it in 3 s "
                    "(stopped; MILLPOND_KFP1_COMPILE_TIMEOUT sets the limit)")
    assert time.monotonic() - started < 20
    _nothing_recorded(cli)


def test_millpond_kfp1_python_names_an_interpreter_and_nothing_is_built(
    kfp1: SideEnv, home: Path, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("MILLPOND_KFP1_PYTHON", str(kfp1.venv / "bin" / "python"))
    result = cli("run", SEED003, "-p", "a=3", "-o", "json")
    assert result.code == 0 and result.json()["state"] == "SUCCEEDED", result.err
    assert not (tmp_path / "cache").exists()
    # millpond's own interpreter has kfp 2: said in one line, not a kfp 2 traceback
    monkeypatch.setenv("MILLPOND_KFP1_PYTHON", sys.executable)
    line = _error_line(cli("run", SEED003, "-p", "a=3"))
    assert line.startswith(f"error: {SEED003}: this is KFP v1 code (comp.func_to_container_op at line 20), "
                           f"but MILLPOND_KFP1_PYTHON: {sys.executable} has kfp 2.")
    monkeypatch.setenv("MILLPOND_KFP1_PYTHON", str(tmp_path / "nowhere"))
    assert "not an executable file" in _error_line(cli("run", SEED003))


def test_v2_files_never_touch_the_side_environment(home: Path, tmp_path: Path, cli: Cli,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pipeline = Path(__file__).parents[2] / "examples" / "kfp_v1" / "seed003_calculation" / "pipeline_v2.py"
    result = cli("run", pipeline, "-p", "a=3", "-o", "json")
    assert result.code == 0 and result.json()["outputs"] == {"Output": 18.0}, result.err
    assert not (tmp_path / "cache").exists()


CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():  # a worktree elsewhere: the shared copy
    CORPUS = Path("/work/shared/conformance/kfp-v1")


@pytest.mark.parametrize("name", [
    "volumeop_sequential",  # VolumeOp, pvolumes
    "loop_over_lightweight_output",  # found by `from kfp.dsl import _for_loop`
    "reused_component",  # shared names only: found by kfp 2 refusing `add_op(a, 3)`
    "withparam_output_dict",
    "legacy_exit_handler",
])
def test_corpus_sources_compile_to_what_their_compiled_workflow_says(v1: SideEnv, name: str) -> None:
    """The corpus' .py beside its .yaml (both kfp 1.8.22's): the same IR through either door."""
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} (the shared v1 corpus) is not on this machine")
    from millpond.pipelines.loader import load_pipeline

    source, compiled = load_pipeline(CORPUS / f"{name}.py"), load_pipeline(CORPUS / f"{name}.yaml")
    assert source.spec == compiled.spec
    assert source.platform_spec == compiled.platform_spec
