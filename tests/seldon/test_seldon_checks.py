"""SeldonDeployment manifests refused as Seldon's webhook refuses them: one ``error:`` line, exit 2, nothing stored.

A graph deeper than Seldon's installed CRD describes, an implementation Seldon has no server for, traffic that
does not sum to 100, TENSORFLOW_SERVER (not run here), a prepackaged unit without ``modelUri``, a unit with no
container, duplicate predictor names, an unknown apiVersion; and what is accepted but not served here (an
XGBOOST_SERVER, alone or as a unit of a graph) is stored with ``state: Failed`` saying why, plus an info line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.store.resources import ResourceStore


def _sdep(predictors: list[dict[str, Any]], name: str = "iris", api: str = "machinelearning.seldon.io/v1",
          **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "SeldonDeployment", "metadata": {"name": name},
            "spec": {"predictors": predictors, **spec}}


def _sklearn(name: str = "default", traffic: int | None = None, **graph: Any) -> dict[str, Any]:
    predictor: dict[str, Any] = {"name": name, "graph": {"name": "classifier", "implementation": "SKLEARN_SERVER",
                                                          "modelUri": "file:///nowhere", **graph}}
    if traffic is not None:
        predictor["traffic"] = traffic
    return predictor


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"name": f"unit-{levels}", "type": "MODEL"}
    for level in range(levels - 1, 0, -1):
        node = {"name": f"unit-{level}", "type": "TRANSFORMER", "children": [node]}
    return node


BAD = {
    "too-deep": (_sdep([{"name": "p", "graph": _deep(12), "componentSpecs": [{"spec": {"containers": [
        {"name": f"unit-{i}", "image": "x/y:1"} for i in range(1, 13)]}}]}]),
        "spec.predictors[0].graph.children[0].children[0].children[0].children[0].children[0].children[0]"
        ".children[0].children[0].children[0].children[0].children[0]: the graph is more than 11 units deep"),
    "unknown-implementation": (_sdep([_sklearn(implementation="SPARK_SERVER")]),
                               "spec.predictors[0].graph.implementation: 'SPARK_SERVER': No entry in predictors map "
                               "for SPARK_SERVER"),
    "traffic-not-100": (_sdep([_sklearn("a", 60), _sklearn("b", 30)]),
                        "spec.predictors: 'a': Traffic must sum to 100 for multiple predictors (they sum to 90)"),
    "single-traffic": (_sdep([_sklearn("a", 40)]),
                       "spec.predictors: 'a': Traffic must sum be 100 for a single predictor when set (it is 40)"),
    "tensorflow": (_sdep([_sklearn(implementation="TENSORFLOW_SERVER")]),
                   "spec.predictors[0].graph.implementation: TENSORFLOW_SERVER: TensorFlow Serving is not run by "
                   "millpond"),
    "no-model-uri": (_sdep([{"name": "p", "graph": {"name": "c", "implementation": "SKLEARN_SERVER"}}]),
                     "spec.predictors[0].graph: 'c': Predictive unit modelUri required when using standalone servers"),
    "no-container": (_sdep([{"name": "p", "graph": {"name": "c", "type": "MODEL"}}]),
                     "spec.predictors[0].graph: 'c': Can't find container for Predictive Unit"),
    "duplicate-predictor": (_sdep([_sklearn("a", 50), _sklearn("a", 50)]),
                            "spec.predictors[1]: 'a': Duplicate predictor name"),
    "bad-method": (_sdep([_sklearn(parameters=[{"name": "method", "value": "transform", "type": "STRING"}])]),
                   "graph.parameters: method 'transform': one of predict_proba, predict, decision_function"),
    "no-predictors": (_sdep([]), "spec.predictors: Graph contains no predictors"),
    "unknown-field": (_sdep([_sklearn(modelURI="file:///x")]), "modelURI"),
    "api-version": (_sdep([_sklearn()], api="machinelearning.seldon.io/v2"),
                    "SeldonDeployment: apiVersion 'machinelearning.seldon.io/v2' is not supported"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_deployments_are_one_error_line_and_nothing_stored(cli, tmp_path: Path, case: str) -> None:
    manifest, message = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    result = cli("apply", "-f", path)
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert message in lines[0] and "Traceback" not in result.err
    assert ResourceStore().list("SeldonDeployment", None) == []


def test_a_graph_of_several_units_and_an_xgboost_server_are_accepted_not_served(cli, tmp_path: Path) -> None:
    """Seldon's combiner with an XGBOOST_SERVER unit (the status names the unit), and an A/B of an XGBOOST_SERVER
    and a TRITON_SERVER: stored, ``state: Failed`` where the traffic goes to what cannot run, an info line each;
    ``millpond get sdep`` shows them."""
    combiner = {"name": "combined", "componentSpecs": [{"spec": {"containers": [
        {"name": n, "image": "seldonio/metadata-generic-node:1.14.0-dev"} for n in ("combiner", "model-1")
    ]}}], "graph": {"name": "combiner", "type": "COMBINER", "children": [
        {"name": "model-1", "type": "MODEL"},
        {"name": "model-2", "type": "MODEL", "implementation": "XGBOOST_SERVER", "modelUri": "gs://models/xgb"}]}}
    documents = [_sdep([combiner], name="graph"),
                 _sdep([_sklearn("baseline", 100, implementation="XGBOOST_SERVER"),
                        _sklearn("candidate", 0, implementation="TRITON_SERVER")], name="ab")]
    path = tmp_path / "accepted.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["seldondeployment.machinelearning.seldon.io/graph created",
                                       "seldondeployment.machinelearning.seldon.io/ab created"]
    assert "predictor combined: accepted, not served here: unit model-2: XGBOOST_SERVER models need" in result.err
    assert "XGBOOST_SERVER models need Seldon's xgboostserver (xgboost)" in result.err
    shown = json.loads(cli("get", "sdep", "graph", "-o", "json").out)
    assert shown["status"]["state"] == "Failed" and "unit model-2: XGBOOST_SERVER" in shown["status"]["description"]
    assert shown["status"]["replicas"] == 1 and "address" not in shown["status"]
    assert {c["type"]: c["status"] for c in shown["status"]["conditions"]}["Ready"] == "False"
    table = cli("get", "seldondeployments").out.splitlines()
    assert table[0].split() == ["NAME", "AGE"] and [row.split()[0] for row in table[1:]] == ["ab", "graph"]
    assert cli("delete", "sdep", "graph").code == 0 and cli("delete", "sdep", "ab").code == 0
    assert ResourceStore().list("SeldonDeployment", None) == []
