"""The small pure pieces: typed values, placeholders, and kfp's pip prelude."""

from __future__ import annotations

import json

import pytest

from millpond.errors import UserError
from millpond.pipelines.placeholders import PlaceholderContext, PlaceholderError, local_path
from millpond.pipelines.values import check_json, coerce, from_output_file, parse_text
from millpond.runners.python_env import split_prelude


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("42", "NUMBER_INTEGER", 42),
        (" -3 ", "NUMBER_INTEGER", -3),
        ("2.5", "NUMBER_DOUBLE", 2.5),
        ("7", "NUMBER_DOUBLE", 7.0),
        ("True", "BOOLEAN", True),
        ("0", "BOOLEAN", False),
        ("[1, 2]", "LIST", [1, 2]),
        ('{"a": [1]}', "STRUCT", {"a": [1]}),
        ("  spaced = kept ", "STRING", "  spaced = kept "),
    ],
)
def test_parse_text(text: str, kind: str, expected: object) -> None:
    value = parse_text(text, kind, "-p x")
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "kind"),
    [("1.5", "NUMBER_INTEGER"), ("nan", "NUMBER_DOUBLE"), ("{}", "LIST"), ("yes please", "BOOLEAN")],
)
def test_parse_text_rejects(text: str, kind: str) -> None:
    with pytest.raises(UserError, match=r"^-p x: expected"):
        parse_text(text, kind, "-p x")


def test_check_json_keeps_bools_out_of_integers() -> None:
    with pytest.raises(UserError):
        check_json(True, "NUMBER_INTEGER", "x")
    assert check_json(3.0, "NUMBER_INTEGER", "x") == 3
    assert check_json(3, "NUMBER_DOUBLE", "x") == 3.0


def test_coerce_follows_the_declared_type() -> None:
    assert type(coerce(2.0, "NUMBER_INTEGER")) is int
    assert coerce(2.5, "NUMBER_INTEGER") == 2.5  # does not fit: passed on unchanged
    assert type(coerce(2, "NUMBER_DOUBLE")) is float
    assert coerce(True, "NUMBER_DOUBLE") is True


def test_output_files_parse_by_type() -> None:
    assert from_output_file("hello\n", "STRING", "o") == "hello\n"
    assert from_output_file("12\n", "NUMBER_INTEGER", "o") == 12
    assert from_output_file('{"k": 1}', "STRUCT", "o") == {"k": 1}


def _context() -> PlaceholderContext:
    return PlaceholderContext(
        {
            "inputs": {
                "parameterValues": {"name": "pond", "n": 3, "cfg": {"a": "b\"c"}},
                "artifacts": {"data": {"artifacts": [{"uri": "s3://bucket/x/data", "metadata": {"rows": 5}}]}},
            },
            "outputs": {
                "parameters": {"out": {"outputFile": "/tmp/o/out"}},
                "artifacts": {"model": {"artifacts": [{"uri": "/root/m/model", "metadata": {}}]}},
                "outputFile": "/tmp/o/executor_output.json",
            },
        },
        job={"pipeline_job_name": "job-1", "pipeline_task_uuid": "t-1"},
    )


def test_placeholders_resolve_like_the_kfp_driver() -> None:
    ctx = _context()
    assert ctx.command_line(["--name={{$.inputs.parameters['name']}}", "{{$.inputs.parameters['n']}}"]) == [
        "--name=pond", "3"
    ]
    assert ctx.command_line(["{{$.inputs.parameters['cfg']}}"]) == ['{"a": "b\\"c"}']
    assert ctx.command_line(["{{$.inputs.artifacts['data'].path}}"]) == ["/s3/bucket/x/data"]
    assert ctx.command_line(["{{$.inputs.artifacts['data'].uri}}"]) == ["s3://bucket/x/data"]
    assert ctx.command_line(["{{$.inputs.artifacts['data'].metadata}}"]) == ['{"rows": 5}']
    assert ctx.command_line(["{{$.outputs.parameters['out'].output_file}}"]) == ["/tmp/o/out"]
    assert ctx.command_line(["{{$.outputs.artifacts['model'].path}}"]) == ["/root/m/model"]
    assert ctx.command_line(["{{$.pipeline_job_name}}/{{$.pipeline_task_uuid}}"]) == ["job-1/t-1"]
    assert json.loads(ctx.command_line(["{{$}}"])[0])["inputs"]["parameterValues"]["n"] == 3


def test_concat_and_if_present() -> None:
    ctx = _context()
    concat = json.dumps({"Concat": ["a-", "{{$.inputs.parameters['name']}}", "-z"]})
    assert ctx.command_line([concat]) == ["a-pond-z"]
    present = json.dumps({"IfPresent": {"InputName": "name", "Then": ["--name", "{{$.inputs.parameters['name']}}"]}})
    absent = json.dumps({"IfPresent": {"InputName": "missing", "Then": ["--m", "x"], "Else": ["--default"]}})
    dropped = json.dumps({"IfPresent": {"InputName": "missing", "Then": ["--m"]}})
    assert ctx.command_line(["cmd", present, absent, dropped]) == ["cmd", "--name", "pond", "--default"]


def test_unknown_placeholder_fails_the_task_with_its_name() -> None:
    with pytest.raises(PlaceholderError, match=r"unsupported placeholder \{\{\$\.nope\}\}"):
        _context().command_line(["{{$.nope}}"])
    with pytest.raises(PlaceholderError, match="input parameter 'ghost' has no value"):
        _context().command_line(["{{$.inputs.parameters['ghost']}}"])


def test_local_path_mirrors_kfp() -> None:
    assert local_path("gs://b/k") == "/gcs/b/k"
    assert local_path("minio://b/k") == "/minio/b/k"
    assert local_path("/plain/path") == "/plain/path"


PRELUDE = (
    '\nif ! [ -x "$(command -v pip)" ]; then\n    python3 -m ensurepip\nfi\n\n'
    "PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --quiet --no-warn-script-location "
    "--index-url https://example.org/simple --trusted-host https://example.org/simple 'pandas==2.2.0' 'minio' "
    " &&  python3 -m pip install --quiet --no-warn-script-location 'kfp==2.14.3' '--no-deps' "
    "'typing-extensions>=3.7.4,<5; python_version<\"3.9\"' && \"$0\" \"$@\"\n"
)


def test_split_prelude_keeps_user_packages_and_index() -> None:
    prelude = split_prelude(["sh", "-c", PRELUDE, "sh", "-ec", "program", "source"])
    assert prelude is not None
    assert prelude.requirements == ("pandas==2.2.0", "minio")
    assert prelude.index_options == ("--index-url", "https://example.org/simple")
    assert prelude.program == ["sh", "-ec", "program", "source"]


def test_split_prelude_ignores_other_commands() -> None:
    assert split_prelude(["sh", "-c", "echo hi"]) is None
    assert split_prelude(["python3", "-c", "print(1)"]) is None
