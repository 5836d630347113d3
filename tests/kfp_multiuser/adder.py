"""The pipeline the team runs: one small step, so that a run finishes in about a second."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

from kfp import dsl


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="adder")
def adder(x: int = 1, y: int = 2) -> int:
    return add(a=x, b=y).output
