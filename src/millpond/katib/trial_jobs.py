"""A Trial's job: rendered from the Experiment's template, applied through the registry of kinds, read back.

The job is an object of the trial kind (a batch Job, a PyTorchJob, a TrainJob…) named after the Trial in the
Experiment's namespace, applied as ``millpond apply`` applies one (``REGISTRY.plan`` then ``apply``): it goes
through the namespace's ResourceQuota and Kueue, runs in its image where the runtime policy says so, and its
pods show in the ``v1`` Pod kind. Katib's labels (``katib.kubeflow.org/experiment`` and ``/trial``) go on the
job and on every pod template in it, so its pods are found by them (a kind whose pods come from no template
in its spec, a TrainJob's, is found by its pods' owner). Applying the same job again is ``unchanged``: a
controller that restarts between creating a Trial and its job creates the job once.

Katib's webhook injects its metrics collector into the primary pods of a trial whose collector is StdOut or File
(container ``metrics-logger-and-collector``, printing the training container's output or the metrics file's
lines); here each pod template carries the ``pods.sidecars`` annotation that shows that container on the pods
made from it, a view of the primary container (no second process). Push collects nothing, so no sidecar.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.datasets.schema_check import check_schema_file
from millpond.errors import NotFoundError
from millpond.katib import templates
from millpond.katib.kinds import EXPERIMENT_LABEL, TRIAL_LABEL
from millpond.katib.metrics.filters import DEFAULT_FILTER
from millpond.katib.metrics.spec import DEFAULT_FILE_PATH
from millpond.katib.webhook import ExperimentSpec
from millpond.kind_handler import ApplyBatch, KindContext, KindName
from millpond.kinds import REGISTRY
from millpond.pods import sidecars, sources
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
    sidecar = collector_sidecar(spec, trial, _first_container(job))
    if sidecar is not None:
        _annotate_pod_templates(job, {sidecars.ANNOTATION: sidecars.annotation(sidecar)})
    return job


COLLECTOR_CONTAINER = "metrics-logger-and-collector"  # Katib's sidecar for the StdOut and File collectors
COLLECTOR_IMAGE = "ghcr.io/kubeflow/katib/file-metrics-collector:latest"  # katib-config's runtime.metricsCollectors
DB_MANAGER = "katib-db-manager.kubeflow:6789"  # where the collector reports (Katib's GetDBManagerAddr)
COLLECTOR_FAILED = 255  # klog.Fatalf's exit: the collector finds no completion mark when training failed


def collector_sidecar(spec: ExperimentSpec, trial: str, first: str | None) -> sidecars.MirrorSidecar | None:
    """The container Katib's webhook injects into the trial's primary pods, with the arguments it gives it
    (``getMetricsCollectorArgs``); None for a collector with no ``metrics-logger-and-collector`` (Push; the
    TensorFlowEvent collector's ``metrics-collector`` is not shown) or a template without a container."""
    collector = spec.collector
    mirrors = spec.primary_container or first
    if collector.kind not in ("StdOut", "File") or not mirrors:
        return None
    names = ";".join((spec.objective.metric_name, *spec.objective.additional_metric_names))
    path = collector.path or DEFAULT_FILE_PATH
    args = ["-t", trial, "-m", names, "-o-type", spec.objective.type, "-s-db", DB_MANAGER, "-path", path]
    if collector.metrics_format and collector.metrics_format != (DEFAULT_FILTER,):
        args += ["-f", ";".join(collector.metrics_format)]
    args += ["-format", collector.file_format or "TEXT"]
    return sidecars.MirrorSidecar(COLLECTOR_CONTAINER, COLLECTOR_IMAGE, mirrors, tuple(args),
                                  file=path if collector.kind == "File" else "",
                                  selector=dict(spec.primary_pod_labels), failed_exit_code=COLLECTOR_FAILED)


def _pod_templates(node: object) -> list[dict[str, Any]]:
    """Every pod template of the job: a mapping under ``template`` whose spec has containers."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        template = node.get("template")
        if isinstance(template, dict) and isinstance((template.get("spec") or {}).get("containers"), list):
            found.append(template)
        for value in node.values():
            found += _pod_templates(value)
    elif isinstance(node, list):
        for item in node:
            found += _pod_templates(item)
    return found


def _first_container(job: Mapping[str, Any]) -> str | None:
    """The first pod template's first container's name (the one Katib reads when no primary is named)."""
    for template in _pod_templates(job):
        containers = template["spec"]["containers"]
        if containers and isinstance(containers[0], dict) and containers[0].get("name"):
            return str(containers[0]["name"])
    return None


def _annotate_pod_templates(job: Mapping[str, Any], wanted: Mapping[str, str]) -> None:
    for template in _pod_templates(job):
        metadata = template.setdefault("metadata", {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **wanted}


def _label_pod_templates(job: Mapping[str, Any], wanted: Mapping[str, str]) -> None:
    """Katib's labels on every pod template of the job."""
    for template in _pod_templates(job):
        metadata = template.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), **wanted}


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
        own = [one for one in pod.containers if one.name != COLLECTOR_CONTAINER]  # not the collector's view
        chosen = pod.container(container) if container else (own[0] if len(own) == 1 else None)
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
