"""The KFP API in multi-user mode, as KFP's API server does it: every object in a namespace, every call authorized.

KFP's backend (``backend/src/apiserver/server/*_server.go``: ``canAccessRun``, ``canAccessExperiment``,
``canAccessJob``, ``canAccessPipeline``; ``resource_manager.IsAuthorized``) asks a SubjectAccessReview for
the verb, group ``pipelines.kubeflow.org``, the resource and the namespace the object belongs to. Here the
same attributes go to the server's one :class:`~millpond.access.authorizer.Authorizer` through
``callers.require``. The namespaces:

- an experiment's is its own; a run's is recorded on it (its experiment's; KFP's ``run.Namespace``, with
  the experiment's as the fallback for an older row); a recurring run's is its own, else its experiment's;
- a list call names one (``?namespace=``), or, for runs and recurring runs, an experiment whose namespace it
  takes; with neither, KFP answers 400 (``A run cannot have an empty namespace in multi-user mode``);
- a pipeline's is its own, or ``""`` for a shared pipeline: every user may get and list those, and writing
  one is authorized in KFP's own namespace (``common.GetPodNamespace``: here ``kubeflow``), so only who may
  edit pipelines there (an administrator) may create, change or delete shared pipelines.

In single-user mode nothing here refuses anything and every namespace is ``""``, as KFP's
``ReplaceNamespace`` makes them: the API behaves exactly as before. A refusal is a 403 worded as KFP's
(``Failed to access run ID. Check if you have access to namespace NS: <reason>``), and nothing is changed:
each route authorizes before it writes.
"""

from __future__ import annotations

from fastapi import Request

from millpond.access import kfp
from millpond.access.attributes import Attributes
from millpond.errors import ForbiddenError
from millpond.server.callers import authorizer_of, require
from millpond.server.errors import ApiError
from millpond.store.models import Experiment, Pipeline, Run
from millpond.store.recurring import RecurringRunRecord
from millpond.store.runs import RunStore

KFP_NAMESPACE = "kubeflow"  # where KFP's own pods run (POD_NAMESPACE): shared pipelines are authorized there


def multi_user(request: Request) -> bool:
    """Whether the server runs in multi-user mode (``millpond server --multi-user``)."""
    return authorizer_of(request).multi_user


def authorize(request: Request, verb: str, resource: str, namespace: str, name: str = "", *, failure: str) -> None:
    """Nothing when the caller may ``verb`` the ``resource`` named ``name`` in ``namespace``; a 403 saying
    ``failure`` and why otherwise. Single-user mode: nothing is asked."""
    if not multi_user(request):
        return
    try:
        require(request, Attributes(verb, namespace, kfp.GROUP, resource, name=name))
    except ForbiddenError as exc:
        raise ForbiddenError(f"{failure}: {exc}") from None


def required_namespace(request: Request, namespace: str | None, what: str) -> str:
    """The namespace a create or list names; in multi-user mode one must be named (KFP's 400 otherwise), in
    single-user mode it is always ``""`` (KFP's ``ReplaceNamespace``)."""
    if not multi_user(request):
        return ""
    if not namespace or namespace == "-":
        raise ApiError(400, f"{what} cannot have an empty namespace in multi-user mode")
    return namespace


# --- experiments ---------------------------------------------------------------------------------

def check_experiment(request: Request, experiment: Experiment, verb: str) -> None:
    """``canAccessExperiment``: the caller may ``verb`` this experiment (in its namespace)."""
    if multi_user(request) and not experiment.namespace:
        raise ApiError(400, "An experiment cannot have an empty namespace in multi-user mode")
    authorize(request, verb, kfp.EXPERIMENTS, experiment.namespace, experiment.name,
              failure=f"Failed to access experiment {experiment.id}. "
                      f"Check if you have access to namespace {experiment.namespace}")


# --- runs ----------------------------------------------------------------------------------------

def namespace_of_run(store: RunStore, run: Run) -> str:
    """The namespace a run belongs to for the API: recorded on it, else its experiment's (KFP's fallback)."""
    if run.namespace:
        return run.namespace
    experiment = store.get_experiment(run.experiment_id)
    return experiment.namespace if experiment is not None else ""


def check_run(request: Request, store: RunStore, run: Run, verb: str) -> None:
    """``canAccessRun``: the caller may ``verb`` this run (get, terminate, retry, archive, unarchive, delete,
    readArtifact) in its namespace."""
    if not multi_user(request):
        return
    namespace = namespace_of_run(store, run)
    if not namespace:
        raise ApiError(400, "A run cannot have an empty namespace in multi-user mode")
    authorize(request, verb, kfp.RUNS, namespace, run.name,
              failure=f"Failed to access run {run.id}. Check if you have access to namespace {namespace}")


# --- recurring runs (KFP's jobs) ------------------------------------------------------------------

def check_job(request: Request, store: RunStore, record: RecurringRunRecord, verb: str) -> None:
    """``canAccessJob``: the caller may ``verb`` this recurring run (get, enable, disable, delete) in its
    namespace: its own, else its experiment's (KFP's fallback)."""
    if not multi_user(request):
        return
    namespace = record.namespace
    if not namespace and record.experiment_id:
        found = store.get_experiment(record.experiment_id)
        namespace = found.namespace if found is not None else ""
    if not namespace:
        raise ApiError(400, "Recurring run cannot have an empty namespace in multi-user mode")
    authorize(request, verb, kfp.JOBS, namespace, record.name,
              failure=f"Failed to access recurring run {record.id}. Check if you have access to namespace {namespace}")


# --- lists and creates of runs and recurring runs ---------------------------------------------------

_NOUNS = {kfp.RUNS: "run", kfp.JOBS: "recurring run"}  # what KFP's messages call a resource's objects


def list_scope(request: Request, store: RunStore, namespace: str | None, experiment_id: str | None,
               resource: str) -> str | None:
    """The namespace a list of runs (``resource`` runs) or recurring runs (jobs) is limited to, authorized
    (``list``): the one asked, else the experiment's; both given must agree. None (all) in single-user mode."""
    if not multi_user(request):
        return None
    noun = _NOUNS[resource]
    if experiment_id:
        experiment = store.find_experiment(experiment_id)
        if namespace and experiment.namespace and namespace != experiment.namespace:
            raise ApiError(400, f"Failed to list {noun}s due to namespace mismatch: experiment {experiment_id} "
                                f"belongs to namespace '{experiment.namespace}' (claimed a different namespace "
                                f"'{namespace}')")
        namespace = experiment.namespace or namespace
    if not namespace:
        raise ApiError(400, f"A {noun} cannot have an empty namespace in multi-user mode")
    authorize(request, kfp.LIST, resource, namespace,
              failure=f"Failed to list {noun}s due to authorization error. "
                      f"Check if you have permission to access namespace {namespace}")
    return namespace


def create_scope(request: Request, store: RunStore, experiment_id: str | None, namespace: str | None,
                 what: str) -> str:
    """KFP's ``GetValidExperimentNamespacePair``: the namespace a new run or recurring run goes to, its
    experiment's. Multi-user mode needs the experiment (``kfp.Client`` finds or makes the namespace's
    ``Default`` one itself); a namespace named beside it must be the experiment's."""
    if not multi_user(request):
        return ""
    if not experiment_id:
        raise ApiError(400, f"Failed to create {what} due to invalid experimentId and namespace combination: "
                            "Experiment id can not be empty in multi-user mode")
    experiment = store.find_experiment(experiment_id)
    if namespace and namespace != experiment.namespace:
        raise ApiError(400, f"Failed to create {what} due to invalid experimentId and namespace combination: "
                            f"Experiment {experiment_id} belongs to namespace '{experiment.namespace}' "
                            f"instead of '{namespace}'")
    if not experiment.namespace:
        raise ApiError(400, f"{what[0].upper()}{what[1:]} cannot have an empty namespace in multi-user mode")
    return experiment.namespace


# --- pipelines -----------------------------------------------------------------------------------

def check_pipeline(request: Request, namespace: str, verb: str, pipeline: Pipeline | None = None,
                   name: str = "") -> None:
    """``canAccessPipeline``: reading a shared pipeline (namespace "") is every user's; writing one is
    authorized in KFP's namespace; a namespaced pipeline is authorized in its own."""
    if not multi_user(request):
        return
    what = f"pipeline {pipeline.id}" if pipeline is not None else f"pipeline {name}".strip()
    name = pipeline.name if pipeline is not None else name
    if not namespace:
        if verb in (kfp.GET, kfp.LIST):
            return
        authorize(request, verb, kfp.PIPELINES, KFP_NAMESPACE, name,
                  failure=f"Failed to access shared {what}. Check if you have permission to {verb} shared pipelines")
        return
    authorize(request, verb, kfp.PIPELINES, namespace, name,
              failure=f"Failed to access {what}. Check if you have access to namespace {namespace}")

