"""A task's workspace carried to a Ray node and back as plain entries (runners.workspace_copy).

The receiving side (the engine, for what a node sends back) must not be led outside its folder
by what it receives, whatever the entries say.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from millpond.runners.workspace_copy import DIR, FILE, LINK, Entry, WorkspaceCopyError, copy_of, size, write


def _tree(folder: Path) -> None:
    (folder / "remote/s3/bucket/runs/square").mkdir(parents=True)
    (folder / "remote/s3/bucket/runs/square/executor_output.json").write_text('{"parameterValues": {}}')
    (folder / "work").mkdir()
    (folder / "work/run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "work/run.sh").chmod(0o755)
    (folder / "outputs/parameters").mkdir(parents=True)
    (folder / "outputs/parameters/Output").write_bytes(bytes(range(256)))
    (folder / "outputs/latest").symlink_to("parameters/Output")
    (folder / "empty").mkdir()


def test_a_workspace_round_trips_with_its_folders_modes_and_links(tmp_path: Path) -> None:
    _tree(tmp_path / "a")
    entries = copy_of(tmp_path / "a")
    write(entries, tmp_path / "b")
    for relative in ("remote/s3/bucket/runs/square/executor_output.json", "work/run.sh", "outputs/parameters/Output"):
        assert (tmp_path / "b" / relative).read_bytes() == (tmp_path / "a" / relative).read_bytes()
    assert stat.S_IMODE((tmp_path / "b/work/run.sh").stat().st_mode) == 0o755
    assert os.readlink(tmp_path / "b/outputs/latest") == "parameters/Output"
    assert (tmp_path / "b/empty").is_dir()
    assert sorted(e.path for e in copy_of(tmp_path / "b")) == sorted(e.path for e in entries)
    assert size(entries) >= 256


def test_writing_over_an_existing_folder_replaces_files_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "b/outputs").mkdir(parents=True)
    (tmp_path / "b/outputs/old").write_text("engine's own")
    write([Entry("outputs", DIR, 0o755), Entry("outputs/new", FILE, 0o644, b"node's")], tmp_path / "b")
    assert (tmp_path / "b/outputs/old").read_text() == "engine's own"
    assert (tmp_path / "b/outputs/new").read_text() == "node's"


@pytest.mark.parametrize(
    "entries",
    [
        [Entry("/etc/passwd", FILE, 0o644, b"x")],
        [Entry("../escape", FILE, 0o644, b"x")],
        [Entry("a/../../escape", FILE, 0o644, b"x")],
        [Entry("a//b", FILE, 0o644, b"x")],
        [Entry("", FILE, 0o644, b"x")],
        [Entry("out", LINK, 0o777, b"/etc")],
        [Entry("out", LINK, 0o777, b"../../etc")],
        [Entry("a", DIR, 0o755), Entry("a/out", LINK, 0o777, b"../..")],
        [Entry("weird", "p", 0o644)],
    ],
    ids=["absolute", "dotdot", "inner-dotdot", "not-normal", "empty", "link-absolute", "link-up", "link-up-deep",
         "unknown-kind"],
)
def test_hostile_entries_are_refused_and_nothing_lands_outside(entries: list[Entry], tmp_path: Path) -> None:
    target = tmp_path / "deep/ws"
    with pytest.raises(WorkspaceCopyError):
        write(entries, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]
    assert not (tmp_path / "escape").exists() and not (tmp_path / "deep/escape").exists()
    assert not any(p.is_symlink() for p in target.rglob("*"))


def test_a_file_is_never_written_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws/victim").symlink_to(outside)  # as if left by an earlier step
    with pytest.raises(OSError):
        write([Entry("victim", FILE, 0o644, b"overwritten")], tmp_path / "ws")
    assert outside.read_text() == "untouched"


_names = st.text(alphabet="ab./", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@example([("a", LINK, "a"), ("b", LINK, "b/../a")])  # a loop of links inside (CI found the test tripped on it)
@given(st.lists(st.tuples(_names, st.sampled_from([DIR, FILE, LINK]), _names), max_size=6))
def test_fuzzed_entries_either_land_inside_or_are_refused(tmp_path_factory: pytest.TempPathFactory,
                                                          raw: list[tuple[str, str, str]]) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    target = base / "ws"
    entries = [Entry(path, kind, 0o755, data.encode()) for path, kind, data in raw]
    try:
        write(entries, target)
    except (WorkspaceCopyError, OSError):
        pass
    assert [p.name for p in base.iterdir()] == ["ws"]
    root = os.path.realpath(target)
    for current, dirs, files in os.walk(target):  # never follows a link
        for name in dirs + files:
            path = os.path.join(current, name)
            if os.path.islink(path):  # where it points, lexically (a loop of links inside is harmless)
                landing = os.path.normpath(os.path.join(os.path.realpath(current), os.readlink(path)))
                assert landing == root or landing.startswith(root + os.sep), (path, os.readlink(path))
