"""random and tpe with hyperopt, as Katib's hyperopt suggestion service builds its space and its calls.

The space is Katib's: ``quniform`` for a stepped number, ``uniformint`` for an int, ``uniform`` for a
double, ``choice`` over a discrete or categorical list. Each call rebuilds hyperopt's ``Trials`` from
the observations (hyperopt's suggest functions are pure functions of those documents and a seed) and
draws one new point per seed, so two suggestions of one call differ and a restart changes nothing.
Values are snapped onto ``min + k*step`` (hyperopt's ``quniform`` rounds to multiples of ``step``).
"""

from __future__ import annotations

from typing import Any

import hyperopt
from hyperopt import hp

from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assignments_of, snap


def _expression(param: Param) -> Any:
    if param.type in ("discrete", "categorical"):
        return hp.choice(param.name, list(param.values))
    if param.step is not None:
        return hp.quniform(param.name, param.low, param.high, param.step)
    if param.type == "int":
        return hp.uniformint(param.name, param.low, param.high)
    return hp.uniform(param.name, param.low, param.high)


def domain(params: tuple[Param, ...]) -> Any:
    """hyperopt's Domain over the parameters (built once per experiment: see api's cache)."""
    return hyperopt.Domain(None, {p.name: _expression(p) for p in params}, pass_expr_memo_ctrl=None)


def _history(search: Search, space: Any) -> Any:
    trials = hyperopt.Trials()
    if not search.observations:
        return trials
    tids = trials.new_trial_ids(len(search.observations))
    miscs, specs, results = [], [], []
    for tid, observation in zip(tids, search.observations, strict=True):
        vals: dict[str, list[float | int]] = {}
        for param in search.params:
            value = observation.values[param.name]
            vals[param.name] = [param.values.index(value)] if not param.numeric else [float(value)]
        miscs.append(
            {
                "tid": tid,
                "cmd": space.cmd,
                "workdir": space.workdir,
                "idxs": {name: [tid] for name in vals},
                "vals": vals,
            }
        )
        specs.append({"trial-name": observation.name})
        results.append({"loss": observation.loss, "status": hyperopt.STATUS_OK})
    docs = trials.new_trial_docs(tids=tids, specs=specs, results=results, miscs=miscs)
    for doc in docs:
        doc["state"] = hyperopt.JOB_STATE_DONE
    trials.insert_trial_docs(docs)
    trials.refresh()
    return trials


def _value(param: Param, raw: float) -> object:
    if not param.numeric:
        return param.values[int(raw)]
    return snap(param, float(raw))


def suggest(search: Search, space: Any) -> SuggestionReply:
    tpe = search.request.algorithm.name == "tpe"
    trials = _history(search, space) if tpe else hyperopt.Trials()  # rand.suggest reads no history
    settings = search.settings
    options: dict[str, Any] = {}
    if tpe:
        # Katib starts modelling once as many trials as one request asks for have finished.
        options["n_startup_jobs"] = int(settings.get("n_startup_trials", search.count))  # type: ignore[call-overload]
        for name, option in (
            ("gamma", "gamma"),
            ("prior_weight", "prior_weight"),
            ("n_EI_candidates", "n_EI_candidates"),
            ("n_ei_candidates", "n_EI_candidates"),
        ):
            if name in settings:
                options[option] = settings[name]
    suggestions = []
    for index in range(search.count):
        new_id = trials.new_trial_ids(1)
        if tpe:
            docs = hyperopt.tpe.suggest(new_id, space, trials, search.seed(index), verbose=False, **options)
        else:
            docs = hyperopt.rand.suggest(new_id, space, trials, search.seed(index))
        vals = docs[0]["misc"]["vals"]
        values = {p.name: _value(p, vals[p.name][0]) for p in search.params}
        suggestions.append(Suggestion(assignments_of(search.params, values)))
    return SuggestionReply(tuple(suggestions), search.state(len(suggestions)))
