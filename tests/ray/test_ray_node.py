"""The node side of cluster mode driven directly, without a cluster: what one Ray task yields.

``ray_node.run_task`` is the generator a Ray worker runs; here it runs in this process (as a
worker would, minus Ray), with a real process through the node's runner. A short task is two
items (where it runs, how it ended) with the log's last chunk in the result; a long log comes
as chunks, whole and in order; only the entries the task changed come back; the task's copy
and log are removed after the result, by the clean-up thread.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from millpond.runners import ray_node
from millpond.runners.ray_node import NodeFinished, NodeStarted, NodeTask, run_task
from millpond.runners.workspace_copy import copy_of


def _task(engine: Path, script: str) -> NodeTask:
    return NodeTask(
        argv=[sys.executable, "-c", script, str(engine / "inputs" / "x.txt"), str(engine / "outputs" / "y.txt")],
        env={"PATH": os.environ["PATH"], "PYTHONUNBUFFERED": "1"}, cwd=str(engine / "work"), binds=[],
        timeout_s=60, workspace=str(engine), files=copy_of(engine), python_bin=str(Path(sys.executable).parent),
    )


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ray_node.NODE_DIR_VAR, str(tmp_path / "node"))
    folder = tmp_path / "engine"
    for sub in ("work", "inputs", "outputs"):
        (folder / sub).mkdir(parents=True)
    (folder / "inputs" / "x.txt").write_text("41")
    (folder / "inputs" / "big.bin").write_bytes(os.urandom(1 << 16))
    return folder


def _gone(path: Path, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not path.exists()


def test_a_short_task_is_two_items_and_only_what_it_changed_comes_back(engine: Path, tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "open(sys.argv[2], 'w').write(str(int(open(sys.argv[1]).read()) + 1))\n"
        "print('done')\n"
    )
    import ray

    connected = ray.is_initialized()  # an earlier test in this process may have joined a cluster as a driver
    items = list(run_task(_task(engine, script)))
    assert [type(item) for item in items] == [NodeStarted, NodeFinished]
    assert ray.is_initialized() == connected  # asking for the node's id never starts Ray
    assert isinstance(items[0], NodeStarted) and (connected or items[0].node_id == "")  # outside a worker: no id
    finished = items[-1]
    assert isinstance(finished, NodeFinished)
    assert finished.exit_code == 0 and finished.error is None
    assert finished.log.decode().splitlines()[-1] == "done"
    assert {entry.path: entry.data for entry in finished.files} == {"outputs/y.txt": b"42"}
    node_tasks = tmp_path / "node" / "tasks"
    assert _gone(node_tasks) or all(_gone(copy) for copy in node_tasks.iterdir())  # removed after the result
    assert all(_gone(log) for log in (tmp_path / "node" / "logs").iterdir())


def test_a_long_log_comes_whole_and_in_order_and_a_failure_keeps_its_exit(engine: Path) -> None:
    lines = 30_000  # ~0.8 MiB: several chunks, some while it runs, the rest after it ended
    script = f"import sys\nfor i in range({lines}):\n    print(f'line {{i:08d}} ' + 'y' * 8)\nsys.exit(3)\n"
    items = list(run_task(_task(engine, script)))
    assert isinstance(items[0], NodeStarted) and isinstance(items[-1], NodeFinished)
    chunks = [item for item in items[1:-1] if isinstance(item, bytes)]
    assert chunks and len(items[-1].log) <= ray_node.CHUNK_BYTES  # streamed, and at most one chunk rides with the end
    text = (b"".join(chunks) + items[-1].log).decode()
    assert text.splitlines() == [f"line {i:08d} " + "y" * 8 for i in range(lines)]
    assert items[-1].exit_code == 3
    assert items[-1].files == []  # it changed nothing in its workspace
