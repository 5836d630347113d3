"""tests/markers.py's slow list names real tests, each with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.markers import SLOW

REPO = Path(__file__).resolve().parents[2]


def test_every_slow_entry_is_a_test_function_of_its_file_and_says_why() -> None:
    for entry in SLOW:
        file, _, name = entry.test.partition("::")
        assert (REPO / file).is_file(), f"{entry.test}: no file {file}"
        functions = {node.name for node in ast.walk(ast.parse((REPO / file).read_text()))
                     if isinstance(node, ast.FunctionDef)}
        assert name in functions, f"{entry.test}: {file} has no {name}"
        assert entry.why.strip(), entry


def test_no_test_is_listed_twice() -> None:
    tests = [entry.test for entry in SLOW]
    assert len(tests) == len(set(tests))
