"""The Jupyter web app's spawner form made into a Notebook (and its new workspace PVC), as the JWA's backend does.

Kubeflow's JWA (``components/crud-web-apps/jupyter/backend``: ``POST /api/namespaces/NS/notebooks``,
``apps/common/form.py``, ``volumes.py``, ``notebook_template.yaml``) fills a Notebook template from the
form's fields, with the defaults of its ``spawner_ui_config.yaml``: ``name``, ``image`` (or
``customImage``), ``imagePullPolicy``, ``cpu``/``cpuLimit``, ``memory``/``memoryLimit`` (a limit left out
is the request times the config's ``limitFactor``), ``gpus`` (``{num, vendor}``: the vendor's key in the
container's limits), ``workspace`` (``{mount, newPvc}`` or ``{mount, existingSource}``, or none) and
``datavols``. The same field names are read here, so a JWA form's body creates the same Notebook.

Where this differs, and why:

- ``limitFactor`` is ``1.0`` (upstream's default config says ``1.2``): the machine's ledger admits a
  notebook by its limits, so a limit above the request would take more of one machine than asked.
- ``gpus.vendor`` may also be ``aliyun.com/gpu-mem`` (``num``: GiB of one GPU's memory) with an optional
  ``gpus.corePercentage`` (``aliyun.com/gpu-core.percentage``): the GPU share millpond supports for jobs.
- Each field is checked here, before anything is created, and a problem is one :class:`FieldError` naming the
  form's field (the JWA lets the API server refuse later): a name that is not a DNS-1123 label, an image that
  is no image reference, resources this machine can never hold (``Ledger.impossible``, what ``apply`` asks),
  a data volume that is not a PVC of the notebook's namespace.
- Data volumes mount existing PVCs only (a Fluid Dataset's PVC is among them); a new PVC is the workspace's.
- No ``/dev/shm`` volume, toleration groups, affinity or PodDefault configurations (none exist here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from millpond.errors import UserError
from millpond.names import label_problem, subdomain_problem
from millpond.notebooks.kinds import GROUP
from millpond.quantities import parse_bytes, parse_quantity
from millpond.scheduling.ledger import Ledger, Request
from millpond.settings import Settings
from millpond.training.pod_template import GPU, GPU_CORE, GPU_MEM, resources

API_VERSION = f"{GROUP}/v1beta1"  # the JWA's template
SERVER_TYPE_ANNOTATION = "notebooks.kubeflow.org/server-type"
CREATOR_ANNOTATION = "notebooks.kubeflow.org/creator"
SERVICE_ACCOUNT = "default-editor"
HOME = "/home/jovyan"
NAME_PLACEHOLDER = "{notebook-name}"
LIMIT_FACTOR = "1.0"
MAX_DATA_VOLUMES = 32
# The images upstream's spawner_ui_config.yaml offers (the image is recorded; JupyterLab runs from millpond's).
IMAGES = (
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:latest",
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-full:latest",
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:latest",
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-tensorflow-full:latest",
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-tensorflow-cuda-full:latest",
)
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
# distribution/reference's grammar (``reference/regexp.go``): [domain[:port]/]path[:tag][@digest], the path's
# components lower case; what kubelet would pull, not merely what a shell would pass on.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
VENDORS = ({"limitsKey": GPU, "uiName": "NVIDIA (whole GPUs)"},
           {"limitsKey": GPU_MEM, "uiName": "GPU share (GiB of one GPU's memory)"})


class FieldError(UserError):
    """A form field's problem: ``field`` is the form's name for it (``cpu``, ``datavols[1]``); ``status`` the HTTP
    status to answer (400; 409 when what the field names already exists)."""

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.status = status


@dataclass(frozen=True)
class Claim:
    """A PVC of the notebook's namespace that the form may mount (``dataset``: the one Fluid makes for a Dataset)."""

    name: str
    dataset: bool = False


@dataclass(frozen=True)
class Spawn:
    """What the form creates: the Notebook, and the workspace's new PVC (None: an existing one, or none)."""

    notebook: dict[str, Any]
    new_claim: dict[str, Any] | None


def spawner_config(settings: Settings) -> dict[str, Any]:
    """The form's defaults in the shape of the JWA's ``GET /api/config`` (``spawnerFormDefaults``), with what
    this machine can hold (``machine``: the form says it beside the fields)."""
    cap = Ledger(settings).capacity
    return {
        "allowCustomImage": True,
        "image": {"value": IMAGES[0], "options": list(IMAGES)},
        "imagePullPolicy": {"value": "IfNotPresent", "options": list(PULL_POLICIES)},
        "cpu": {"value": "0.5", "limitFactor": LIMIT_FACTOR},
        "memory": {"value": "1.0Gi", "limitFactor": LIMIT_FACTOR},
        "gpus": {"value": {"num": "none", "vendor": "", "vendors": list(VENDORS)}},
        "workspaceVolume": {"value": {"mount": HOME, "newPvc": {
            "metadata": {"name": f"{NAME_PLACEHOLDER}-workspace"},
            "spec": {"resources": {"requests": {"storage": "5Gi"}}, "accessModes": ["ReadWriteOnce"]}}}},
        "dataVolumes": {"value": []},
        "machine": {"cpu": cap.cpu_millis / 1000, "memoryBytes": cap.memory_bytes, "gpus": len(cap.gpus),
                    "gpuMemoryBytes": list(cap.gpu_memory)},
    }


def build(namespace: str, body: Any, creator: str, claims: Mapping[str, Claim], settings: Settings) -> Spawn:
    """The Notebook the form asks for (JWA's ``post_notebook``), every field checked first; FieldError otherwise."""
    if not isinstance(body, dict):
        raise FieldError("body", "the form must be a JSON object")
    name = _name(body.get("name"))
    container: dict[str, Any] = {"name": name, "image": _image(body), "imagePullPolicy": _pull_policy(body),
                                 "volumeMounts": [], "env": [], "resources": {"requests": {}, "limits": {}}}
    ledger = Ledger(settings)
    _cpu(body, container["resources"], ledger)
    _memory(body, container["resources"], ledger)
    _gpus(body.get("gpus"), container["resources"]["limits"], ledger)
    pod: dict[str, Any] = {"serviceAccountName": SERVICE_ACCOUNT, "containers": [container], "volumes": [],
                           "tolerations": []}
    mounts: set[str] = set()
    new_claim = _workspace(body.get("workspace"), name, namespace, claims, pod, mounts)
    _data_volumes(body.get("datavols"), namespace, claims, pod, mounts)
    notebook = {"apiVersion": API_VERSION, "kind": "Notebook",
                "metadata": {"name": name, "namespace": namespace, "labels": {"app": name},
                             "annotations": {SERVER_TYPE_ANNOTATION: "jupyter", CREATOR_ANNOTATION: creator}},
                "spec": {"template": {"spec": pod}}}
    return Spawn(notebook, new_claim)


def _text(value: Any, field: str, limit: int = 4096) -> str:
    if not isinstance(value, str):
        raise FieldError(field, "a string is required")
    if len(value) > limit:
        raise FieldError(field, f"must be no more than {limit} characters")
    return value.strip()


def _name(value: Any) -> str:
    name = _text(value if value is not None else "", "name", 253)
    if not name:
        raise FieldError("name", "Required value: the notebook needs a name")
    problem = label_problem(name)
    if problem:
        raise FieldError("name", f"invalid Notebook name {name!r}: {problem} (it names the notebook's StatefulSet "
                                 "and Service)")
    return name


def _image(body: dict[str, Any]) -> str:
    """``customImage`` when the form says so (JWA's ``customImage`` flag), else ``image``: an image reference."""
    custom = body.get("customImage")
    field, value = ("customImage", custom) if isinstance(custom, str) and custom.strip() else ("image",
                                                                                            body.get("image"))
    image = _text(value if value is not None else "", field, 1024)
    if not image:
        raise FieldError(field, "Required value: the notebook needs an image")
    if not IMAGE_REFERENCE.fullmatch(image) or len(image) > 255:
        raise FieldError(field, f"{image!r} is not a valid image reference (such as {IMAGES[0]})")
    return image


def _pull_policy(body: dict[str, Any]) -> str:
    policy = body.get("imagePullPolicy", "IfNotPresent")
    if policy not in PULL_POLICIES:
        raise FieldError("imagePullPolicy",
                         f"Unsupported value: {str(policy)[:64]!r}: one of {', '.join(PULL_POLICIES)}")
    return str(policy)


def _quantity(value: Any, field: str) -> str:
    """A positive Kubernetes quantity as the form sent it (a number or a string)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = repr(value)
    text = _text(value if value is not None else "", field, 64)
    if not text:
        raise FieldError(field, "Required value")
    try:
        quantity = parse_quantity(text, field)
    except UserError as exc:
        raise FieldError(field, str(exc).removeprefix(f"{field} ")) from None
    if quantity.milli_value() <= 0:
        raise FieldError(field, f"{text!r} must be more than 0")
    return text


def _impossible(ledger: Ledger, request: Request, field: str) -> None:
    """``apply``'s refusal (``Ledger.impossible``) of what this one field asks, named by the field."""
    why = ledger.impossible(request, GPU)
    if why:
        raise FieldError(field, f"can never run on this machine: {why}")


def _limited(body: dict[str, Any], key: str, request: str, measure: Any) -> str:
    """The limit of ``key``: the form's ``<key>Limit`` (not below the request), else the request itself (JWA's
    request times ``limitFactor``, which is 1.0 here)."""
    field = f"{key}Limit"
    given = body.get(field)
    if given in (None, ""):
        return request
    limit = _quantity(given, field)
    if measure(limit) < measure(request):
        raise FieldError(field, f"the {key} limit must not be less than the request ({request})")
    return limit


def _cpu(body: dict[str, Any], spec: dict[str, Any], ledger: Ledger) -> None:
    cpu = _quantity(body.get("cpu"), "cpu")
    limit = _limited(body, "cpu", cpu, lambda text: parse_quantity(text).milli_value())
    spec["requests"]["cpu"], spec["limits"]["cpu"] = cpu, limit
    _impossible(ledger, resources({"limits": {"cpu": limit}}, ["cpu"]), "cpu")


def _memory(body: dict[str, Any], spec: dict[str, Any], ledger: Ledger) -> None:
    memory = _quantity(body.get("memory"), "memory")
    limit = _limited(body, "memory", memory, lambda text: parse_bytes(text, "memory"))
    spec["requests"]["memory"], spec["limits"]["memory"] = memory, limit
    _impossible(ledger, resources({"limits": {"memory": limit}}, ["memory"]), "memory")


def _gpus(value: Any, limits: dict[str, Any], ledger: Ledger) -> None:
    """JWA's ``gpus: {num, vendor}`` (``num: "none"``: no GPU); a share's ``corePercentage`` beside it."""
    if value is None:
        return
    if not isinstance(value, dict) or "num" not in value:
        raise FieldError("gpus", "must be an object with a 'num' field ('none', or a count)")
    if value["num"] in ("none", "", 0, "0"):
        return
    vendor = value.get("vendor")
    if vendor not in (GPU, GPU_MEM):
        raise FieldError("gpus", f"vendor {str(vendor)[:64]!r} is not one of {GPU} (whole GPUs) or {GPU_MEM} "
                                 "(a share of one GPU's memory, in GiB)")
    asked = {vendor: _quantity(value["num"], "gpus")}
    core = value.get("corePercentage")
    if vendor == GPU_MEM and core not in (None, ""):
        asked[GPU_CORE] = _quantity(core, "gpus")
    try:
        request = resources({"limits": asked}, ["gpus"])
    except UserError as exc:
        raise FieldError("gpus", str(exc).removeprefix("gpus.")) from None
    _impossible(ledger, request, "gpus")
    limits.update(asked)


def _mount(value: Any, field: str, mounts: set[str]) -> str:
    path = _text(value if value is not None else "", f"{field}.mount", 1024)
    target = PurePosixPath(path)
    if not target.is_absolute() or str(target) == "/" or ".." in target.parts or str(target) in mounts:
        raise FieldError(field, f"mount {path!r} must be an absolute path other than /, without '..', mounted once")
    mounts.add(str(target))
    return str(target)


def _claim_name(source: Any, field: str, namespace: str, claims: Mapping[str, Claim]) -> str:
    """``existingSource.persistentVolumeClaim.claimName``: a PVC of ``namespace`` that exists."""
    pvc = source.get("persistentVolumeClaim") if isinstance(source, dict) else None
    claim = pvc.get("claimName") if isinstance(pvc, dict) else None
    if not isinstance(claim, str) or not claim:
        raise FieldError(field, "existingSource.persistentVolumeClaim.claimName: Required value (only PVCs mount here)")
    other = pvc.get("namespace") if isinstance(pvc, dict) else None
    if "/" in claim or (other not in (None, "", namespace)):
        owner = str(other or claim.split("/", 1)[0])[:64]
        raise FieldError(field, f"{claim[:253]!r} is a PVC of another namespace ({owner!r}): a notebook of "
                                f"{namespace} mounts PVCs of {namespace} only")
    problem = subdomain_problem(claim)
    if problem:
        raise FieldError(field, f"invalid PVC name {claim[:253]!r}: {problem}")
    if claim not in claims:
        raise FieldError(field, f"no PVC {claim!r} in namespace {namespace} (nor a Fluid Dataset of that name)", 404)
    return claim


def _add_volume(pod: dict[str, Any], claim: str, mount: str) -> None:
    """The pod's volume of ``claim`` (named after it, as the JWA does) and the container's mount of it."""
    pod["volumes"].append({"name": claim, "persistentVolumeClaim": {"claimName": claim}})
    pod["containers"][0]["volumeMounts"].append({"name": claim, "mountPath": mount})


def _workspace(value: Any, name: str, namespace: str, claims: Mapping[str, Claim], pod: dict[str, Any],
               mounts: set[str]) -> dict[str, Any] | None:
    """JWA's ``workspace``: ``{mount, newPvc}`` (its name's ``{notebook-name}`` filled in), ``{mount,
    existingSource}``, or none (null or {})."""
    if value in (None, {}):
        return None
    if not isinstance(value, dict) or ("newPvc" in value) == ("existingSource" in value):
        raise FieldError("workspace", "must have either newPvc or existingSource (or be null: no workspace volume)")
    mount = _mount(value.get("mount", HOME), "workspace", mounts)
    if "existingSource" in value:
        _add_volume(pod, _claim_name(value["existingSource"], "workspace", namespace, claims), mount)
        return None
    new = value["newPvc"]
    metadata = new.get("metadata") if isinstance(new, dict) else None
    spec = new.get("spec", {}) if isinstance(new, dict) else None
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        raise FieldError("workspace", "newPvc must have metadata and spec objects")
    if metadata.get("namespace") not in (None, namespace):
        raise FieldError("workspace", "newPvc: the PVC should not specify the namespace")
    claim = _text(metadata.get("name") or f"{NAME_PLACEHOLDER}-workspace", "workspace", 253).replace(
        NAME_PLACEHOLDER, name)
    problem = subdomain_problem(claim)
    if problem:
        raise FieldError("workspace", f"invalid PVC name {claim!r}: {problem}")
    if claim in claims:
        raise FieldError("workspace", f"PVC {claim!r} already exists in {namespace}: choose it as an existing "
                                      "volume, or name a new one", 409)
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}, **spec}
    _add_volume(pod, claim, mount)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace}, "spec": spec}


def _data_volumes(value: Any, namespace: str, claims: Mapping[str, Claim], pod: dict[str, Any],
                  mounts: set[str]) -> None:
    if value in (None, []):
        return
    if not isinstance(value, list):
        raise FieldError("datavols", "must be a list of volumes")
    if len(value) > MAX_DATA_VOLUMES:
        raise FieldError("datavols", f"at most {MAX_DATA_VOLUMES} data volumes")
    taken = {volume["name"] for volume in pod["volumes"]}
    for index, volume in enumerate(value):
        field = f"datavols[{index}]"
        if not isinstance(volume, dict) or "existingSource" not in volume:
            raise FieldError(field, "must be {mount, existingSource: {persistentVolumeClaim: {claimName}}}")
        claim = _claim_name(volume["existingSource"], field, namespace, claims)
        if claim in taken:
            raise FieldError(field, f"PVC {claim!r} is mounted already")
        taken.add(claim)
        _add_volume(pod, claim, _mount(volume.get("mount"), field, mounts))
