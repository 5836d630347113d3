"""Seed 003's calculation pipeline written with kfp 2: what pipeline.py becomes in v2.

NOTE_v2.md walks through the differences. `millpond run pipeline_v2.py -p a=3` runs it with
millpond's own kfp 2.
"""
from typing import NamedTuple

from kfp import dsl


@dsl.component(base_image='python:3.7')  # func_to_container_op's default image
def add(a: float, b: float) -> float:
    '''Calculates sum of two arguments'''
    return a + b


@dsl.component(base_image='tensorflow/tensorflow:1.14.0-py3')
def my_divmod(
    dividend: float, divisor: float
) -> NamedTuple('MyDivmodOutput', [('quotient', float), ('remainder', float)]):
    '''Divides two numbers and calculate  the quotient and remainder'''
    import numpy as np

    def divmod_helper(dividend, divisor):
        return np.divmod(dividend, divisor)

    (quotient, remainder) = divmod_helper(dividend, divisor)

    from collections import namedtuple
    divmod_output = namedtuple('MyDivmodOutput', ['quotient', 'remainder'])
    return divmod_output(float(quotient), float(remainder))


@dsl.pipeline(name='calculation-pipeline-v2', description='A toy pipeline that performs arithmetic calculations.')
def calc_pipeline(a: float, b: float = 7.0, c: float = 17.0) -> float:
    add_task = add(a=a, b=4.0)  # kfp 2 refuses an int constant for a float input
    divmod_task = my_divmod(dividend=add_task.output, divisor=b)
    result_task = add(a=divmod_task.outputs['quotient'], b=c)
    return result_task.output
