"""``python -m millpond.katib.supervisor NAMESPACE NAME UID``: one Experiment's controller.

Started detached by ``katib.objects.start``; one per uid (a lock on a file of its folder: a second one leaves
at once). Each tick (``TICK_S``) it reads everything afresh from the store, as Katib's controllers reconcile:

1. the Experiment is gone or re-created (another uid): end;
2. each unfinished Trial takes a step (``katib.trials``): its job created, its metrics read, its conditions
   set, early stopping applied; the new status written before its job is deleted;
3. the Experiment's summary (``katib.status``): counts, lists, current optimal trial; a Succeeded Experiment
   whose ``maxTrialCount`` was raised (resumePolicy LongRunning or FromVolume: the webhook refused it for
   Never) is marked Restarting, then Running; then the condition that ends it, or Running;
4. while it runs: new Trials up to ``parallelTrialCount`` active and ``maxTrialCount`` in all, from the
   suggestions recorded in its Suggestion first, then from new ones (``katib.suggesting``: recorded before
   any Trial is created, so a ``kill -9`` anywhere neither loses nor repeats one);
5. the status written when it changed.

Once the Experiment is finished and no Trial is active, the supervisor ends (an apply that raises
``maxTrialCount`` starts another). It leaves in an order that loses no such apply: it first drops its record
among the background processes (an apply from then on starts another supervisor, which waits for this one's
lock), then reads the Experiment once more and stays when its spec changed since its last step (an apply that
came before saw it running and started none). Katib lets Trials that were running when the goal was reached finish;
so does this. A spec that cannot run (a UserError: a trial it renders is refused) ends the Experiment Failed with the
reason; any other fault of a tick is printed to the supervisor's log and the tick retried, waiting longer
each time (up to ``RETRY_MAX_S``), as Katib's controllers requeue.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import traceback
from typing import Any

from millpond.errors import UserError
from millpond.katib import objects, paths, status, suggesting, trial_jobs, trials
from millpond.katib.kinds import API_VERSION, EXPERIMENT, EXPERIMENT_LABEL, TRIAL
from millpond.katib.manifests import configmap_reader
from millpond.katib.suggestions.records import Assignment, EarlyStoppingRule, TrialResult
from millpond.katib.webhook import ExperimentSpec, check_spec
from millpond.runners import background, object_supervisors
from millpond.settings import Settings, load_settings
from millpond.store import config_documents
from millpond.store.resources import Resource, ResourceStore
from millpond.store.secrets import ConfigStore

TICK_S = 0.25  # a trial that ended is seen within it; a tick costs some 8 ms of CPU (3% of a core at 0.25 s)
RETRY_MAX_S = 30.0  # the longest wait before retrying a tick that failed
LOCK_WAIT_S = 10.0  # how long a new supervisor waits for one that is leaving


class CannotRun(UserError):
    """The Experiment's template cannot make a Trial of a suggestion (Katib retries it for ever; millpond ends
    the Experiment Failed with the reason)."""


def _assignments(trial: Resource) -> tuple[Assignment, ...]:
    return tuple(Assignment(str(one["name"]), str(one["value"]))
                 for one in trial.manifest.get("spec", {}).get("parameterAssignments") or [])


def _warm() -> None:
    """Import ``jsonschema`` (every trial job's schema check needs it; its import takes seconds on a loaded
    machine) while the first tick computes its suggestions, so the first Trial's job is not applied seconds
    after the Trial was created."""
    importlib.import_module("jsonschema")


class ExperimentSupervisor:
    """The reconciler of one Experiment (see the module's docstring for its steps)."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str) -> None:
        self.settings = settings
        self.namespace, self.name, self.uid = namespace, name, uid
        self.store = ResourceStore(settings)
        self.stopping = threading.Event()
        self.reader = configmap_reader(config_documents.WithPlanned(ConfigStore(settings.home), []))
        self.swept = False

    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        threading.Thread(target=_warm, daemon=True, name="warm").start()
        failures = 0
        while not self.stopping.is_set():
            experiment = self.store.get(EXPERIMENT.kind, self.name, self.namespace)
            if experiment is None or experiment.uid != self.uid:
                return
            wait = TICK_S
            try:
                if not self.step(experiment) and self._may_leave(experiment):
                    return
                failures = 0
            except CannotRun as exc:  # the spec cannot run (a trial it renders is refused): it says why, for good
                self._write(experiment, status.marked(experiment.status, "Failed", "ExperimentFailed", str(exc)))
                return
            except Exception:  # noqa: BLE001 - a passing fault (the store busy): retried, as Katib requeues
                traceback.print_exc()
                failures += 1
                wait = min(RETRY_MAX_S, TICK_S * 2 ** failures)
            self.stopping.wait(wait)

    def _may_leave(self, stepped: Resource) -> bool:
        """Drop this supervisor's record, then: True unless the Experiment's spec changed since ``stepped`` (it
        then registers again and stays; see the module's docstring)."""
        mine = [one for one in objects.supervisors(self.namespace, self.name, self.uid) if one.pid == os.getpid()]
        for one in mine:
            background.forget(one)
        fresh = self.store.get(EXPERIMENT.kind, self.name, self.namespace)
        if fresh is None or fresh.uid != self.uid or fresh.manifest.get("spec") == stepped.manifest.get("spec"):
            return True
        background.register(objects.PROCESS_KIND, f"{self.namespace}/{self.name}", self.uid)
        return False

    # ------------------------------------------------------------------ one tick
    def step(self, experiment: Resource) -> bool:
        """One reconcile; False when there is nothing left to do (finished, no trial active)."""
        raw = experiment.manifest.get("spec") or {}
        try:
            spec = check_spec(raw, self.namespace, self.reader)
        except UserError as exc:  # its ConfigMap template went away, say
            self._write(experiment, status.marked(experiment.status, "Failed", "ExperimentFailed", str(exc)))
            return False
        current = dict(experiment.status)
        if not current.get("conditions"):
            current = status.marked({"startTime": status.now_iso()}, "Created", "ExperimentCreated",
                                    "Experiment is created")
        suggestion = suggesting.ensure(self.store, self.namespace, self.name, spec, raw)
        owned = objects.owned_trials(self.store, self.namespace, self.name)
        if not self.swept:
            self._sweep(spec, owned)
        rules = self._rules(spec, owned)
        stepper = trials.TrialStep(self.settings, spec, self.uid)
        for trial in owned:
            if status.trial_state(trial.status) not in status.FINISHED:
                self._step_trial(stepper, trial, rules)
        counts, goal = status.summary(spec, [status.TrialView(one.name, one.manifest["spec"].get(
            "parameterAssignments") or [], one.status) for one in owned])
        current = {**current, **counts}
        for key in [key for key in current if key.endswith("TrialList") and key not in counts]:
            current.pop(key)  # a list that emptied
        current = self._restarted(spec, current)
        ended = status.ending(spec, counts, goal, suggesting.exhausted(suggestion)) \
            if not objects.finished(current) else None
        if ended is not None:
            current = status.marked(current, *ended)
            current["completionTime"] = status.now_iso()
        elif not objects.finished(current):
            current = status.with_condition(current, "Running", "True", "ExperimentRunning", "Experiment is running")
            wanted = status.trials_to_add(spec, counts)
            if wanted:  # their jobs applied at once, as Katib's trial controller reacts to the Trial's creation
                for trial in self._add_trials(spec, raw, suggestion, owned, wanted):
                    self._step_trial(stepper, trial, rules)
        if objects.finished(current):
            suggesting.finish(self.store, suggestion, self.namespace, spec.resume_policy)
        elif status.is_true(current, "Restarting"):
            suggesting.restart(self.store, suggestion, self.namespace)
        self._write(experiment, current)
        active = int(counts.get("trialsRunning") or 0) + int(counts.get("trialsPending") or 0)
        return not objects.finished(current) or active > 0

    def _step_trial(self, stepper: trials.TrialStep, trial: Resource, rules: tuple[EarlyStoppingRule, ...]) -> None:
        """One unfinished Trial's step: its new status written, then its job deleted when the step says so."""
        stepped = stepper.run(trial, rules)
        if stepped.status != trial.status:
            self.store.set_status(TRIAL.kind, trial.name, stepped.status, self.namespace)
            trial.status = stepped.status
        if stepped.delete_job:
            objects.delete_job(self.settings, trial)

    def _restarted(self, spec: ExperimentSpec, current: dict[str, Any]) -> dict[str, Any]:
        """A Succeeded Experiment that reached maxTrialCount, restartable, whose maxTrialCount is now higher than
        its completed trials: Restarting (Succeeded removed), as Katib's ``MarkExperimentStatusRestarting``."""
        if not (status.is_true(current, "Succeeded") and status.reason_of(current, "Succeeded")
                == "ExperimentMaxTrialsReached" and spec.resume_policy in ("LongRunning", "FromVolume")):
            return current
        if spec.max_trial_count is not None and spec.max_trial_count <= int(current.get("trials") or 0):
            return current
        restarted = status.without_conditions(current, "Succeeded", "Failed")
        restarted.pop("completionTime", None)
        return status.with_condition(restarted, "Restarting", "True", "ExperimentRestarting",
                                     "Experiment is restarted")

    def _sweep(self, spec: ExperimentSpec, owned: list[Resource]) -> None:
        """Once per supervisor: the jobs of finished, unretained Trials that a killed supervisor left."""
        self.swept = True
        if spec.retain:
            return
        for trial in owned:
            if status.trial_state(trial.status) in status.FINISHED:
                objects.delete_job(self.settings, trial)

    def _rules(self, spec: ExperimentSpec, owned: list[Resource]) -> tuple[EarlyStoppingRule, ...]:
        if spec.early_stopping is None:
            return ()
        from millpond.katib.suggestions.earlystopping import early_stopping_rules  # noqa: PLC0415 - only when used

        metric = spec.objective.metric_name
        logs: dict[str, list[tuple[int, float]]] = {}
        for trial in owned:
            if status.trial_state(trial.status) not in status.FINISHED:
                continue
            values = [one.value for one in trials.load_logs(trials.observation_file(self.settings, self.uid,
                                                                                     trial.name))
                      if one.name == metric]
            logs[trial.name] = [(step, float(value)) for step, value in enumerate(values, 1) if trials.is_number(value)]
        return early_stopping_rules(spec.early_stopping.name, spec.early_stopping.settings, spec.objective,
                                    self._results(spec, owned), logs)

    def _results(self, spec: ExperimentSpec, owned: list[Resource]) -> tuple[TrialResult, ...]:
        """Every trial so far as the suggestion library reads it."""
        metric = spec.objective.metric_name
        strategy = spec.strategies.get(metric, "latest")
        results = []
        for trial in owned:
            value = status.objective_value(trial.status, metric, strategy)
            metrics = tuple((str(one.get("name")), float(one["latest"]))
                            for one in (trial.status.get("observation") or {}).get("metrics") or []
                            if trials.is_number(str(one.get("latest"))))
            labels = tuple(sorted((trial.manifest.get("spec", {}).get("labels") or {}).items()))
            results.append(TrialResult(trial.name, _assignments(trial), status.trial_state(trial.status),
                                       float(value) if trials.is_number(value) else None, metrics, labels))
        return tuple(results)

    def _add_trials(self, spec: ExperimentSpec, raw: dict[str, Any], suggestion: Resource,
                    owned: list[Resource], wanted: int) -> list[Resource]:
        """Create ``wanted`` Trials: from recorded suggestions that have none first, then from new ones; those
        created."""
        have = {trial.name for trial in owned}
        waiting = [one for one in suggesting.recorded(suggestion) if one.name not in have]
        if len(waiting) < wanted and not suggesting.exhausted(suggestion):
            if suggesting.request_more(self.store, suggestion, self.namespace, self.name, spec,
                                       self._results(spec, owned), wanted - len(waiting)):
                fresh = self.store.get(suggestion.kind, suggestion.name, self.namespace)
                if fresh is not None:
                    waiting = [one for one in suggesting.recorded(fresh) if one.name not in have]
        created = [self.store.create(self._trial_body(spec, raw, one)) for one in waiting[:wanted]]
        return [trial for trial in created if trial is not None]

    def _trial_body(self, spec: ExperimentSpec, raw: dict[str, Any], one: suggesting.Recorded) -> dict[str, Any]:
        """The Trial of one suggestion, as Katib's experiment controller makes it (``manifest.generator``)."""
        values = {assignment.name: assignment.value for assignment in one.assignments}
        template = raw.get("trialTemplate") or {}
        try:
            run_spec = trial_jobs.render(spec, self.name, one.name, self.namespace, values,
                                         trial_jobs.template_text(raw, self.namespace, self.reader))
        except UserError as exc:
            raise CannotRun(f"trial {one.name}: {exc}") from None
        return {
            "apiVersion": API_VERSION, "kind": TRIAL.kind,
            "metadata": {"name": one.name, "namespace": self.namespace, "labels": {EXPERIMENT_LABEL: self.name},
                         "ownerReferences": [{"apiVersion": API_VERSION, "kind": EXPERIMENT.kind, "name": self.name,
                                              "uid": self.uid, "controller": True, "blockOwnerDeletion": True}]},
            "spec": {
                "objective": raw.get("objective"),
                "parameterAssignments": [{"name": a.name, "value": a.value} for a in one.assignments],
                "runSpec": run_spec,
                "metricsCollector": raw.get("metricsCollectorSpec"),
                **({"earlyStopping": raw["earlyStopping"]} if raw.get("earlyStopping") else {}),
                **({"primaryContainerName": spec.primary_container} if spec.primary_container else {}),
                **({"primaryPodLabels": dict(spec.primary_pod_labels)} if spec.primary_pod_labels else {}),
                "successCondition": spec.success_condition, "failureCondition": spec.failure_condition,
                "retainRun": spec.retain,
                **({"labels": dict(one.labels)} if one.labels else {}),
                **({"trialParameters": template.get("trialParameters")} if template.get("trialParameters") else {}),
            },
        }

    def _write(self, experiment: Resource, current: dict[str, Any]) -> None:
        if current != experiment.status:
            self.store.set_status(EXPERIMENT.kind, self.name, current, self.namespace)
            experiment.status = current


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m millpond.katib.supervisor NAMESPACE NAME UID", file=sys.stderr)
        return 2
    namespace, name, uid = argv
    settings = load_settings()
    with object_supervisors.exclusive(paths.folder(settings, uid) / "supervisor.lock", LOCK_WAIT_S) as mine:
        if mine:  # else another supervisor of this uid runs (it may be leaving: see _may_leave) and stays
            ExperimentSupervisor(settings, namespace, name, uid).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
