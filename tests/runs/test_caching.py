"""Caching as in KFP: on by default, per-task options, --no-cache, artifacts keyed by content."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PIPELINES, task

CHAIN = PIPELINES / "caching.py"


def _counts(folder: Path) -> tuple[int, int]:
    return tuple(len((folder / f"{name}.count").read_text()) for name in ("make", "shout"))  # type: ignore[return-value]


def test_identical_second_run_is_all_cache_hits(cli, tmp_path: Path) -> None:
    folder = tmp_path
    first = cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={folder}", "-o", "json").json()
    assert [t["cached"] for t in first["tasks"]] == [False, False]
    second = cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={folder}", "-o", "json").json()
    assert second["state"] == "SUCCEEDED"
    assert [t["cached"] for t in second["tasks"]] == [True, True]
    assert second["outputs"] == first["outputs"] == {"Output": "HELLO!"}
    assert _counts(folder) == (1, 1)
    # A hit reuses the producing run's artifact.
    assert task(second, "make")["outputs"]["data"] == task(first, "make")["outputs"]["data"]
    assert "cache hit" in Path(task(second, "shout")["log"]).read_text()


def test_changing_one_input_reruns_exactly_the_affected_tasks(cli, tmp_path: Path) -> None:
    cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "-o", "json")
    changed = cli(
        "run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "-p", "suffix=?", "-o", "json"
    ).json()
    assert [(t["name"], t["cached"]) for t in changed["tasks"]] == [("make", True), ("shout", False)]
    assert changed["outputs"] == {"Output": "HELLO?"}
    assert _counts(tmp_path) == (1, 2)


def test_equal_content_from_another_run_still_hits(cli, tmp_path: Path) -> None:
    # make's caching is off, so each run writes a new artifact (a new URI) with the same content.
    cli("run", CHAIN, "--pipeline", "uncached-chain", "-p", f"folder={tmp_path}", "-o", "json")
    again = cli("run", CHAIN, "--pipeline", "uncached-chain", "-p", f"folder={tmp_path}", "-o", "json").json()
    assert [(t["name"], t["cached"]) for t in again["tasks"]] == [("make", False), ("shout", True)]
    assert _counts(tmp_path) == (2, 1)


def test_no_cache_runs_everything(cli, tmp_path: Path) -> None:
    cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "-o", "json")
    fresh = cli(
        "run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "--no-cache", "-o", "json"
    ).json()
    assert [t["cached"] for t in fresh["tasks"]] == [False, False]
    assert _counts(tmp_path) == (2, 2)


def test_a_removed_artifact_is_a_cache_miss(cli, tmp_path: Path) -> None:
    first = cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "-o", "json").json()
    Path(task(first, "make")["outputs"]["data"]).unlink()
    again = cli("run", CHAIN, "--pipeline", "cached-chain", "-p", f"folder={tmp_path}", "-o", "json").json()
    assert task(again, "make")["cached"] is False
    assert again["outputs"] == {"Output": "HELLO!"}
