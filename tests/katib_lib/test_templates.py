"""Katib's trial templates: every corpus Experiment's template renders into a valid object of its kind."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from millpond.datasets.schema_check import check_schema_file
from millpond.errors import UserError
from millpond.katib.templates import (
    TrialMeta,
    render_trial,
    trial_meta,
    trial_spec_source,
    trial_template_text,
    validate_template,
)
from millpond.training import manifests as training_manifests
from millpond.training.batch import manifest as batch_manifest
from tests.katib_lib.katib_lib_support import CORPUS, at, corpus_experiments

REFERENCE = CORPUS.parents[1] / "reference" / "katib" / "trial-templates.yaml"

# A ConfigMap of our own for the corpus' trial-configmap-source Experiment (Katib's install provides one
# named trial-templates in kubeflow; its defaultTrialTemplate.yaml declares other parameters).
CONFIGMAP_TEMPLATE = """\
apiVersion: batch/v1
kind: Job
spec:
  parallelism: ${trialParameters.numberLayers}
  template:
    spec:
      containers:
        - name: training-container
          image: docker.io/library/python:3.11
          command:
            - "python3"
            - "-c"
            - "print('lr', '${trialParameters.learningRate}', '${trialParameters.optimizer}')"
      restartPolicy: Never
"""


def configmaps(namespace: str, name: str) -> dict[str, str] | None:
    if (namespace, name) == ("kubeflow", "trial-templates"):
        return {"defaultTrialTemplate.yaml": CONFIGMAP_TEMPLATE}
    return None


def sample(parameter: dict[str, Any]) -> str:
    space = parameter.get("feasibleSpace") or {}
    if parameter.get("parameterType") in ("categorical", "discrete"):
        return str(space["list"][-1])
    return str(space.get("max") or space.get("min"))


def assignments_for(spec: dict[str, Any]) -> dict[str, str]:
    if spec.get("parameters"):
        return {parameter["name"]: sample(parameter) for parameter in spec["parameters"]}
    # NAS Experiments (refused by millpond's webhook, still a template): their references are Suggestion outputs
    return {p["reference"]: '{"num_epochs": "2"}' for p in spec["trialTemplate"]["trialParameters"]
            if not p["reference"].startswith("${trialSpec.")}


def check_kind(manifest: dict[str, Any]) -> None:
    """The rendered trial passes millpond's own checks for its kind (where millpond has the kind)."""
    kind = manifest["kind"]
    if kind == "Job":
        batch_manifest.check_document(copy.deepcopy(manifest), "trial", 1, check_schema_file)
    elif kind in ("PyTorchJob", "TFJob", "XGBoostJob", "MPIJob"):
        training_manifests.check_document(copy.deepcopy(manifest), "trial", 1, lambda *_: None)
    else:  # an Argo Workflow: millpond has no such kind; its shape is Argo's
        assert manifest["apiVersion"] == "argoproj.io/v1alpha1" and manifest["spec"]["templates"]


EXPERIMENTS = corpus_experiments()
REFUSED_BY_KIND = {"katib__examples_v1beta1_fpga_xgboost-example.yaml": "xilinx/aws-vu9p-f1 cannot exist on this"}


@pytest.mark.parametrize(("name", "experiment"), EXPERIMENTS, ids=[name for name, _ in EXPERIMENTS])
def test_every_corpus_template_renders_a_valid_object_of_its_kind(name: str, experiment: dict[str, Any]) -> None:
    spec = experiment["spec"]
    namespace = experiment["metadata"].get("namespace", "default")
    trial_spec = trial_spec_source(spec, namespace, configmaps)
    validate_template(spec, trial_spec)
    trial_name = f"{experiment['metadata']['name']}-abcd1234"
    meta = trial_meta(trial_spec, trial_name, namespace)
    assignments = assignments_for(spec)
    text = trial_template_text(spec, namespace, configmaps) if "configMap" in spec["trialTemplate"] else None
    manifest = render_trial(trial_spec, spec["trialTemplate"]["trialParameters"], assignments, meta,
                            template_text=text)
    assert manifest["metadata"]["name"] == trial_name and manifest["metadata"]["namespace"] == namespace
    assert manifest["kind"] == trial_spec["kind"] and manifest["apiVersion"] == trial_spec["apiVersion"]
    rendered = json.dumps(manifest)
    assert "${trialParameters." not in rendered
    for value in assignments.values():
        assert json.dumps(value)[1:-1] in rendered
    for parameter in spec["trialTemplate"]["trialParameters"]:
        if parameter["reference"] == "${trialSpec.Name}":
            assert trial_name in rendered
    if name in REFUSED_BY_KIND:  # the template renders; the trial's kind refuses what it asks for (EXPECTED.tsv)
        with pytest.raises(UserError, match=REFUSED_BY_KIND[name]):
            check_kind(manifest)
    else:
        check_kind(manifest)


def test_a_configmap_template_is_filled_as_yaml_so_numbers_stay_numbers() -> None:
    experiments = dict(EXPERIMENTS)
    name = "katib__examples_v1beta1_trial-template_trial-configmap-source.yaml"
    if name not in experiments:
        pytest.skip("the shared conformance corpus is not beside this checkout")
    spec = experiments[name]["spec"]
    trial_spec = trial_spec_source(spec, "kubeflow", configmaps)
    text = trial_template_text(spec, "kubeflow", configmaps)
    manifest = render_trial(trial_spec, spec["trialTemplate"]["trialParameters"],
                            {"lr": "0.02", "num-layers": "3", "optimizer": "adam"},
                            trial_meta(trial_spec, "t-1", "kubeflow"), template_text=text)
    assert manifest["spec"]["parallelism"] == 3  # Katib fills the YAML text: an int, as the Job needs
    assert "'0.02', 'adam'" in manifest["spec"]["template"]["spec"]["containers"][0]["command"][2]


def test_katibs_own_default_configmap_template_lacks_the_examples_parameters() -> None:
    """With the ConfigMap Katib installs, the corpus' configMap example is refused, naming the parameter."""
    experiments = dict(EXPERIMENTS)
    name = "katib__examples_v1beta1_trial-template_trial-configmap-source.yaml"
    if name not in experiments or not REFERENCE.exists():
        pytest.skip("the shared conformance corpus is not beside this checkout")
    katib_configmap = yaml.safe_load(REFERENCE.read_text())
    spec = experiments[name]["spec"]
    trial_spec = trial_spec_source(spec, "kubeflow", lambda namespace, cm: katib_configmap["data"])
    with at("spec.trialTemplate.trialParameters[1].name"):
        validate_template(spec, trial_spec)


def job_experiment() -> dict[str, Any]:
    return {
        "parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "1"}}],
        "trialTemplate": {
            "primaryContainerName": "main",
            "trialParameters": [{"name": "learningRate", "reference": "lr"},
                                {"name": "trial", "reference": "${trialSpec.Name}"}],
            "trialSpec": {"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                              {"name": "main", "image": "python:3.11",
                               "args": ["--lr=${trialParameters.learningRate}", "${trialParameters.trial}"]}]}}}},
        },
    }


def test_values_with_quotes_and_placeholders_are_substituted_as_text_once() -> None:
    spec = job_experiment()
    trial_spec = trial_spec_source(spec, "ns", configmaps)
    validate_template(spec, trial_spec)
    manifest = render_trial(trial_spec, spec["trialTemplate"]["trialParameters"],
                            {"lr": 'a"b\\c ${trialParameters.trial}'}, trial_meta(trial_spec, "t", "ns"))
    args = manifest["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ['--lr=a"b\\c ${trialParameters.trial}', "t"]
    assert trial_spec["spec"]["template"]["spec"]["containers"][0]["args"][0] == "--lr=${trialParameters.learningRate}"


@pytest.mark.parametrize("reference", ["${trialSpec.Namespace}", "${trialSpec.Kind}", "${trialSpec.APIVersion}",
                                       "${trialSpec.Labels[team]}", "${trialSpec.Annotations[note]}"])
def test_meta_references(reference: str) -> None:
    spec = job_experiment()
    spec["trialTemplate"]["trialParameters"][1]["reference"] = reference
    trial_spec = trial_spec_source(spec, "ns", configmaps)
    validate_template(spec, trial_spec)
    manifest = render_trial(trial_spec, spec["trialTemplate"]["trialParameters"], {"lr": "0.5"},
                            trial_meta(trial_spec, "t", "ns"))
    expected = {"${trialSpec.Namespace}": "ns", "${trialSpec.Kind}": "Job", "${trialSpec.APIVersion}": "batch/v1",
                "${trialSpec.Labels[team]}": "a", "${trialSpec.Annotations[note]}": "x"}[reference]
    assert manifest["spec"]["template"]["spec"]["containers"][0]["args"][1] == expected


def edited(path: list[Any], value: Any) -> dict[str, Any]:
    spec = job_experiment()
    node: Any = spec
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return spec


T = "spec.trialTemplate"
CONTAINERS = ["trialTemplate", "trialSpec", "spec", "template", "spec", "containers", 0]


@pytest.mark.parametrize(("spec", "field"), [
    (edited(["trialTemplate"], KeyError), T),
    (edited(["trialTemplate", "primaryContainerName"], KeyError), f"{T}.primaryContainerName"),
    (edited(["trialTemplate", "trialParameters"], KeyError), f"{T}.trialParameters"),
    (edited(["trialTemplate", "trialParameters", 0, "reference"], ""), f"{T}.trialParameters[0]"),
    (edited(["trialTemplate", "trialParameters", 0, "name"], "a}b"), f"{T}.trialParameters[0]"),
    (edited(["trialTemplate", "trialParameters", 1, "name"], "learningRate"), f"{T}.trialParameters[1].name"),
    (edited(["trialTemplate", "trialParameters", 1, "reference"], "lr"), f"{T}.trialParameters[1].reference"),
    (edited(["trialTemplate", "trialParameters", 0, "reference"], "momentum"), f"{T}.trialParameters[0].reference"),
    (edited(["trialTemplate", "trialParameters", 1, "reference"], "${trialSpec.Labels[none]}"),
     f"{T}.trialParameters[1].reference"),
    (edited(["trialTemplate", "trialParameters", 1, "reference"], "${trialSpec.Owner}"),
     f"{T}.trialParameters[1].reference"),
    (edited([*CONTAINERS, "args"], ["--lr=${trialParameters.learningRate}"]), f"{T}.trialParameters[1].name"),
    (edited([*CONTAINERS, "args"], ["${trialParameters.learningRate}", "${trialParameters.trial}",
                                    "${trialParameters.batch}"]), T),
    (edited(["trialTemplate", "trialSpec", "metadata", "name"], "fixed"), T),
    (edited(["trialTemplate", "trialSpec", "kind"], KeyError), T),
    (edited(["trialTemplate", "trialSpec", "kind"], "Workflow"), T),  # no default conditions for it
    (edited(["trialTemplate", "successCondition"], "status.conditions.#(type==\"Complete\")#|@reverse"),
     f"{T}.successCondition"),
    (edited(["trialTemplate", "configMap"], {"configMapName": "x", "templatePath": "t"}), T),
    (edited(["parameters", 0, "name"], "lr2"), f"{T}.trialParameters[0].reference"),
])
def test_bad_templates_name_their_field(spec: dict[str, Any], field: str) -> None:
    with at(field):
        validate_template(spec, trial_spec_source(spec, "ns", configmaps))


def test_an_experiment_parameter_no_trial_parameter_uses_is_refused() -> None:
    spec = job_experiment()
    spec["parameters"].append({"name": "momentum", "parameterType": "double",
                               "feasibleSpace": {"min": "0.1", "max": "1"}})
    with at("spec.parameters[1].name"):
        validate_template(spec, trial_spec_source(spec, "ns", configmaps))


@pytest.mark.parametrize(("configmap", "field"), [
    ({"configMapName": "other", "configMapNamespace": "kubeflow", "templatePath": "x"}, f"{T}.configMap"),
    ({"configMapName": "trial-templates", "configMapNamespace": "kubeflow", "templatePath": "missing.yaml"},
     f"{T}.configMap.templatePath"),
    ({"configMapName": "trial-templates"}, f"{T}.configMap"),
    ("trial-templates", f"{T}.configMap"),
])
def test_bad_configmap_sources_name_their_field(configmap: Any, field: str) -> None:
    spec = job_experiment()
    del spec["trialTemplate"]["trialSpec"]
    spec["trialTemplate"]["configMap"] = configmap
    with at(field):
        trial_spec_source(spec, "ns", configmaps)


def test_a_configmap_template_that_is_not_yaml_names_the_path() -> None:
    spec = job_experiment()
    del spec["trialTemplate"]["trialSpec"]
    spec["trialTemplate"]["configMap"] = {"configMapName": "c", "templatePath": "t.yaml"}
    with at(f"{T}.configMap.templatePath"):
        trial_spec_source(spec, "ns", lambda namespace, name: {"t.yaml": "kind: [Job"})
    # configMapNamespace omitted: the Experiment's namespace is read
    asked: list[tuple[str, str]] = []
    trial_spec_source(spec, "team-a", lambda namespace, name: asked.append((namespace, name)) or {"t.yaml": "a: 1"})
    assert asked == [("team-a", "c")]


def test_render_refuses_missing_and_extra_assignments() -> None:
    spec = job_experiment()
    trial_spec = trial_spec_source(spec, "ns", configmaps)
    parameters = spec["trialTemplate"]["trialParameters"]
    meta = TrialMeta("t", "ns", "Job", "batch/v1")
    with at(f"{T}.trialParameters[0].reference"):
        render_trial(trial_spec, parameters, {}, meta)
    with at(f"{T}.trialParameters"):
        render_trial(trial_spec, parameters, {"lr": "1", "momentum": "2"}, meta)
    broken = copy.deepcopy(parameters)
    broken[1]["reference"] = "${trialSpec.Labels[team]}"
    with at(f"{T}.trialParameters[1].reference"):
        render_trial(trial_spec, broken, {"lr": "1"}, meta)  # this meta has no labels


