"""grid walks its grid once; hyperband runs Katib's brackets with Katib's resource values and state."""

from __future__ import annotations

import itertools

from millpond.katib.suggestions.api import get_suggestions
from millpond.katib.suggestions.hyperband import BRACKET_LABEL, RUNG_LABEL
from millpond.katib.suggestions.records import Algorithm, ParameterSpec, SuggestionRequest, TrialResult
from tests.katib_suggestions.search_loop import MINIMIZE, points, run

GRID = (
    ParameterSpec("lr", "double", "0", "1", "0.25"),
    ParameterSpec("opt", "categorical", values=("sgd", "adam")),
    ParameterSpec("n", "int", "2", "6", "2"),
)


def test_grid_covers_every_point_once_then_is_exhausted():
    expected = set(itertools.product(("0.0", "0.25", "0.5", "0.75", "1.0"), ("sgd", "adam"), ("2", "4", "6")))
    for seed in ("0", "9"):
        done, state = run(
            Algorithm("grid", (("random_state", seed),)),
            lambda v: float(v["lr"]),
            parameters=GRID,
            trials=100,
            per_call=4,
        )
        assert len(done) == 30 and set(points(done)) == expected
        after = get_suggestions(SuggestionRequest("d/g", GRID, MINIMIZE, Algorithm("grid"), tuple(done), 4, state))
        assert after.suggestions == () and after.exhausted


def test_grid_order_follows_the_seed_and_failed_points_are_not_retried():
    one, _ = run(Algorithm("grid", (("random_state", "1"),)), lambda v: None, parameters=GRID, trials=8, per_call=3)
    two, _ = run(Algorithm("grid", (("random_state", "2"),)), lambda v: None, parameters=GRID, trials=8, per_call=3)
    assert points(one) != points(two)
    assert len(set(points(one))) == 8  # every trial failed; none was suggested again


HYPERBAND = (
    ParameterSpec("lr", "double", "0.01", "0.1"),
    ParameterSpec("epochs", "int", "1", "9"),
    ParameterSpec("opt", "categorical", values=("sgd", "adam")),
)
SETTINGS = (("r_l", "9"), ("eta", "3"), ("resource_name", "epochs"), ("random_state", "4"))


def _step(trials, state, count=9, fail=lambda trial_index: False):
    reply = get_suggestions(
        SuggestionRequest("d/hb", HYPERBAND, MINIMIZE, Algorithm("hyperband", SETTINGS), tuple(trials), count, state)
    )
    new = []
    for suggestion in reply.suggestions:
        values = {a.name: a.value for a in suggestion.assignments}
        index = len(trials) + len(new)
        failed = fail(index)
        new.append(
            TrialResult(
                f"t{index}",
                suggestion.assignments,
                "Failed" if failed else "Succeeded",
                None if failed else abs(float(values["lr"]) - 0.05) / int(values["epochs"]),
                labels=suggestion.labels,
            )
        )
    return reply, new


def test_hyperband_brackets_and_resources_are_katibs():
    """r_l=9, eta=3, nine trials asked each time (parallelTrialCount 9), as Katib's service computes them:
    s_max=2; bracket 2: 9 at 1, 3 at 3, 1 at 9; bracket 1: 9 at 3, 3 at 9; bracket 0: 9 at 9."""
    trials: list[TrialResult] = []
    state: tuple[tuple[str, str], ...] = ()
    rungs = []
    while True:
        reply, new = _step(trials, state)
        state = reply.state
        labels = {(dict(s.labels)[BRACKET_LABEL], dict(s.labels)[RUNG_LABEL]) for s in reply.suggestions}
        resources = {dict((a.name, a.value) for a in s.assignments)["epochs"] for s in reply.suggestions}
        assert len(labels) == 1 and len(resources) == 1
        rungs.append((*labels.pop(), len(new), resources.pop()))
        if reply.exhausted:
            break
        # a rung's promoted trials are the best of the rung before, with their other values kept
        trials += new
    assert rungs == [
        ("2", "0", 9, "1"),
        ("2", "1", 3, "3"),
        ("2", "2", 1, "9"),
        ("1", "0", 9, "3"),
        ("1", "1", 3, "9"),
        ("0", "0", 9, "9"),
    ]
    carried = dict(state)
    assert [name for name, _ in state][:10] == [
        "eta",
        "s_max",
        "r_l",
        "b_l",
        "r",
        "n",
        "current_s",
        "current_i",
        "resource_name",
        "evaluating_trials",
    ]
    assert (carried["eta"], carried["s_max"], carried["r_l"], carried["b_l"], carried["current_s"]) == (
        "3.0",
        "2",
        "9.0",
        "27.0",
        "-1",
    )
    done = get_suggestions(
        SuggestionRequest("d/hb", HYPERBAND, MINIMIZE, Algorithm("hyperband", SETTINGS), tuple(trials), 9, state)
    )
    assert done.suggestions == () and done.exhausted


def test_hyperband_promotes_the_best_succeeded_and_waits_for_the_rung():
    first, rung0 = _step([], (), fail=lambda index: index % 3 == 0)  # t0, t3, t6 fail
    running = [TrialResult(t.name, t.assignments, "Running", None, labels=t.labels) for t in rung0]
    wait = get_suggestions(
        SuggestionRequest("d/hb", HYPERBAND, MINIMIZE, Algorithm("hyperband", SETTINGS), tuple(running), 9, first.state)
    )
    assert wait.suggestions == () and wait.state == first.state and not wait.exhausted
    second, rung1 = _step(rung0, first.state)
    ranked = sorted((t for t in rung0 if t.state == "Succeeded"), key=lambda t: t.objective_value)
    keep = [tuple((a.name, a.value) for a in t.assignments if a.name != "epochs") for t in ranked[:3]]
    assert [tuple((a.name, a.value) for a in t.assignments if a.name != "epochs") for t in rung1] == keep
    assert all(dict((a.name, a.value) for a in t.assignments)["epochs"] == "3" for t in rung1)
