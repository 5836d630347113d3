"""Katib's Experiment webhook: the defaults it writes into an Experiment and the rules it refuses one by.

As ``pkg/apis/controller/experiments/v1beta1/experiment_defaults.go`` and
``pkg/webhook/v1beta1/experiment/validator`` do, in that order: ``default_spec`` fills in
``parallelTrialCount`` (3), ``resumePolicy`` (Never), a metric strategy per metric (the objective's
direction: min for minimize, max for maximize), the trial kind's success and failure conditions and
primary pod labels, the StdOut metrics collector (and the File/TensorFlowEvent sources' default paths)
and each parameter's ``distribution`` (uniform); ``check_spec`` then reads the defaulted spec into an
:class:`ExperimentSpec` or raises the first problem as one UserError naming the field. The algorithm's
and its settings' rules are the suggestion library's (``katib.suggestions.api.validate``), the
collector's and the template's the trial library's (``katib.metrics``, ``katib.templates``).

Where millpond refuses more than Katib does, it says so: neural architecture search (``nasConfig``, enas,
darts) is not run here; ``maxTrialCount`` above ``MAX_TRIAL_COUNT`` (every Trial is an object of the store
and a job with pods: ten thousand of them is already more than one machine runs in a day); a trial kind
that millpond does not run (Katib's ``trialResources`` beyond the default, Argo Workflows, Tekton).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from millpond.errors import UserError
from millpond.katib import conditions, templates
from millpond.katib.metrics.api import collector_spec
from millpond.katib.metrics.records import CollectorSpec
from millpond.katib.suggestions.api import validate
from millpond.katib.suggestions.records import Algorithm, Objective, ParameterSpec
from millpond.kinds import REGISTRY

DEFAULT_PARALLEL_TRIAL_COUNT = 3
DEFAULT_RESUME_POLICY = "Never"
RESUME_POLICIES = ("Never", "LongRunning", "FromVolume")
MAX_TRIAL_COUNT = 10_000
NAME_LENGTH = 40  # Katib's: trial names are the experiment's name and 8 more characters
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_STRATEGY = {"minimize": "min", "maximize": "max"}
_FILE_DEFAULTS = {"File": ("File", "/var/log/katib/metrics.log"),
                  "TensorFlowEvent": ("Directory", "/var/log/katib/tfevent/")}
EDITABLE = ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount")
NAS = ("enas", "darts")

ConfigMapReader = Callable[[str, str], "Mapping[str, str] | None"]


@dataclass(frozen=True)
class ExperimentSpec:
    """A defaulted Experiment's spec, read: what the controller acts on."""

    parameters: tuple[ParameterSpec, ...]
    objective: Objective
    strategies: Mapping[str, str]  # metric name -> min | max | latest
    algorithm: Algorithm
    early_stopping: Algorithm | None
    parallel_trial_count: int
    max_trial_count: int | None
    max_failed_trial_count: int | None
    resume_policy: str
    collector: CollectorSpec
    trial_spec: Mapping[str, Any]  # the template: inline, or read from its ConfigMap
    trial_parameters: tuple[Mapping[str, Any], ...]
    primary_container: str | None
    primary_pod_labels: Mapping[str, str] = field(default_factory=dict)
    success_condition: str = ""
    failure_condition: str = ""
    retain: bool = False

    @property
    def trial_kind(self) -> tuple[str, str]:
        """The trial's (apiVersion, kind)."""
        return str(self.trial_spec.get("apiVersion") or ""), str(self.trial_spec.get("kind") or "")


def _count(spec: Mapping[str, Any], key: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"spec.{key}: must be an integer, not {json.dumps(value)}")
    return value


def default_spec(spec: Mapping[str, Any], namespace: str, read_configmap: ConfigMapReader) -> dict[str, Any]:
    """The spec with Katib's defaults written in (a copy: ``spec`` is left as it is)."""
    out = copy.deepcopy(dict(spec))
    out.setdefault("parallelTrialCount", DEFAULT_PARALLEL_TRIAL_COUNT)
    if not out.get("resumePolicy"):
        out["resumePolicy"] = DEFAULT_RESUME_POLICY
    objective = out.get("objective")
    if isinstance(objective, dict):
        strategies = objective.get("metricStrategies")
        strategies = list(strategies) if isinstance(strategies, list) else []
        named = {str(one.get("name")) for one in strategies if isinstance(one, dict)}
        value = _STRATEGY.get(str(objective.get("type")), "latest")
        for metric in [objective.get("objectiveMetricName"), *(objective.get("additionalMetricNames") or [])]:
            if isinstance(metric, str) and metric and metric not in named:
                strategies.append({"name": metric, "value": value})
                named.add(metric)
        objective["metricStrategies"] = strategies
    template = out.get("trialTemplate")
    if isinstance(template, dict):
        _default_template(template, namespace, read_configmap)
    collector = out.setdefault("metricsCollectorSpec", {})
    if isinstance(collector, dict):
        kind = collector.setdefault("collector", {"kind": "StdOut"})
        kind_name = kind.get("kind") if isinstance(kind, dict) else None
        if kind_name in _FILE_DEFAULTS:
            path_kind, path = _FILE_DEFAULTS[str(kind_name)]
            source = collector.setdefault("source", {})
            if isinstance(source, dict):
                system = source.setdefault("fileSystemPath", {})
                if isinstance(system, dict):
                    system.setdefault("kind", path_kind)
                    system.setdefault("path", path)
                    if kind_name == "File":
                        system.setdefault("format", "TEXT")
    for parameter in out.get("parameters") or []:
        if isinstance(parameter, dict) and isinstance(parameter.get("feasibleSpace"), dict):
            parameter["feasibleSpace"].setdefault("distribution", "uniform")
    return out


def _default_template(template: dict[str, Any], namespace: str, read_configmap: ConfigMapReader) -> None:
    """The trial kind's conditions and primary pod labels, as Katib defaults an inline ``trialSpec``'s (a
    ConfigMap's template is defaulted the same way here: its kind is known once it is read)."""
    try:
        trial_spec = templates.trial_spec_source({"trialTemplate": template}, namespace, read_configmap)
    except UserError:
        return  # check_spec says what is wrong with it
    api_version, kind = str(trial_spec.get("apiVersion") or ""), str(trial_spec.get("kind") or "")
    success, failure = conditions.default_conditions(api_version, kind)
    if success and not template.get("successCondition"):
        template["successCondition"] = success
    if failure and not template.get("failureCondition"):
        template["failureCondition"] = failure
    container, labels = conditions.default_primary(kind)
    if labels and not template.get("primaryPodLabels"):
        template["primaryPodLabels"] = dict(labels)
    if container and not template.get("primaryContainerName"):
        template["primaryContainerName"] = container


def check_name(name: str) -> None:
    """Katib's rule for an Experiment's name (trials are named after it)."""
    if not _NAME.match(name) or len(name) > NAME_LENGTH:
        raise UserError(f"metadata.name: invalid Experiment name {name!r}: must consist of lower case alphanumeric "
                        "characters or '-', start with an alphabetic character, end with an alphanumeric character "
                        f"and be at most {NAME_LENGTH} characters long")


def _counts(spec: Mapping[str, Any]) -> tuple[int, int | None, int | None]:
    parallel, most, failed = (_count(spec, key) for key in ("parallelTrialCount", "maxTrialCount",
                                                           "maxFailedTrialCount"))
    if failed is not None and failed < 0:
        raise UserError(f"spec.maxFailedTrialCount: {failed}: should not be less than 0")
    if most is not None and most <= 0:
        raise UserError(f"spec.maxTrialCount: {most}: must be greater than 0")
    if most is not None and most > MAX_TRIAL_COUNT:
        raise UserError(f"spec.maxTrialCount: {most}: at most {MAX_TRIAL_COUNT} trials run on one machine "
                        "(each is a stored object and a job)")
    if parallel is None or parallel <= 0:
        raise UserError(f"spec.parallelTrialCount: {parallel}: must be greater than 0")
    if failed is not None and most is not None and failed > most:
        raise UserError(f"spec.maxFailedTrialCount: {failed}: should be less than or equal to spec.maxTrialCount")
    if most is not None and parallel > most:
        raise UserError(f"spec.parallelTrialCount: {parallel}: should be less than or equal to spec.maxTrialCount")
    return parallel, most, failed


def _objective(spec: Mapping[str, Any]) -> tuple[Objective, dict[str, str]]:
    objective = spec.get("objective")
    if not isinstance(objective, dict):
        raise UserError("spec.objective: must be specified")
    kind = objective.get("type")
    if kind not in ("minimize", "maximize"):
        raise UserError(f"spec.objective.type: {json.dumps(kind)}: must be minimize or maximize")
    name = objective.get("objectiveMetricName")
    if not isinstance(name, str) or not name:
        raise UserError("spec.objective.objectiveMetricName: must be specified")
    additional = objective.get("additionalMetricNames") or []
    if not isinstance(additional, list) or not all(isinstance(one, str) for one in additional):
        raise UserError("spec.objective.additionalMetricNames: must be a list of metric names")
    if name in additional:
        raise UserError(f"spec.objective.additionalMetricNames: should not contain objective metric name {name}")
    goal = objective.get("goal")
    if goal is not None and (isinstance(goal, bool) or not isinstance(goal, int | float)):
        raise UserError(f"spec.objective.goal: {json.dumps(goal)}: must be a number")
    strategies: dict[str, str] = {}
    for index, one in enumerate(objective.get("metricStrategies") or []):
        value = one.get("value") if isinstance(one, dict) else None
        if value not in ("min", "max", "latest"):
            raise UserError(f"spec.objective.metricStrategies[{index}].value: {json.dumps(value)}: "
                            "must be min, max or latest")
        strategies[str(one.get("name"))] = str(value)
    return Objective(str(kind), float(goal) if goal is not None else None, name, tuple(additional)), strategies


def _settings(section: Mapping[str, Any], path: str) -> tuple[tuple[str, str], ...]:
    settings = section.get("algorithmSettings") or section.get("earlyStoppingSettings") or []
    if not isinstance(settings, list):
        raise UserError(f"{path}: must be a list of name/value pairs")
    pairs = []
    for index, one in enumerate(settings):
        if not isinstance(one, dict) or not isinstance(one.get("name"), str):
            raise UserError(f"{path}[{index}]: must have a name and a value")
        pairs.append((str(one["name"]), "" if one.get("value") is None else str(one["value"])))
    return tuple(pairs)


def _algorithms(spec: Mapping[str, Any]) -> tuple[Algorithm, Algorithm | None]:
    if spec.get("nasConfig") is not None:
        raise UserError("spec.nasConfig: neural architecture search (enas, darts) is not run by millpond")
    algorithm = spec.get("algorithm")
    if not isinstance(algorithm, dict):
        raise UserError("spec.algorithm: must be specified")
    name = algorithm.get("algorithmName")
    if not isinstance(name, str) or not name:
        raise UserError("spec.algorithm.algorithmName: must be specified")
    if name in NAS:
        raise UserError(f"spec.algorithm.algorithmName: {name}: neural architecture search is not run by millpond")
    chosen = Algorithm(name, _settings(algorithm, "spec.algorithm.algorithmSettings"))
    stopping = spec.get("earlyStopping")
    if stopping is None:
        return chosen, None
    if not isinstance(stopping, dict) or not isinstance(stopping.get("algorithmName"), str):
        raise UserError("spec.earlyStopping.algorithmName: must be specified")
    early = Algorithm(stopping["algorithmName"],
                      _settings(stopping, "spec.earlyStopping.algorithmSettings"))
    from millpond.katib.suggestions.earlystopping import validate_early_stopping  # noqa: PLC0415 - only when used

    validate_early_stopping(early.name, early.settings)
    return chosen, early


def _parameters(spec: Mapping[str, Any]) -> tuple[ParameterSpec, ...]:
    parameters = spec.get("parameters")
    if not isinstance(parameters, list) or not parameters:
        raise UserError("spec.parameters: must be specified")
    read = []
    for index, one in enumerate(parameters):
        where = f"spec.parameters[{index}]"
        if not isinstance(one, dict) or not isinstance(one.get("name"), str) or not one["name"]:
            raise UserError(f"{where}.name: must be specified")
        space = one.get("feasibleSpace")
        if not isinstance(space, dict):
            raise UserError(f"{where}.feasibleSpace: must be specified")
        values = space.get("list") or []
        if not isinstance(values, list):
            raise UserError(f"{where}.feasibleSpace.list: must be a list")

        def text(key: str, space: Mapping[str, Any] = space) -> str | None:
            value = space.get(key)
            return None if value is None else str(value)

        read.append(ParameterSpec(one["name"], str(one.get("parameterType") or ""), text("min"), text("max"),
                                  text("step"), tuple(str(value) for value in values)))
    return tuple(read)


def _template(spec: Mapping[str, Any], namespace: str,
              read_configmap: ConfigMapReader) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    template = spec.get("trialTemplate")
    if not isinstance(template, dict):
        raise UserError("spec.trialTemplate: must be specified")
    trial_spec = templates.trial_spec_source(spec, namespace, read_configmap)
    templates.validate_template(spec, trial_spec)
    api_version, kind = str(trial_spec.get("apiVersion") or ""), str(trial_spec.get("kind") or "")
    entry = REGISTRY.find(kind) if kind else None
    group, _, version = api_version.rpartition("/")
    if entry is None or entry.kind != kind or entry.group != group or version not in entry.versions:
        raise UserError(f"spec.trialTemplate.trialSpec: {kind or 'no kind'} ({api_version or 'no apiVersion'}) is "
                        "not a kind millpond runs as a trial (batch Job, PyTorchJob, TFJob, MPIJob, XGBoostJob, "
                        "TrainJob and the other kinds `millpond apply` runs)")
    if not template.get("successCondition") or not template.get("failureCondition"):
        raise UserError("spec.trialTemplate: successCondition and failureCondition must be specified")
    return template, trial_spec


def check_spec(spec: Mapping[str, Any], namespace: str, read_configmap: ConfigMapReader) -> ExperimentSpec:
    """A defaulted spec read, or UserError: the first of Katib's rules it breaks, naming the field."""
    parallel, most, failed = _counts(spec)
    resume = spec.get("resumePolicy")
    if resume not in RESUME_POLICIES:
        raise UserError(f"spec.resumePolicy: {json.dumps(resume)}: must be one of {', '.join(RESUME_POLICIES)}")
    objective, strategies = _objective(spec)
    algorithm, early = _algorithms(spec)
    parameters = _parameters(spec)
    validate(parameters, objective, algorithm, max_trial_count=most, parallel_trial_count=parallel)
    collector = collector_spec(spec)
    template, trial_spec = _template(spec, namespace, read_configmap)
    labels = template.get("primaryPodLabels") or {}
    return ExperimentSpec(
        parameters=parameters, objective=objective, strategies=strategies, algorithm=algorithm,
        early_stopping=early, parallel_trial_count=parallel, max_trial_count=most, max_failed_trial_count=failed,
        resume_policy=str(resume), collector=collector, trial_spec=trial_spec,
        trial_parameters=tuple(template.get("trialParameters") or ()),
        primary_container=template.get("primaryContainerName") or None,
        primary_pod_labels={str(key): str(value) for key, value in labels.items()},
        success_condition=str(template["successCondition"]), failure_condition=str(template["failureCondition"]),
        retain=bool(template.get("retain")))


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], old_status: Mapping[str, Any]) -> None:
    """Katib's rules for changing an Experiment: only the three counts may change, a completed one only when
    it can be restarted (Succeeded by reaching maxTrialCount, resumePolicy LongRunning or FromVolume), and a
    raised ``maxTrialCount`` must exceed the trials it has."""
    if dict(old) == dict(new):
        return
    reasons = {str(one.get("type")): one for one in old_status.get("conditions") or [] if isinstance(one, dict)}
    completed = any(reasons.get(kind, {}).get("status") == "True" for kind in ("Succeeded", "Failed"))
    restartable = (reasons.get("Succeeded", {}).get("status") == "True"
                   and reasons["Succeeded"].get("reason") == "ExperimentMaxTrialsReached"
                   and new.get("resumePolicy") in ("LongRunning", "FromVolume"))
    if completed and not restartable:
        raise UserError(f"spec.resumePolicy: {new.get('resumePolicy')}: a completed Experiment can be restarted "
                        "only when it succeeded by reaching maxTrialCount and spec.resumePolicy is LongRunning or "
                        "FromVolume")
    most = new.get("maxTrialCount")
    if isinstance(most, int) and most <= int(old_status.get("trials") or 0):
        raise UserError(f"spec.maxTrialCount: {most}: must be greater than status.trials count")
    if {k: v for k, v in old.items() if k not in EDITABLE} != {k: v for k, v in new.items() if k not in EDITABLE}:
        raise UserError("spec: only spec.parallelTrialCount, spec.maxTrialCount and spec.maxFailedTrialCount "
                        "are editable")
