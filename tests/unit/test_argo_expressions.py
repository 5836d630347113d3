"""Argo's ``{{...}}`` tags and ``when`` conditions, on the expressions the kfp-v1 corpus really writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millpond.errors import TaskFailure, UserError
from millpond.pipelines.argo import templating, when
from millpond.pipelines.argo.reader import load_workflow

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/kfp-v1")


# ---- tags -----------------------------------------------------------------------------------------

VALUES = {
    "inputs.parameters.size": "1Gi",
    "inputs.parameters.create-pvc-name": "run-1-my-pvc",
    "tasks.flip-coin.outputs.parameters.flip-coin-output": "heads",
    "workflow.parameters.fname1": "Alice",
    "workflow.name": "volumeop-basic-x7k2p",
    "workflow.uid": "0b3f",
    "pod.name": "volumeop-basic-x7k2p-123",
}


@pytest.mark.parametrize(("text", "expected"), [
    ("{{workflow.name}}-my-pvc", "volumeop-basic-x7k2p-my-pvc"),
    ("artifact_data/{{workflow.uid}}_{{pod.name}}/processor-Output-1", "artifact_data/0b3f_volumeop-basic-x7k2p-123/"
                                                                       "processor-Output-1"),
    ("My name is {{workflow.parameters.fname1}}", "My name is Alice"),
    ("{{ inputs.parameters.size }}", "1Gi"),  # Argo trims the spaces inside the braces
    ('"{{tasks.flip-coin.outputs.parameters.flip-coin-output}}" == "heads"', '"heads" == "heads"'),
    ("print(f'{{x}}')", "print(f'{{x}}')"),  # not an Argo prefix: a Python f-string's braces stay
    ("{{item}}", "{{item}}"),  # outside a loop, as in Argo, an item tag stays literal
])
def test_substitute(text: str, expected: str) -> None:
    assert templating.substitute(text, VALUES) == expected


def test_an_unresolved_argo_tag_fails_the_task() -> None:
    with pytest.raises(templating.TagError, match=r"cannot resolve \{\{tasks.gone.outputs.parameters.x\}\}"):
        templating.substitute("{{tasks.gone.outputs.parameters.x}}", VALUES)
    with pytest.raises(templating.TagError, match="item.a"):
        templating.substitute("{{item.a}}", {"item": "1"}, loop=True)


def test_loop_items_as_argo_writes_them() -> None:
    assert templating.item_values({"a": 1, "b": "x", "A_a": [1, 2]}) == {
        "item": '{"a":1,"b":"x","A_a":[1,2]}', "item.a": "1", "item.b": "x", "item.A_a": "[1,2]",
    }
    assert templating.item_values(100) == {"item": "100"}
    assert templating.item_values("Hello") == {"item": "Hello"}
    assert templating.item_values(3.0) == {"item": "3"}
    items = [{"first_name": "{{workflow.parameters.fname1}}", "message": "My name is {{workflow.parameters.fname1}}"}]
    assert templating.substitute_value(items, VALUES) == [{"first_name": "Alice", "message": "My name is Alice"}]


def test_with_param_is_a_json_list() -> None:
    values = {"tasks.p.outputs.parameters.out": '[{"a": 1}, {"a": 2}]', "workflow.parameters.l": "[3, 5, 7, 9]"}
    assert templating.loop_items("{{tasks.p.outputs.parameters.out}}", values, "t") == [{"a": 1}, {"a": 2}]
    assert templating.loop_items("{{workflow.parameters.l}}", values, "t") == [3, 5, 7, 9]
    for bad in ('{"a": 1}', "not json", "[" * 5000):
        with pytest.raises(templating.TagError, match="withParam value is not a JSON list"):
            templating.loop_items("{{x.y}}", {"x.y": bad}, "t")


def test_every_corpus_tag_is_a_supported_form() -> None:
    seen = set()
    for path in sorted(CORPUS.glob("*.yaml")):
        for tag in templating.tags(path.read_text()):
            templating.check_tag(tag, path.name)
            seen.add(tag.split(".")[0])
    assert {"inputs", "tasks", "workflow", "pod", "item"} <= seen


@pytest.mark.parametrize("tag", ["workflow.labels.x", "steps.s.bogus", "inputs.parameters.", "=1+1", "node.id"])
def test_unsupported_argo_tags_are_refused(tag: str) -> None:
    with pytest.raises(UserError):
        templating.check_tag(tag, "here")


# ---- when -----------------------------------------------------------------------------------------


def _corpus_conditions() -> list[str]:
    found = []
    for path in sorted(CORPUS.glob("*.yaml")):
        try:
            workflow = load_workflow(path)
        except UserError:
            continue
        found += [task.when for t in workflow.templates.values() for task in t.dag if task.when]
    return sorted(set(found))


def _filled(condition: str, value: str) -> str:
    return templating.substitute(condition, {tag: value for tag in templating.tags(condition)})


def test_corpus_conditions_evaluate_as_argo_does() -> None:
    conditions = _corpus_conditions()
    assert len(conditions) == 11
    for condition in conditions:
        if '"' in condition:  # a string comparison: "heads" == "heads", != "no-such-result"
            heads = when.evaluate(_filled(condition, "heads"))
            tails = when.evaluate(_filled(condition, "tails"))
            assert heads != tails or "no-such-result" in condition or condition.count("{{") == 2
        else:  # a number against 5 or 15
            low, high = when.evaluate(_filled(condition, "3")), when.evaluate(_filled(condition, "20"))
            assert low != high


@pytest.mark.parametrize(("expression", "expected"), [
    ('"heads" == "heads"', True),
    ('"tails" == "heads"', False),
    ('"heads" != "no-such-result"', True),
    ("7 > 5", True),
    ("5 > 5", False),
    ("15 <= 15", True),
    ("16 <= 15", False),
    ("1.5 < 2", True),
    ("-3 < -2", True),
    ("10 >= 9.99", True),
    ("'a' == 'a'", True),  # govaluate takes single quotes too
    ('"b" > "a"', True),  # strings compare by their bytes
    ('"10" < "9"', True),
    ('"5" == 5', False),  # different types are never equal (reflect.DeepEqual)
    ('"5" != 5', True),
    ("true", True),
    ("!false", True),
    ("!(1 == 1)", False),
    ('1 == 1 && "a" == "b"', False),
    ('1 == 2 || "a" == "a"', True),
    ("1 == 1 || 1 == 2 && 1 == 2", True),  # && binds tighter than ||
    ("(1 == 1 || 1 == 2) && 1 == 2", False),
    ('"say \\"hi\\"" == "say \\"hi\\""', True),
    ("5 == 5.0", True),
])
def test_when_evaluates(expression: str, expected: bool) -> None:
    assert when.evaluate(expression) is expected


@pytest.mark.parametrize(("expression", "problem"), [
    ("heads == \"heads\"", "no parameter 'heads' found"),
    ("", "empty when expression"),
    ("1 ==", "unexpected end of expression"),
    ("(1 == 1", "expected ')'"),
    ("1 == 1)", "unexpected ')'"),
    ('"a" < 5', "compares two numbers or two strings"),
    ("1 && true", "needs booleans"),
    ("!5", "needs a boolean"),
    ("-\"a\"", "needs a number"),
    ("5", "not a boolean"),
    ("1 = 1", "unexpected '= 1' at column 3"),
    ('"unterminated == "x"', "unexpected"),
    ("(" * 60 + "true" + ")" * 60, "nested deeper than 50"),
    ("!" * 60 + "true", "nested deeper than 50"),
])
def test_bad_when_is_one_error_line(expression: str, problem: str) -> None:
    with pytest.raises(when.WhenError) as failed:
        when.evaluate(expression)
    assert problem in str(failed.value) and "\n" not in str(failed.value)
    assert isinstance(failed.value, TaskFailure)


def test_when_is_checked_at_load_for_syntax_only() -> None:
    when.check("{{tasks.a.outputs.parameters.b}} > 5", "w")
    when.check('"{{tasks.a.outputs.parameters.b}}" == "heads"', "w")
    when.check("{{tasks.a.outputs.parameters.b}} && true", "w")  # a type error only at run time
    with pytest.raises(UserError, match="w: invalid when expression"):
        when.check("{{tasks.a.outputs.parameters.b}} >", "w")


# ---- scopes: what tags resolve from ---------------------------------------------------------------

def test_workflow_values_and_required_parameters() -> None:
    from millpond.pipelines.argo import scopes

    workflow = load_workflow(CORPUS / "withparam_global.yaml")
    values = scopes.workflow_values(workflow, "withparam-global-abcde", "uid-1", {})
    assert values["workflow.parameters.loopidy_doop"] == "[3, 5, 7, 9]"
    assert values["workflow.name"] == "withparam-global-abcde" and values["workflow.uid"] == "uid-1"
    given = scopes.workflow_values(workflow, "n", "u", {"loopidy_doop": [1]})
    assert given["workflow.parameters.loopidy_doop"] == "[1]"
    missing = load_workflow(CORPUS / "fail_parameter_value_missing.yaml")
    with pytest.raises(UserError, match="pipeline parameter 'parameter' is required and was not given"):
        scopes.workflow_values(missing, "n", "u", {})
    with pytest.raises(UserError, match="no pipeline parameter named 'nope'"):
        scopes.workflow_values(missing, "n", "u", {"parameter": "x", "nope": 1})


def test_inputs_bind_as_argo_process_args() -> None:
    from millpond.pipelines.argo import scopes
    from millpond.pipelines.argo.model import InputParameter, Inputs, Template

    template = Template(name="t", kind="container", inputs=Inputs(parameters=(
        InputParameter("a"), InputParameter("b", default="2"), InputParameter("c", value="3"),
    )))
    assert scopes.bind_inputs(template, {"a": "1"}) == {
        "inputs.parameters.a": "1", "inputs.parameters.b": "2", "inputs.parameters.c": "3"}
    assert scopes.bind_inputs(template, {"a": "1", "b": "x", "c": "y"})["inputs.parameters.c"] == "y"
    with pytest.raises(scopes.BindingError, match="inputs.parameters.a was not supplied"):
        scopes.bind_inputs(template, {})


def test_outputs_as_argo_saves_them() -> None:
    from millpond.pipelines.argo import scopes
    from millpond.pipelines.argo.model import OutputParameter

    flip = OutputParameter("flip-coin-output", path="/tmp/output")
    assert scopes.output_parameter(flip, "heads\n") == "heads"  # one trailing newline trimmed (tee's)
    assert scopes.output_parameter(flip, "heads\n\n") == "heads\n"
    with pytest.raises(scopes.BindingError, match="left no file at /tmp/output"):
        scopes.output_parameter(flip, None)
    assert scopes.output_parameter(OutputParameter("x", path="/p", default="d"), None) == "d"
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "run-my-pvc"},
             "status": {"capacity": {"storage": "1Gi"}}}
    assert scopes.json_path_value(claim, ("metadata", "name"), "n") == "run-my-pvc"
    assert scopes.json_path_value(claim, ("status", "capacity", "storage"), "n") == "1Gi"
    assert json.loads(scopes.json_path_value(claim, (), "n")) == claim
    assert scopes.json_path_value({"status": {"readyToUse": True}}, ("status", "readyToUse"), "n") == "true"
    with pytest.raises(scopes.BindingError, match=r"the object has no .status.restoreSize"):
        scopes.json_path_value(claim, ("status", "restoreSize"), "n")
    assert scopes.task_values("flip", {"out": "heads"}) == {"tasks.flip.outputs.parameters.out": "heads"}


def test_holds_substitutes_then_evaluates() -> None:
    condition = '"{{tasks.flip-coin.outputs.parameters.flip-coin-output}}" == "heads"'
    assert when.holds(condition, VALUES)
    assert not when.holds(condition, {"tasks.flip-coin.outputs.parameters.flip-coin-output": "tails"})
    assert when.holds("{{tasks.r.outputs.parameters.o}} > 5", {"tasks.r.outputs.parameters.o": "7"})
    with pytest.raises(when.WhenError, match=r"when '\{\{tasks.r.outputs.parameters.o\}\} > 5': cannot resolve"):
        when.holds("{{tasks.r.outputs.parameters.o}} > 5", {})
    with pytest.raises(when.WhenError, match="no parameter 'abc' found"):  # govaluate: a bare word is a variable
        when.holds("{{tasks.r.outputs.parameters.o}} > 5", {"tasks.r.outputs.parameters.o": "abc"})
