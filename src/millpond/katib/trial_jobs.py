"""A Trial's job: rendered from the Experiment's template, applied through the registry of kinds, read back.

The job is an object of the trial kind (a batch Job, a PyTorchJob, a TrainJob…) named after the Trial in the
Experiment's namespace, applied as ``millpond apply`` applies one (``REGISTRY.plan`` then ``apply``): it goes
through the namespace's ResourceQuota and Kueue, runs in its image where the runtime policy says so, and its
pods show in the ``v1`` Pod kind. Katib's labels (``katib.kubeflow.org/experiment`` and ``/trial``) go on the
job and on every pod template in it, so its pods are found by them (a kind whose pods come from no template
in its spec, a TrainJob's, is found by its pods' owner). Applying the same job again is ``unchanged``: a
controller that restarts between creating a Trial and its job creates the job once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.datasets.schema_check import check_schema_file
from millpond.errors import NotFoundError
from millpond.katib import templates
from millpond.katib.kinds import EXPERIMENT_LABEL, TRIAL_LABEL
from millpond.katib.webhook import ExperimentSpec
from millpond.kind_handler import ApplyBatch, KindContext, KindName
from millpond.kinds import REGISTRY
from millpond.pods import sources
from millpond.pods.records import PodView
from millpond.settings import Settings
from millpond.store import config_documents
from millpond.store.secrets import ConfigStore


def labels(experiment: str, trial: str) -> dict[str, str]:
    return {EXPERIMENT_LABEL: experiment, TRIAL_LABEL: trial}


def template_text(experiment_spec: Mapping[str, Any], namespace: str,
                  read_configmap: templates.ReadConfigMap) -> str | None:
    """A ConfigMap template's YAML text (filled as text, as Katib fills it), None for an inline ``trialSpec``."""
    if (experiment_spec.get("trialTemplate") or {}).get("configMap") is None:
        return None
    return templates.trial_template_text(experiment_spec, namespace, read_configmap)


def render(spec: ExperimentSpec, experiment: str, trial: str, namespace: str,
           assignments: Mapping[str, str], text: str | None = None) -> dict[str, Any]:
    """The Trial's job: the template (``text``: its ConfigMap's YAML) with its trial parameters substituted, named
    after the Trial and labelled for it (``${trialSpec.Labels[k]}`` reads the template's own labels, as Katib's)."""
    meta = templates.trial_meta(spec.trial_spec, trial, namespace)
    job = templates.render_trial(spec.trial_spec, spec.trial_parameters, assignments, meta, template_text=text)
    job["metadata"]["labels"] = {**(job["metadata"].get("labels") or {}), **labels(experiment, trial)}
    _label_pod_templates(job, labels(experiment, trial))
    return job


def _label_pod_templates(node: object, wanted: Mapping[str, str]) -> None:
    """Katib's labels on every pod template of the job (a mapping under ``template`` whose spec has containers)."""
    if isinstance(node, dict):
        template = node.get("template")
        if isinstance(template, dict) and isinstance((template.get("spec") or {}).get("containers"), list):
            metadata = template.setdefault("metadata", {})
            metadata["labels"] = {**(metadata.get("labels") or {}), **wanted}
        for value in node.values():
            _label_pod_templates(value, wanted)
    elif isinstance(node, list):
        for item in node:
            _label_pod_templates(item, wanted)


def kind_of(kind: str) -> KindName:
    entry = REGISTRY.loaded().find(kind)
    if entry is None:  # the webhook let only a kind of the registry through
        raise NotFoundError(f"{kind}: not a kind millpond runs")
    return entry


def apply(settings: Settings, job: dict[str, Any]) -> None:
    """Check and apply the job as ``millpond apply`` would (UserError: the kind's check refused it)."""
    batch = ApplyBatch(KindContext(settings), check_schema_file,
                       config_documents.WithPlanned(ConfigStore(settings.home), []))
    for plan in REGISTRY.plan([(f"trial {job['metadata']['name']}", 1, job)], batch):
        plan.apply(batch)


def read(settings: Settings, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    """The job as ``kubectl get -o json`` shows it (its status as its controller wrote it), or None."""
    entry = kind_of(kind)
    try:
        return REGISTRY.handler(entry).get(entry, name, namespace, KindContext(settings))
    except NotFoundError:
        return None


def pods(settings: Settings, kind: str, job: str, trial: str, namespace: str) -> list[PodView]:
    """The job's pods: labelled for the trial, or (a kind whose pods carry no template of the spec) owned by it."""
    return [pod for pod in sources.all_pods(namespace, KindContext(settings))
            if pod.labels.get(TRIAL_LABEL) == trial or (pod.owner is not None and pod.owner.kind == kind
                                                        and pod.owner.name == job)]


def primary_logs(found: list[PodView], primary_labels: Mapping[str, str], container: str | None) -> list[str]:
    """The text of the primary container's log in each primary pod (Katib collects the metrics there):
    pods matching ``primary_labels`` (every pod when none), the container named (the only one when none)."""
    texts = []
    for pod in found:
        if any(pod.labels.get(key) != value for key, value in primary_labels.items()):
            continue
        chosen = pod.container(container) if container else (pod.containers[0] if len(pod.containers) == 1 else None)
        if chosen is None or chosen.log is None:
            continue
        try:
            data = chosen.log.path.read_text(errors="replace")
        except OSError:
            continue
        if chosen.log.stamped:
            data = "\n".join(line.split(" ", 1)[1] if " " in line else line for line in data.split("\n"))
        texts.append(data)
    return texts
