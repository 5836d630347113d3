"""Fuzzing the Katib trial library: whatever an Experiment, a filter, a log or a condition holds, the only
error that comes out is a UserError (one line naming the field), never a crash.

Seeds: the corpus' upstream Experiments when they are beside this checkout, and a small Experiment of
our own so the fuzzing runs without them; Katib's default filter and conditions and the corpus' ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import UserError
from millpond.katib import conditions
from millpond.katib.metrics.api import StdOutParser, collector_spec, default_strategies, observation
from millpond.katib.metrics.filters import DEFAULT_FILTER
from millpond.katib.metrics.jsonlines import parse_json_lines
from millpond.katib.metrics.records import MetricLog
from millpond.katib.templates import render_trial, trial_meta, trial_spec_source, validate_template
from tests.fuzz_support import fuzz_settings, mutated, mutated_text
from tests.katib_lib.katib_lib_support import corpus_experiments

OWN_SEED = {
    "objective": {"type": "minimize", "objectiveMetricName": "loss", "additionalMetricNames": ["accuracy"]},
    "metricsCollectorSpec": {"collector": {"kind": "File"}, "source": {
        "fileSystemPath": {"kind": "File", "path": "/var/log/m.log", "format": "TEXT"},
        "filter": {"metricsFormat": [DEFAULT_FILTER]}}},
    "parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "1"}}],
    "trialTemplate": {
        "primaryContainerName": "main",
        "successCondition": conditions.JOB_SUCCESS, "failureCondition": conditions.JOB_FAILURE,
        "trialParameters": [{"name": "learningRate", "reference": "lr"},
                            {"name": "team", "reference": "${trialSpec.Labels[team]}"}],
        "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"labels": {"team": "a"}},
                      "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                          {"name": "main", "image": "python:3.11",
                           "args": ["--lr=${trialParameters.learningRate}", "${trialParameters.team}"]}]}}}},
    },
}
SPECS = [OWN_SEED] + [experiment["spec"] for _, experiment in corpus_experiments()]
FILTERS = [DEFAULT_FILTER, r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}", r"([\w-]+)=(Genotype.*)",
           r"(\w+):\s*([+-]?\d*\.?\d+)"]
CONDITIONS = [conditions.JOB_SUCCESS, conditions.KUBEFLOW_SUCCESS, 'status.[@this].#(phase=="Succeeded")#',
              'status.conditions.#(type=="Succeeded")#|#(status=="False")#', "status.conditions.#(n>=1)#.type",
              'list.#(=="tw")', "status.[@this,conditions.#]", 'a.#(b%"x*")#|#']
OBJECTS = [{"status": {"conditions": [{"type": "Complete", "status": "True", "n": 2}], "phase": "Succeeded"}},
           {"status": {"conditions": [{"type": "Succeeded", "status": "False"}, None, 3, [], "x"]}, "list": ["tw"]},
           {"status": "Succeeded"}, {"a": [{"b": "xy"}, {"b": 1}, {"b": True}, {"b": None}]}]


def refused_or_fine(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except UserError as exc:
        assert "\n" not in str(exc), str(exc)
        return None


def assignments(spec: Any) -> dict[str, str]:
    parameters = spec.get("parameters") if isinstance(spec, dict) else None
    if not isinstance(parameters, list):
        return {}
    return {str(p.get("name")): "0.5" for p in parameters if isinstance(p, dict)}


@fuzz_settings(examples=600)
@given(spec=mutated(SPECS))
def test_a_mutated_experiment_is_accepted_or_refused(spec: Any) -> None:
    refused_or_fine(lambda: collector_spec(spec))
    refused_or_fine(lambda: default_strategies(spec.get("objective") or {}) if isinstance(spec, dict) else None)

    def template() -> None:
        trial_spec = trial_spec_source(spec, "ns", lambda namespace, name: None)
        validate_template(spec, trial_spec)
        rendered = render_trial(trial_spec, spec["trialTemplate"]["trialParameters"], assignments(spec),
                                trial_meta(trial_spec, "t-1", "ns"))
        assert rendered["metadata"]["name"] == "t-1"

    refused_or_fine(template)


@fuzz_settings(examples=500)
@given(pattern=mutated_text(FILTERS), lines=st.lists(st.text(max_size=80), max_size=5))
def test_a_mutated_filter_is_accepted_or_refused_and_any_log_parses(pattern: str, lines: list[str]) -> None:
    parser = refused_or_fine(lambda: StdOutParser(["loss", "accuracy-top5"], [pattern]))
    if parser is not None:
        for line in lines:
            assert all(isinstance(log, MetricLog) for log in parser.feed(line + "\n"))
        assert parser.finish()


@fuzz_settings(examples=400)
@given(text=st.text(max_size=400))
def test_any_log_text_parses(text: str) -> None:
    parser = StdOutParser(["loss", "a"], [])
    logs = parser.feed(text) + parser.finish()
    result = observation(logs, {"loss": "min", "a": "max"})
    assert set(result) == {"loss", "a"}
    refused_or_fine(lambda: parse_json_lines(text, ["loss"], "metrics file f"))


@fuzz_settings(examples=300)
@given(records=st.lists(st.dictionaries(st.sampled_from(["loss", "timestamp", "x"]), st.one_of(
    st.text(max_size=30), st.floats(), st.integers(), st.booleans(), st.none())), max_size=5))
def test_any_json_lines_parse(records: list[dict[str, Any]]) -> None:
    text = "\n".join(json.dumps(record) for record in records)
    logs = parse_json_lines(text, ["loss"], "metrics file f")
    observation(logs, {"loss": "latest"})


@fuzz_settings(examples=800)
@given(expression=mutated_text(CONDITIONS), obj=st.sampled_from(OBJECTS))
def test_a_mutated_condition_is_accepted_or_refused(expression: str, obj: dict[str, Any]) -> None:
    if refused_or_fine(lambda: conditions.validate(expression, "spec.trialTemplate.successCondition")) is None:
        refused_or_fine(lambda: conditions.matches(expression, obj))
        refused_or_fine(lambda: conditions.matched_condition(expression, obj))


CONFIGMAP_TEXTS = ["""\
apiVersion: batch/v1
kind: Job
metadata:
  labels:
    team: a
spec:
  parallelism: ${trialParameters.learningRate}
  template:
    spec:
      containers:
        - name: main
          image: python:3.11
          command: ["python3", "-c", "print('${trialParameters.learningRate}', '${trialParameters.team}')"]
      restartPolicy: Never
"""]


@fuzz_settings(examples=400)
@given(text=mutated_text(CONFIGMAP_TEXTS), value=st.one_of(st.text(max_size=12), st.sampled_from(
    ["3", "a: b", "[1", "'", '"', "${trialParameters.team}", "\n- x", "&a", "*a"])))
def test_a_mutated_configmap_template_is_accepted_or_refused(text: str, value: str) -> None:
    spec = dict(OWN_SEED)
    template = dict(OWN_SEED["trialTemplate"])
    del template["trialSpec"]
    template["configMap"] = {"configMapName": "c", "templatePath": "t.yaml"}
    spec["trialTemplate"] = template

    def render() -> None:
        trial_spec = trial_spec_source(spec, "ns", lambda namespace, name: {"t.yaml": text})
        validate_template(spec, trial_spec)
        rendered = render_trial(trial_spec, template["trialParameters"], {"lr": value},
                                trial_meta(trial_spec, "t-1", "ns"), template_text=text)
        assert rendered["metadata"]["name"] == "t-1"

    refused_or_fine(render)

