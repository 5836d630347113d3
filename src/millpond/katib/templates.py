"""Katib's trial template: where a trial's manifest comes from, how it is checked, how it is filled in.

An Experiment's ``spec.trialTemplate`` holds the trial's manifest inline (``trialSpec``) or names
a ConfigMap key holding it as YAML (``configMap``: ``configMapName``, ``configMapNamespace``,
``templatePath``). ``trialParameters`` (``name``, ``description``, ``reference``) say what fills
each ``${trialParameters.NAME}`` placeholder anywhere in the manifest's strings: the value the
suggestion assigned to the experiment parameter ``reference``, or, for a reference
``${trialSpec.Name}``, ``Namespace``, ``Kind``, ``APIVersion``, ``Labels[key]`` or
``Annotations[key]``, the trial's name and namespace and the template's own kind, apiVersion,
labels and annotations (Katib's ``manifest/generator.go``).

Katib renders the template as a string and replaces the placeholders in it. millpond does the same
with two deliberate differences: in an inline ``trialSpec`` (whose placeholders are always inside
JSON strings) a value is escaped as JSON, so a quote or backslash in it cannot break the manifest;
and the placeholders are replaced in one pass, so a value that itself looks like a placeholder is
not replaced again. A ConfigMap template is filled as YAML text, exactly as Katib does, so
``replicas: ${trialParameters.workers}`` becomes the number the assignment names.

Validation follows Katib's webhook (``validateTrialTemplate``), the error naming the field.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from millpond.datasets.fields import show
from millpond.errors import UserError
from millpond.katib import conditions

PATH = "spec.trialTemplate"
# Katib's consts: TrialTemplateParamReplaceFormatRegex, TrialTemplateMetaReplaceFormatRegex, ...ParseFormatRegex.
_PLACEHOLDER = re.compile(r"\$\{trialParameters\.(.+?)\}", re.DOTALL)
_META = re.compile(r"\$\{trialSpec\.(.+?)\}", re.DOTALL)
_META_INDEX = re.compile(r"(.+)\[(.+)]", re.DOTALL)
META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Annotations", "Labels")

ReadConfigMap = Callable[[str, str], Mapping[str, str] | None]


@dataclass(frozen=True)
class TrialMeta:
    """What ``${trialSpec.…}`` references read: the trial's name and namespace, the template's own metadata."""

    name: str
    namespace: str
    kind: str
    api_version: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


def trial_meta(trial_spec: Mapping[str, Any], name: str, namespace: str) -> TrialMeta:
    """The TrialMeta of a trial named ``name``: kind, apiVersion, labels and annotations from the template."""
    metadata = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)

    def strings(value: Any) -> dict[str, str]:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}

    return TrialMeta(name, namespace, str(trial_spec.get("kind") or ""), str(trial_spec.get("apiVersion") or ""),
                     strings(metadata.get("labels")), strings(metadata.get("annotations")))


def _template(experiment_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(experiment_spec, Mapping):
        raise UserError("spec: must be an object")
    template = experiment_spec.get("trialTemplate")
    if template is None:
        raise UserError(f"{PATH}: must be specified")
    if not isinstance(template, Mapping):
        raise UserError(f"{PATH}: must be an object, not {show(template)}")
    return template


def _configmap_ref(template: Mapping[str, Any], namespace: str) -> tuple[str, str, str]:
    ref = template.get("configMap")
    if not isinstance(ref, Mapping):
        raise UserError(f"{PATH}.configMap: must be an object, not {show(ref)}")
    cm_namespace = ref.get("configMapNamespace") or namespace
    name, key = ref.get("configMapName"), ref.get("templatePath")
    if not (isinstance(cm_namespace, str) and isinstance(name, str) and name and isinstance(key, str) and key):
        raise UserError(f"{PATH}.configMap: configMapName and templatePath must be specified")
    return cm_namespace, name, key


def trial_template_text(experiment_spec: Mapping[str, Any], namespace: str, read_configmap: ReadConfigMap) -> str:
    """The template as Katib holds it as a string: the ConfigMap's YAML text, or the inline spec as JSON.

    ``read_configmap(namespace, name)`` returns the ConfigMap's data or None when there is none;
    ``namespace`` (the Experiment's) stands for an omitted ``configMapNamespace``.
    """
    template = _template(experiment_spec)
    inline, from_configmap = template.get("trialSpec"), template.get("configMap")
    if inline is None and from_configmap is None:
        raise UserError(f"{PATH}: spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified")
    if inline is not None and from_configmap is not None:
        raise UserError(f"{PATH}: only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap "
                        f"can be specified")
    if inline is not None:
        if not isinstance(inline, Mapping):
            raise UserError(f"{PATH}.trialSpec: must be an object, not {show(inline)}")
        return _dump(inline)
    cm_namespace, cm_name, key = _configmap_ref(template, namespace)
    data = read_configmap(cm_namespace, cm_name)
    if data is None:
        raise UserError(f"{PATH}.configMap: ConfigMap {cm_namespace}/{cm_name} not found")
    text = data.get(key)
    if not isinstance(text, str):
        raise UserError(f"{PATH}.configMap.templatePath: {show(key)} is not a key of ConfigMap "
                        f"{cm_namespace}/{cm_name}")
    return text


def _dump(spec: Mapping[str, Any]) -> str:
    try:
        return json.dumps(spec, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(f"{PATH}.trialSpec: cannot be written as JSON: {exc}") from None


def _load(text: str, where: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{where}: not a YAML manifest: {reason}") from None
    if not isinstance(document, dict):
        raise UserError(f"{where}: not a manifest (a YAML object) but {show(document)}")
    return document


def trial_spec_source(experiment_spec: Mapping[str, Any], namespace: str, read_configmap: ReadConfigMap) -> dict:
    """The trial manifest template, placeholders unreplaced: the inline ``trialSpec`` or the ConfigMap's."""
    template = _template(experiment_spec)
    text = trial_template_text(experiment_spec, namespace, read_configmap)
    if template.get("trialSpec") is not None:
        return copy.deepcopy(dict(template["trialSpec"]))
    return _load(text, f"{PATH}.configMap.templatePath")


def _trial_parameters(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    declared = template.get("trialParameters")
    if declared is None:
        raise UserError(f"{PATH}.trialParameters: must be specified")
    if not isinstance(declared, list):
        raise UserError(f"{PATH}.trialParameters: must be a list, not {show(declared)}")
    for index, parameter in enumerate(declared):
        name = parameter.get("name") if isinstance(parameter, Mapping) else None
        reference = parameter.get("reference") if isinstance(parameter, Mapping) else None
        if not (isinstance(name, str) and name and isinstance(reference, str) and reference) or "{" in name \
                or "}" in name:
            raise UserError(f"{PATH}.trialParameters[{index}]: name and reference must be specified and name must "
                            f"not contain '{{' or '}}'")
    return declared


def is_meta_reference(reference: str) -> bool:
    """Katib's ``isMetaKey``: ``${trialSpec.Name}``, ``${trialSpec.Labels[key]}`` and the like."""
    match = _META.search(reference)
    if match is None:
        return False
    key = match.group(1)
    indexed = _META_INDEX.fullmatch(key) if key not in META_KEYS else None
    return key in META_KEYS or (indexed is not None and indexed.group(1) in META_KEYS)


def _placeholder(name: str) -> str:
    return "${trialParameters." + name + "}"


def _check_conditions(template: Mapping[str, Any], kind: str) -> None:
    success, failure = conditions.default_conditions("", kind)
    for key, default in (("successCondition", success), ("failureCondition", failure)):
        value = template.get(key) or default
        if not value:
            raise UserError(f"{PATH}: successCondition and failureCondition must be specified "
                            f"(Katib has no default for kind {show(kind)})")
        conditions.validate(value, f"{PATH}.{key}")


def validate_template(experiment_spec: Mapping[str, Any], trial_spec: Mapping[str, Any]) -> None:
    """Katib's ``validateTrialTemplate`` over the template ``trial_spec_source`` returned; UserError names the field.

    Beyond Katib: a condition outside the GJSON subset, a ``${trialSpec.Labels[key]}`` whose label the
    template lacks, and an experiment parameter no trial parameter references (Katib accepts these and
    then fails to create every trial) are refused here.
    """
    template = _template(experiment_spec)
    kind = trial_spec.get("kind") if isinstance(trial_spec, Mapping) else None
    kind = kind if isinstance(kind, str) else ""
    container = template.get("primaryContainerName")
    if not (isinstance(container, str) and container) and conditions.default_primary(kind)[0] is None:
        raise UserError(f"{PATH}.primaryContainerName: must be specified")
    _check_conditions(template, kind)
    declared = _trial_parameters(template)
    parameters = experiment_spec.get("parameters") or []
    parameter_names = [p.get("name") for p in parameters if isinstance(p, Mapping)] \
        if isinstance(parameters, list) else []
    text = _dump(trial_spec)
    names: set[str] = set()
    references: set[str] = set()
    for index, parameter in enumerate(declared):
        name, reference = parameter["name"], parameter["reference"]
        where = f"{PATH}.trialParameters[{index}]"
        if name in names:
            raise UserError(f"{where}.name: parameter name {name} can't be duplicated in {PATH}.trialParameters")
        if reference in references:
            raise UserError(f"{where}.reference: parameter reference {reference} can't be duplicated in "
                            f"{PATH}.trialParameters")
        names.add(name)
        references.add(reference)
        if parameter_names and not is_meta_reference(reference) and reference not in parameter_names:
            raise UserError(f"{where}.reference: parameter reference {show(reference)} does not exist in "
                            f"spec.parameters")
        if is_meta_reference(reference):
            _check_meta(reference, trial_spec, f"{where}.reference")
        if json.dumps(_placeholder(name), ensure_ascii=False)[1:-1] not in text:
            raise UserError(f"{where}.name: parameter name {show(name)} in spec.trialParameters not found in "
                            f"{PATH} (no ${{trialParameters.{name}}} in it)")
    unreferenced = [n for n in parameter_names if isinstance(n, str) and n not in references]
    if unreferenced:
        index = parameter_names.index(unreferenced[0])
        raise UserError(f"spec.parameters[{index}].name: {show(unreferenced[0])} is referenced by no "
                        f"{PATH}.trialParameters[].reference (Katib could create no trial)")
    test_values = {json.dumps(name, ensure_ascii=False)[1:-1]: "test-value" for name in names}
    filled = _PLACEHOLDER.sub(lambda m: test_values.get(m.group(1), m.group(0)), text)
    left = _PLACEHOLDER.findall(filled)
    if left:
        raise UserError(f"{PATH}: parameters: {', '.join(_placeholder(n) for n in left[:5])} in {PATH} not found "
                        f"in spec.trialTemplate.trialParameters")
    _check_manifest(json.loads(filled))


def _check_meta(reference: str, trial_spec: Mapping[str, Any], where: str) -> None:
    match = _META.search(reference)
    assert match is not None
    indexed = _META_INDEX.fullmatch(match.group(1))
    if indexed is None or indexed.group(1) not in ("Labels", "Annotations"):
        return
    metadata = trial_spec.get("metadata")
    entries = metadata.get(indexed.group(1).lower()) if isinstance(metadata, Mapping) else None
    if not isinstance(entries, Mapping) or indexed.group(2) not in entries:
        raise UserError(f"{where}: {show(reference)}: the trial template's metadata has no "
                        f"{indexed.group(1)[:-1].lower()} {show(indexed.group(2))}")


def _check_manifest(manifest: Mapping[str, Any]) -> None:
    metadata = manifest.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise UserError(f"{PATH}: metadata must be an object, not {show(metadata)}")
    if isinstance(metadata, Mapping) and (metadata.get("name") or metadata.get("namespace")):
        raise UserError(f"{PATH}: metadata.name and metadata.namespace in spec.trialTemplate must be omitted")
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
        raise UserError(f"{PATH}: APIVersion and Kind in spec.trialTemplate must be specified")


def _values(trial_parameters: Sequence[Mapping[str, Any]], assignments: Mapping[str, str],
            meta: TrialMeta) -> dict[str, str]:
    """Katib's ``applyParameters``: the value of each trial parameter, by its name."""
    values: dict[str, str] = {}
    assigned = 0
    for index, parameter in enumerate(trial_parameters):
        name, reference = parameter.get("name"), parameter.get("reference")
        where = f"{PATH}.trialParameters[{index}].reference"
        if not isinstance(name, str) or not isinstance(reference, str):
            raise UserError(f"{PATH}.trialParameters[{index}]: name and reference must be specified")
        match = _META.search(reference)
        if match is None:
            if reference not in assignments:
                raise UserError(f"{where}: parameter {show(reference)} has no value in the trial's assignments")
            values[name] = str(assignments[reference])
            assigned += 1
            continue
        key, index_key = match.group(1), ""
        indexed = _META_INDEX.fullmatch(key)
        if indexed is not None:
            key, index_key = indexed.group(1), indexed.group(2)
        simple = {"Name": meta.name, "Namespace": meta.namespace, "Kind": meta.kind, "APIVersion": meta.api_version}
        if key in simple:
            values[name] = simple[key]
        elif key in ("Labels", "Annotations"):
            entries = meta.labels if key == "Labels" else meta.annotations
            if index_key not in entries:
                raise UserError(f"{where}: illegal reference of trial metadata: {reference}; "
                                f"failed to fetch {key[:-1]}: {index_key}")
            values[name] = entries[index_key]
        else:
            raise UserError(f"{where}: illegal reference of trial metadata: {reference}")
    if len(assignments) != assigned:
        extra = sorted(set(assignments) - {p.get("reference") for p in trial_parameters})
        raise UserError(f"{PATH}.trialParameters: parameter assignments {', '.join(map(str, extra)) or '?'} "
                        f"are referenced by no trial parameter")
    return values


def render_trial(trial_spec: Mapping[str, Any], trial_parameters: Sequence[Mapping[str, Any]],
                 assignments: Mapping[str, str], meta: TrialMeta, *, template_text: str | None = None) -> dict:
    """The trial's manifest: placeholders filled, ``metadata.name``/``namespace`` set to the trial's.

    ``template_text``: a ConfigMap template's YAML text (``trial_template_text``); when given it is
    filled as text and parsed, as Katib does, instead of ``trial_spec``.
    """
    values = _values(trial_parameters, assignments, meta)
    if template_text is not None:
        filled = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template_text)
        manifest = _load(filled, f"{PATH}.configMap.templatePath (filled for trial {meta.name})")
    else:
        escaped = {json.dumps(name, ensure_ascii=False)[1:-1]: json.dumps(value, ensure_ascii=False)[1:-1]
                   for name, value in values.items()}
        filled = _PLACEHOLDER.sub(lambda m: escaped.get(m.group(1), m.group(0)), _dump(trial_spec))
        manifest = json.loads(filled)
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        metadata = manifest["metadata"] = {}
    metadata["name"], metadata["namespace"] = meta.name, meta.namespace
    return manifest
