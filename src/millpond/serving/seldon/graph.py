"""A SeldonDeployment's predictors read as millpond serves them: one typed record per predictor.

Seldon Core v1 (v1.17.1) runs each predictor's inference ``graph`` behind its executor: a tree of
predictive units (MODEL, TRANSFORMER, OUTPUT_TRANSFORMER, COMBINER, ROUTER), each either a prepackaged
server (``implementation``: SKLEARN_SERVER, XGBOOST_SERVER, MLFLOW_SERVER, TENSORFLOW_SERVER, TRITON_SERVER,
HUGGINGFACE_SERVER, TEMPO_SERVER, reading ``modelUri``) or the container of ``componentSpecs`` named as the
unit. The traffic between predictors is split by their ``traffic`` percentages (a shadow gets a copy).

millpond serves a predictor whose graph is one unit, with the supervisor and model server that serve an
InferenceService: SKLEARN_SERVER by millpond's scikit-learn server answering as Seldon's sklearnserver does
(``method`` parameter, ``predict_proba`` by default), MLFLOW_SERVER where the model is MLflow's sklearn
flavor (``pyfunc``'s ``predict``: the class; another flavor fails to load, naming it), a custom container as
KServe's custom predictor is (its command on this host, or its image where the runtime policy lets it).
Each predictor is turned into the equivalent KServe predictor (``kserve_predictor``) and read by
``serving.spec.predictor_spec``, so resources, env, images and storage URIs mean the same for both kinds.
A graph of more than one unit (or a built-in unit) is walked per request by millpond's executor
(``serving.seldon.executor``, as Seldon's ``predictor_process.go``): the predictor's ``spec`` then runs the
executor (``executor_predictor``: told the predictor in ``ENGINE_PREDICTOR``, as Seldon's operator tells its
executor), and each unit that is no built-in is a :class:`GraphUnit`, served by its own revision
(``unit_revision``) exactly as a one-unit predictor's root is. What cannot run here is accepted, as an
InferenceService is, and :attr:`SeldonPredictor.unservable` says why (its status: ``state: Failed``):
XGBOOST/TRITON/HUGGINGFACE/TEMPO servers (their frameworks are not millpond's), alone or as a unit of a graph
(then named: ``unit NAME: …``).

What Seldon's admission webhook refuses is refused here with one line (``check_predictors``): no
predictors, duplicate predictor names, a unit without a container or an implementation, an unknown
implementation, a prepackaged unit without ``modelUri``, traffic that does not sum to 100, and TENSORFLOW_SERVER
(TensorFlow Serving is not run here, and accepting it would leave a service that can never answer). A graph
deeper than the CRD's schema as installed describes (``graph_children.yaml``: ten levels of children) is
refused too: the API server would prune what lies below.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass, replace
from typing import Any

from millpond.errors import UserError
from millpond.serving.spec import PredictorSpec, predictor_spec

MAX_DEPTH = 11  # the root unit and the ten levels of children Seldon's installed CRD schema spells out
SERVED = "SKLEARN_SERVER"
REFUSED = {"TENSORFLOW_SERVER": "TENSORFLOW_SERVER: TensorFlow Serving is not run by millpond; serve the model "
                                "with a custom container (componentSpecs) or as a KServe InferenceService"}
MLFLOW = "MLFLOW_SERVER"  # served where the model is MLflow's sklearn flavor (``models.files.mlflow_sklearn_file``)
NOT_RUN = {"XGBOOST_SERVER": "Seldon's xgboostserver (xgboost)",
           "TRITON_SERVER": "NVIDIA Triton", "HUGGINGFACE_SERVER": "MLServer's huggingface runtime",
           "TEMPO_SERVER": "Tempo's MLServer runtime"}
# Seldon's own implementations (types.go): built into its executor, not containers
BUILT_IN = ("SIMPLE_MODEL", "SIMPLE_ROUTER", "RANDOM_ABTEST", "AVERAGE_COMBINER")
UNKNOWN = "UNKNOWN_IMPLEMENTATION"
KNOWN_IMPLEMENTATIONS = (SERVED, MLFLOW, *REFUSED, *NOT_RUN, *BUILT_IN, UNKNOWN)
METHODS = ("predict_proba", "predict", "decision_function")  # Seldon's SKLearnServer ``method`` parameter
DEFAULT_METHOD = "predict_proba"
# the prepackaged servers' images (the operator's seldon-config ``predictor_servers``, protocol seldon)
IMAGES = {"SKLEARN_SERVER": "seldonio/sklearnserver:1.17.1", "XGBOOST_SERVER": "seldonio/xgboostserver:1.17.1",
          "MLFLOW_SERVER": "seldonio/mlflowserver:1.17.1"}
SELDON_HTTP_PORT = "PREDICTIVE_UNIT_HTTP_PORT"  # where Seldon's Python wrapper listens (9000 on Kubernetes)
EXECUTOR = "seldon-container-engine"  # the executor's container, as Seldon's operator names it
EXECUTOR_MODULE = "millpond.serving.seldon.executor"


@dataclass(frozen=True)
class GraphUnit:
    """One unit of a graph the executor walks that runs as its own revision (``unit_revision``).

    ``predictor`` the KServe-shaped predictor that serves it, ``spec`` as the supervisor starts it, ``method``
    a SKLEARN/MLFLOW server's method (None for a custom container), ``image`` what ``meta.requestPath`` names.
    """

    name: str
    implementation: str
    predictor: dict[str, Any]
    spec: PredictorSpec
    method: str | None
    image: str


def unit_revision(deployment: str, predictor: str, unit: str) -> str:
    """The revision serving one unit of a walked graph: ``NAME-PREDICTOR-UNIT`` (no traffic of its own)."""
    return f"{deployment}-{predictor}-{unit}"


@dataclass(frozen=True)
class SeldonPredictor:
    """One predictor: its name, traffic share, the root unit, and the KServe-shaped predictor that serves it.

    ``spec`` is what the supervisor starts (``serving.spec.PredictorSpec``); ``method`` the SKLEARN_SERVER's
    method (None for a custom container); ``unit_image`` the ``requestPath`` Seldon's answers name
    (``{unit: image}``); ``unservable`` why it cannot run here (then ``spec.unservable`` says the same).
    """

    name: str
    traffic: int
    shadow: bool
    unit: str
    implementation: str
    units: int
    predictor: dict[str, Any]
    spec: PredictorSpec
    method: str | None
    unit_image: str
    graph: dict[str, Any]
    graph_units: tuple[GraphUnit, ...] = ()  # the units the executor calls; () when the root unit is served alone

    @property
    def unservable(self) -> str | None:
        return self.spec.unservable


def _units(node: dict[str, Any], depth: int, where: str) -> list[dict[str, Any]]:
    """Every unit of the graph, root first; UserError for a graph deeper than ``MAX_DEPTH`` or a bad child."""
    if depth > MAX_DEPTH:
        raise UserError(f"{where}: the graph is more than {MAX_DEPTH} units deep (Seldon's CRD describes the root "
                        "and ten levels of children)")
    if not isinstance(node, dict) or not node.get("name"):
        raise UserError(f"{where}.name: required field is missing")
    found = [node]
    children = node.get("children") or []
    if not isinstance(children, list):
        raise UserError(f"{where}.children: expected a list")
    for index, child in enumerate(children):
        found += _units(child, depth + 1, f"{where}.children[{index}]")
    return found


Found = dict[str, tuple[dict[str, Any], dict[str, Any] | None]]


def _containers(predictor: dict[str, Any]) -> Found:
    """Each container of the predictor's componentSpecs by name, with the componentSpec that holds it."""
    out: Found = {}
    for component in predictor.get("componentSpecs") or []:
        for container in ((component or {}).get("spec") or {}).get("containers") or []:
            out.setdefault(str(container.get("name")), (container, component))
    return out


def _check_unit(unit: dict[str, Any], containers: dict[str, Any], where: str) -> None:
    """Seldon's webhook (``checkPredictiveUnits``) on one unit."""
    implementation = unit.get("implementation") or UNKNOWN
    name = unit["name"]
    if implementation == UNKNOWN:
        if name not in containers:
            raise UserError(f"{where}: {name!r}: Can't find container for Predictive Unit")
        return
    if implementation in REFUSED:
        raise UserError(f"{where}.implementation: {REFUSED[implementation]}")
    if implementation not in KNOWN_IMPLEMENTATIONS:
        raise UserError(f"{where}.implementation: {implementation!r}: No entry in predictors map for "
                        f"{implementation} (Seldon's servers: {', '.join([SERVED, MLFLOW, *REFUSED, *NOT_RUN])})")
    if implementation not in BUILT_IN and not unit.get("modelUri") and implementation != "HUGGINGFACE_SERVER":
        raise UserError(f"{where}: {name!r}: Predictive unit modelUri required when using standalone servers")


def check_predictors(spec: dict[str, Any]) -> None:
    """What Seldon's validating webhook refuses (``ValidateSeldonDeployment``), as one line."""
    predictors = spec.get("predictors") or []
    if not predictors:
        raise UserError("spec.predictors: Graph contains no predictors")
    protocol = spec.get("protocol")
    if protocol not in (None, "", "seldon", "tensorflow", "kfserving", "v2"):
        raise UserError(f"spec.protocol: {protocol!r}: Invalid protocol (seldon, tensorflow, kfserving or v2)")
    seen: set[str] = set()
    for index, predictor in enumerate(predictors):
        where = f"spec.predictors[{index}]"
        name = str(predictor.get("name") or "")
        if not name:
            raise UserError(f"{where}.name: required field is missing")
        if name in seen:
            raise UserError(f"{where}: {name!r}: Duplicate predictor name")
        seen.add(name)
        containers = _containers(predictor)
        units = _units(predictor.get("graph") or {}, 1, f"{where}.graph")
        for unit in units:
            _check_unit(unit, containers, f"{where}.graph" + ("" if unit is units[0] else f" unit {unit['name']}"))
    _check_traffic(predictors)


def _check_traffic(predictors: list[dict[str, Any]]) -> None:
    """Seldon's ``checkTraffic``: the predictors that are no shadow share 100; one shadow at most."""
    shadows = [p for p in predictors if p.get("shadow")]
    if len(shadows) > 1:
        raise UserError(f"spec.predictors: {shadows[1].get('name')!r}: Multiple shadows are not allowed")
    if shadows and len(predictors) == 1:
        raise UserError(f"spec.predictors: {shadows[0].get('name')!r}: Shadow can not exist as only predictor")
    for predictor in predictors:
        traffic = int(predictor.get("traffic") or 0)
        if not 0 <= traffic <= 100:
            raise UserError(f"spec.predictors: {predictor.get('name')!r}: traffic {traffic} must be between 0 and 100")
    total = sum(int(p.get("traffic") or 0) for p in predictors if not p.get("shadow"))
    if len(predictors) - len(shadows) > 1 and total != 100:
        raise UserError(f"spec.predictors: {predictors[0].get('name')!r}: Traffic must sum to 100 for multiple "
                        f"predictors (they sum to {total})")
    if len(predictors) == 1 and 0 < total < 100:
        raise UserError(f"spec.predictors: {predictors[0].get('name')!r}: Traffic must sum be 100 for a single "
                        f"predictor when set (it is {total})")


def _method(unit: dict[str, Any], where: str) -> str:
    """The SKLEARN_SERVER's ``method`` parameter (Seldon's SKLearnServer(method=...)), ``predict_proba`` unless set."""
    for parameter in unit.get("parameters") or []:
        if isinstance(parameter, dict) and parameter.get("name") == "method":
            value = str(parameter.get("value") or "")
            if value not in METHODS:
                raise UserError(f"{where}.parameters: method {value!r}: one of {', '.join(METHODS)}")
            return value
    return DEFAULT_METHOD


def _replicas(spec: dict[str, Any], predictor: dict[str, Any], component: dict[str, Any] | None) -> int:
    """Seldon's order: the componentSpec's replicas, else the predictor's, else the deployment's, else 1."""
    for source in (component or {}, predictor, spec):
        if source.get("replicas") is not None:
            return max(1, int(source["replicas"]))
    return 1


def kserve_predictor(spec: dict[str, Any], predictor: dict[str, Any],
                     unit: dict[str, Any] | None = None) -> tuple[dict[str, Any], str | None, str]:
    """The KServe predictor that serves ``unit`` (the root unless given), its SKLEARN method, and its image.

    A prepackaged unit becomes the shorthand of its framework with ``storageUri: modelUri`` (the container of
    the same name in componentSpecs lends its resources and env, as Seldon merges them); a custom unit
    becomes ``containers: [that container]`` with Seldon's wrapper variables (``PREDICTIVE_UNIT_HTTP_PORT``
    at the port millpond gives it, ``PREDICTIVE_UNIT_ID``) and ``STORAGE_URI`` from ``modelUri``.
    """
    unit = unit if unit is not None else predictor.get("graph") or {}
    name = str(unit.get("name"))
    implementation = str(unit.get("implementation") or UNKNOWN)
    container, component = _containers(predictor).get(name, ({}, None))
    kept = {key: container[key] for key in ("resources", "env") if container.get(key)}
    replicas = _replicas(spec, predictor, component)
    body: dict[str, Any] = {"minReplicas": replicas, "maxReplicas": replicas}
    method = None
    if implementation == UNKNOWN:
        env = [*(container.get("env") or []), {"name": SELDON_HTTP_PORT, "value": "$(PORT)"},
               {"name": "PREDICTIVE_UNIT_ID", "value": name}]
        if unit.get("modelUri"):
            env.append({"name": "STORAGE_URI", "value": str(unit["modelUri"])})
        body["containers"] = [{**container, "name": name, "env": env}]
        image = str(container.get("image") or "")
    else:
        shorthand = {"SKLEARN_SERVER": "sklearn", "XGBOOST_SERVER": "xgboost", "MLFLOW_SERVER": "sklearn",
                     "TRITON_SERVER": "triton"}.get(implementation, "sklearn")
        body[shorthand] = {**({"storageUri": str(unit["modelUri"])} if unit.get("modelUri") else {}), **kept}
        if spec.get("protocol") in ("v2", "kfserving"):
            body[shorthand]["protocolVersion"] = "v2"
        method = _method(unit, "graph") if implementation == SERVED else "predict" if implementation == MLFLOW else None
        image = str(container.get("image") or IMAGES.get(implementation, implementation.lower()))
    return body, method, image


def _unservable(implementation: str) -> str | None:
    if implementation in NOT_RUN:
        return (f"{implementation} models need {NOT_RUN[implementation]}, which millpond does not run; millpond "
                f"serves SKLEARN_SERVER and MLFLOW_SERVER (sklearn flavor) units and custom containers")
    return None


def read_predictors(body: dict[str, Any]) -> list[SeldonPredictor]:
    """Every predictor of a checked SeldonDeployment ``body`` (apiVersion, kind, metadata, spec), as served.

    UserError (one line, led by the field) for what ``predictor_spec`` refuses of the KServe equivalent.
    """
    spec = body.get("spec") or {}
    predictors = spec.get("predictors") or []
    single = len([p for p in predictors if not p.get("shadow")]) == 1
    out = []
    for index, predictor in enumerate(predictors):
        where = f"spec.predictors[{index}]"
        units = _units(predictor.get("graph") or {}, 1, f"{where}.graph")
        root = units[0]
        implementation = str(root.get("implementation") or UNKNOWN)
        traffic = 100 if single and not predictor.get("shadow") else int(predictor.get("traffic") or 0)
        graph_units: tuple[GraphUnit, ...] = ()
        if len(units) == 1 and implementation not in BUILT_IN:
            kserve, method, image = kserve_predictor(spec, predictor)
            served = _served(body, kserve, where)
            why = _unservable(implementation)
        else:  # Seldon's executor walks the graph; each unit that is no built-in runs as its own revision
            graph_units = tuple(_graph_unit(body, predictor, unit, f"{where}.graph unit {unit['name']}")
                                for unit in units if str(unit.get("implementation") or UNKNOWN) not in BUILT_IN)
            kserve = executor_predictor(body, predictor)
            served, method, image = _served(body, kserve, where), None, EXECUTOR
            why = next((f"unit {u.name}: {u.spec.unservable}" for u in graph_units if u.spec.unservable), None)
        if why is not None:
            served = replace(served, unservable=why, failure_reason="InvalidPredictorSpec")
        out.append(SeldonPredictor(str(predictor["name"]), traffic, bool(predictor.get("shadow")), str(root["name"]),
                                   implementation, len(units), kserve, served, method, image,
                                   predictor.get("graph") or {}, graph_units))
    return out


def _served(body: dict[str, Any], kserve: dict[str, Any], where: str) -> PredictorSpec:
    """``kserve`` read as an InferenceService's predictor; UserError led by ``where`` for what it refuses."""
    shaped = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
              "metadata": body.get("metadata") or {}, "spec": {"predictor": kserve}}
    try:
        return predictor_spec(shaped)
    except UserError as exc:
        raise UserError(f"{where} (as served): {exc}") from None


def _graph_unit(body: dict[str, Any], predictor: dict[str, Any], unit: dict[str, Any], where: str) -> GraphUnit:
    implementation = str(unit.get("implementation") or UNKNOWN)
    kserve, method, image = kserve_predictor(body.get("spec") or {}, predictor, unit)
    served = _served(body, kserve, where)
    why = _unservable(implementation)
    if why is not None:
        served = replace(served, unservable=why, failure_reason="InvalidPredictorSpec")
    return GraphUnit(str(unit["name"]), implementation, kserve, served, method, image)


def unit_images(predictor: dict[str, Any]) -> dict[str, str]:
    """Each unit's image, as ``meta.requestPath`` names it ("" for a custom container without one, or a built-in)."""
    containers = _containers(predictor)
    images = {}
    for unit in _units(predictor.get("graph") or {}, 1, "graph"):
        implementation = str(unit.get("implementation") or UNKNOWN)
        container = containers.get(str(unit["name"]), ({}, None))[0]
        images[str(unit["name"])] = str(container.get("image") or IMAGES.get(implementation, ""))
    return images


def executor_predictor(body: dict[str, Any], predictor: dict[str, Any]) -> dict[str, Any]:
    """The predictor that runs Seldon's executor for ``predictor``: millpond's (``serving.seldon.executor``), told
    the predictor as Seldon's operator tells its executor (``ENGINE_PREDICTOR``: the predictor's JSON, base64)."""
    metadata = body.get("metadata") or {}
    replicas = _replicas(body.get("spec") or {}, predictor, None)
    engine = base64.b64encode(json.dumps(predictor, sort_keys=True).encode()).decode()
    env = [{"name": "ENGINE_PREDICTOR", "value": engine},
           {"name": "DEPLOYMENT_NAME", "value": str(metadata.get("name") or "")},
           {"name": "DEPLOYMENT_NAMESPACE", "value": str(metadata.get("namespace") or "default")},
           {"name": "PREDICTOR_ID", "value": str(predictor.get("name") or "")},
           {"name": "ENGINE_SERVER_PORT", "value": "$(PORT)"}]
    return {"minReplicas": replicas, "maxReplicas": replicas,
            "containers": [{"name": EXECUTOR, "command": [sys.executable, "-m", EXECUTOR_MODULE], "env": env}]}


def predictors_key(body: dict[str, Any]) -> str:
    """What changes what runs: the predictors as written (a change restarts them all)."""
    return json.dumps((body.get("spec") or {}).get("predictors") or [], sort_keys=True)
