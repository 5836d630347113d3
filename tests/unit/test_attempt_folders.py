"""A run's attempt folders: reused emptied to their skeleton, all removed at the run's end, found after a kill."""

from __future__ import annotations

import shutil
from pathlib import Path

from millpond.pipelines.attempt_folders import SKELETON, AttemptFolders, leftovers


def _tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_a_folder_given_back_is_emptied_to_its_skeleton_and_taken_again(tmp_path: Path) -> None:
    folders = AttemptFolders(tmp_path / "staging", "run-a")
    first = folders.take()
    assert _tree(first) == sorted(SKELETON)
    (first / "work" / "deep" / "deeper").mkdir(parents=True)
    (first / "work" / "deep" / "deeper" / "file").write_text("x")
    (first / "tmp" / "left").write_text("x")
    (first / "outputs" / "executor_output.json").write_text("{}")
    (first / "outputs" / "parameters" / "Output").write_text("1")
    (first / "artifacts" / "model").mkdir(parents=True)  # a staged task's outputs
    shutil.rmtree(first / "tmp")  # a task may even remove part of the skeleton
    second = folders.take()  # the first is still in use: a new one
    assert second != first
    folders.give_back(first)
    assert _tree(first) == sorted(SKELETON)
    assert folders.take() == first
    folders.close()
    assert list((tmp_path / "staging").iterdir()) == []


def test_a_folder_that_cannot_be_emptied_is_dropped_and_its_name_never_given_again(tmp_path: Path) -> None:
    folders = AttemptFolders(tmp_path / "staging", "run-b")
    first, second = folders.take(), folders.take()
    shutil.rmtree(first)  # gone: emptying it fails
    folders.give_back(first)
    folders.give_back(second)
    assert folders.take() == second
    third = folders.take()
    assert third not in (first, second) and _tree(third) == sorted(SKELETON)
    folders.close()
    assert list((tmp_path / "staging").iterdir()) == []


def test_leftovers_of_a_killed_engine_are_found_by_run_and_by_task(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    killed, other = AttemptFolders(staging, "run-c"), AttemptFolders(staging, "run-d")
    mine, theirs = killed.take(), other.take()
    platform = staging / "task-1-platform"
    platform.mkdir()
    assert sorted(leftovers(staging, "run-c", ["task-1"])) == sorted([mine, platform])
    assert leftovers(staging, "run-d", []) == [theirs]
