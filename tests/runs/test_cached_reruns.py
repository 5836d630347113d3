"""A second run of a pipeline with loops ends as the first did, its tasks cache hits (issue 11, defect 1).

When a loop iteration's tasks end at once (cache hits, skipped branches), the iteration ends
inside the call that started it. The engine used to end the loop once per such iteration,
counting it final several times, so the run ended FAILED with no error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kfp
import pytest

from tests.conftest import PIPELINES
from tests.pipelines import cached_loops
from tests.server_support import Served, module_home, serving

LOOPS = PIPELINES / "cached_loops.py"
# Tasks whose inputs name the run (an exit handler's PipelineTaskFinalStatus) cannot hit the cache.
RUN_SPECIFIC = {"note"}


def _containers(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in data["tasks"] if t["kind"] == "container"]


@pytest.mark.parametrize(
    "pipeline",
    ["pf", "nested-loops", "collected", "artifact-loops", "condition-in-loop", "loop-in-exit-handler", "limited-loop"],
)
def test_second_run_of_a_loop_pipeline_succeeds_from_the_cache(cli, pipeline: str) -> None:
    first = cli("run", LOOPS, "--pipeline", pipeline, "-o", "json")
    assert first.code == 0, first.err
    second = cli("run", LOOPS, "--pipeline", pipeline, "-o", "json")
    assert second.code == 0, second.err
    before, after = first.json(), second.json()
    assert (after["state"], after["error"]) == ("SUCCEEDED", None)
    assert after["outputs"] == before["outputs"]
    assert Counter((t["path"], t["state"]) for t in after["tasks"]) == Counter(
        (t["path"], t["state"]) for t in before["tasks"]
    )
    cacheable = [t for t in _containers(after) if t["name"] not in RUN_SPECIFIC and t["state"] == "SUCCEEDED"]
    assert cacheable and all(t["cached"] for t in cacheable), [(t["path"], t["cached"]) for t in cacheable]
    # Each task is reported final once (the loop used to be reported once per iteration).
    finals = [line.strip() for line in second.err.splitlines() if line.strip().endswith(": SUCCEEDED")]
    assert len(finals) == len(set(finals)), finals


def test_iterations_that_end_at_once_do_not_end_their_loop_twice(cli) -> None:
    result = cli("run", LOOPS, "--pipeline", "skipped-iterations", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert (data["state"], data["error"]) == ("SUCCEEDED", None)
    [loop] = [t for t in data["tasks"] if t["kind"] == "loop"]
    assert loop["state"] == "SUCCEEDED"
    assert sum(1 for line in result.err.splitlines() if line.strip() == f"{loop['path']}: SUCCEEDED") == 1


def test_a_thousand_iterations_ending_at_once_do_not_exhaust_the_stack(cli) -> None:
    xs = json.dumps([float(i) for i in range(1500)])
    result = cli("run", LOOPS, "--pipeline", "skipped-iterations", "-p", f"xs={xs}", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert (data["state"], data["error"]) == ("SUCCEEDED", None)
    assert Counter(t["kind"] for t in data["tasks"]) == {"loop": 1, "iteration": 1500, "dag": 1500}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "cached-reruns"):
        yield from serving()


def test_second_run_through_kfp_client_succeeds_from_the_cache(server: Served) -> None:
    client = kfp.Client(host=server.url)
    states = []
    for _ in range(2):
        created = client.create_run_from_pipeline_func(cached_loops.plain_loop, experiment_name="cached-reruns")
        run = client.wait_for_run_completion(created.run_id, timeout=120, sleep_duration=0.2)
        states.append((run.state, run.error))
        tasks = client.get_run(created.run_id).run_details.task_details
    assert states == [("SUCCEEDED", None), ("SUCCEEDED", None)]
    assert {t.state for t in tasks} == {"SUCCEEDED"}
    logs = Path(server.app.state.millpond.settings.logs_dir) / created.run_id
    assert sum(1 for log in logs.rglob("*.log") if "cache hit" in log.read_text()) == 3
