"""One Trial reconciled, as Katib's trial controller and metrics collector do it, one step at a time.

Each step: the Trial's job is created when it has none and the Trial is not finished (``trial_jobs.apply``);
its metrics are read (``collect``: the primary container's log for StdOut, the file or TensorBoard events
for File and TensorFlowEvent, on this host) into the observation (``katib.metrics.api.observation``, by the
Experiment's metric strategies); the job's object is matched against the template's success and failure
conditions (``katib.conditions.matches``):

- success with the objective metric observed → Succeeded ``TrialSucceeded``; success without it →
  MetricsUnavailable, the message naming the metric "not reported" (Katib: "Metrics are not available");
- failure → Failed ``TrialFailed``, the job's own last condition in the message, as Katib appends it;
- else Running ``TrialRunning``; a running Trial whose metric breaks an early-stopping rule is stopped
  (its job deleted) and marked EarlyStopped ``TrialEarlyStopped``.

A finished Trial's job is deleted unless the template says ``retain: true``; its metric log is kept in the
Experiment's folder (``observations/TRIAL.json``: Katib keeps it in its database) for the early-stopping
rules of later trials.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.katib import conditions, paths, trial_jobs
from millpond.katib.metrics.api import StdOutParser, collect_file, collect_tfevents, observation
from millpond.katib.metrics.records import UNAVAILABLE, MetricLog
from millpond.katib.status import FINISHED, marked, now_iso, trial_state, with_condition
from millpond.katib.suggestions.records import EarlyStoppingRule
from millpond.katib.webhook import ExperimentSpec
from millpond.settings import Settings
from millpond.store.resources import Resource


def collect(settings: Settings, spec: ExperimentSpec, trial: Resource, kind: str) -> list[MetricLog]:
    """Every metric the Trial reported so far, read from its source."""
    names = [spec.objective.metric_name, *spec.objective.additional_metric_names]
    collector = spec.collector
    if collector.kind == "StdOut":
        pods = trial_jobs.pods(settings, kind, trial.name, trial.name, trial.namespace)
        logs: list[MetricLog] = []
        for text in trial_jobs.primary_logs(pods, spec.primary_pod_labels, spec.primary_container):
            parser = StdOutParser(names, collector.metrics_format)
            logs += parser.feed(text if text.endswith("\n") else text + "\n")
            logs += parser.finish()
        return logs
    if collector.kind == "File" and collector.path:
        path = Path(collector.path)
        return collect_file(path, names, collector.file_format or "TEXT", collector.metrics_format) \
            if path.is_file() else []
    if collector.kind == "TensorFlowEvent" and collector.path:
        directory = Path(collector.path)
        return collect_tfevents(directory, names) if directory.is_dir() else []
    return []


def observed(logs: Sequence[MetricLog], spec: ExperimentSpec) -> dict[str, Any]:
    """Katib's ``status.observation``: min, max and latest of each metric (``unavailable`` when never reported)."""
    names = [spec.objective.metric_name, *spec.objective.additional_metric_names]
    values = observation(logs, {name: spec.strategies.get(name, "latest") for name in names})
    return {"metrics": [{"name": name, **asdict(value)} for name, value in values.items()]}


def _job_message(job: Mapping[str, Any]) -> tuple[str, str]:
    """The job's last true condition's reason and message (Katib appends them to the Trial's)."""
    found = [one for one in (job.get("status") or {}).get("conditions") or []
             if isinstance(one, dict) and one.get("status") == "True"]
    return (str(found[-1].get("reason") or ""), str(found[-1].get("message") or "")) if found else ("", "")


def _breaks(rule: EarlyStoppingRule, values: Sequence[float]) -> bool:
    """Whether the metric's latest value, once ``start_step`` values were reported, breaks ``rule``."""
    if len(values) < max(1, rule.start_step):
        return False
    target = float(rule.value)
    latest = values[-1]
    return {"less": latest < target, "greater": latest > target, "equal": latest == target}.get(rule.comparison,
                                                                                             False)


def observation_file(settings: Settings, experiment_uid: str, trial: str) -> Path:
    return paths.folder(settings, experiment_uid) / "observations" / f"{trial}.json"


def save_logs(path: Path, logs: Sequence[MetricLog]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps([asdict(one) for one in logs]))
    temporary.replace(path)


def load_logs(path: Path) -> list[MetricLog]:
    try:
        return [MetricLog(**one) for one in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []


@dataclass(frozen=True)
class Stepped:
    """What one step found: the Trial's new status, the metrics reported so far, and whether its job is to be
    deleted once that status is written (written first: a supervisor killed in between finds the Trial
    finished, never a finished job's Trial without its job, which it would run again)."""

    status: dict[str, Any]
    logs: list[MetricLog] = field(default_factory=list)
    delete_job: bool = False


class TrialStep:
    """One reconcile step of one unfinished Trial; ``rules``: the early-stopping rules in force now."""

    def __init__(self, settings: Settings, spec: ExperimentSpec, experiment_uid: str) -> None:
        self.settings = settings
        self.spec = spec
        self.experiment_uid = experiment_uid

    def run(self, trial: Resource, rules: Sequence[EarlyStoppingRule]) -> Stepped:
        """What the step found (the caller writes the status, then deletes the job when asked)."""
        status = dict(trial.status)
        if not status.get("conditions"):
            status = marked({**status, "startTime": now_iso()}, "Created", "TrialCreated", "Trial is created")
        run_spec = trial.manifest.get("spec", {}).get("runSpec") or {}
        kind = str(run_spec.get("kind") or "")
        job = trial_jobs.read(self.settings, kind, trial.name, trial.namespace)
        if job is None:
            try:
                trial_jobs.apply(self.settings, dict(run_spec))
            except UserError as exc:
                return self._ended(trial, marked(status, "Failed", "TrialFailed",
                                                 f"Trial has failed. Job message: {exc}"), [], stopped=True)
            job = trial_jobs.read(self.settings, kind, trial.name, trial.namespace)
        logs = collect(self.settings, self.spec, trial, kind)
        status["observation"] = observed(logs, self.spec)
        if job is None:
            return Stepped(status, logs)
        reason, message = _job_message(job)
        suffix = (f". Job message: {message}" if message else "", f". Job reason: {reason}" if reason else "")
        metric = self.spec.objective.metric_name
        if conditions.matches(self.spec.success_condition, job):
            value = next((one["latest"] for one in status["observation"]["metrics"] if one["name"] == metric),
                         UNAVAILABLE)
            if value != UNAVAILABLE:
                status = marked(status, "Succeeded", "TrialSucceeded" + suffix[1], "Trial has succeeded" + suffix[0])
            else:
                status = marked(status, "MetricsUnavailable", "MetricsUnavailable" + suffix[1],
                                f"Metrics are not available: metric {metric} not reported{suffix[0]}")
            return self._ended(trial, status, logs)
        if conditions.matches(self.spec.failure_condition, job):
            return self._ended(trial, marked(status, "Failed", "TrialFailed" + suffix[1],
                                             "Trial has failed" + suffix[0]), logs)
        if trial_state(status) != "Running":
            status = with_condition(status, "Running", "True", "TrialRunning", "Trial is running")
        for rule in rules:
            values = [float(one.value) for one in logs if one.name == rule.name and is_number(one.value)]
            if _breaks(rule, values):
                status = marked(status, "EarlyStopped", "TrialEarlyStopped",
                                f"Trial is early stopped: {rule.name} {rule.comparison} than {rule.value}")
                return replace(self._ended(trial, status, logs), delete_job=True)  # stopped, retained or not
        return Stepped(status, logs)

    def _ended(self, trial: Resource, status: dict[str, Any], logs: list[MetricLog],
               stopped: bool = False) -> Stepped:
        """A Trial that just finished: its completion time; its metric log kept; its job deleted unless retained."""
        assert trial_state(status) in FINISHED  # noqa: S101 - only called with a final condition
        save_logs(observation_file(self.settings, self.experiment_uid, trial.name), logs)
        return Stepped({**status, "completionTime": now_iso()}, logs, delete_job=not self.spec.retain and not stopped)


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
