# Seed 003's calculation pipeline, as the seed writes it: KFP v1 SDK (kfp 1.8) code.
#
# func_to_container_op turns each Python function into a ContainerOp; my_divmod returns a
# NamedTuple, so its task has two outputs (quotient, remainder). `millpond run pipeline.py`
# compiles this file with kfp 1.8.22 in a side environment; pipeline.yaml beside it is the same
# pipeline compiled ahead (see README.md). kfp 2 cannot import this file: it has no
# kfp.components.func_to_container_op.
from typing import NamedTuple

import kfp
import kfp.components as comp
import kfp.dsl as dsl


def add(a: float, b: float) -> float:
    '''Calculates sum of two arguments'''
    return a + b


add_op = comp.func_to_container_op(add)


def my_divmod(
    dividend: float, divisor: float
) -> NamedTuple('MyDivmodOutput', [('quotient', float), ('remainder', float)]):
    '''Divides two numbers and calculate  the quotient and remainder'''
    # Imports inside a component function:
    import numpy as np

    # This function demonstrates how to use nested functions inside a component function:
    def divmod_helper(dividend, divisor):
        return np.divmod(dividend, divisor)

    (quotient, remainder) = divmod_helper(dividend, divisor)

    from collections import namedtuple
    divmod_output = namedtuple('MyDivmodOutput', ['quotient', 'remainder'])
    return divmod_output(quotient, remainder)


divmod_op = comp.func_to_container_op(
    my_divmod, base_image='tensorflow/tensorflow:1.14.0-py3')


@dsl.pipeline(
    name='Calculation pipeline',
    description='A toy pipeline that performs arithmetic calculations.')
def calc_pipeline(
    a='a',
    b='7',
    c='17',
):
    # Passing pipeline parameter and a constant value as operation arguments
    add_task = add_op(a, 4)  # Returns a dsl.ContainerOp class instance.

    # Passing a task output reference as operation arguments
    # For an operation with a single return value, the output reference can be accessed using
    # `task.output` or `task.outputs['output_name']` syntax
    divmod_task = divmod_op(add_task.output, b)

    # For an operation with a multiple return values, the output references can be accessed
    # using `task.outputs['output_name']` syntax
    result_task = add_op(divmod_task.outputs['quotient'], c)  # noqa: F841 - the seed names it


if __name__ == '__main__':
    # Compiling the pipeline
    kfp.compiler.Compiler().compile(calc_pipeline, 'pipeline.yaml')
