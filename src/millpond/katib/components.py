"""KFP components that tune: ``katib_experiment`` runs a Katib Experiment and outputs its best parameters.

.. code-block:: python

    from kfp import dsl
    from millpond.katib.components import katib_experiment

    @dsl.pipeline
    def tuned():
        tuned = katib_experiment(experiment_name="quad", experiment_spec=SPEC, experiment_timeout_minutes=30)
        train(lr=tuned.outputs["best_parameters"])

Katib's launcher component (``kubeflow-katib-launcher``) as a lightweight Python component: the same inputs
(``experiment_name``, ``experiment_namespace``, ``experiment_spec``: the Experiment's ``spec`` as a dict,
``experiment_timeout_minutes``, ``delete_finished_experiment``), and as its output "Best Parameter Set" the
experiment's ``currentOptimalTrial`` (``best_parameter_set``), with its assignments as ``{name: value}``
(``best_parameters``) beside it for a next task. Its body only calls ``millpond.katib.pipeline_step.main``,
where the work is: see there for reruns, cancellation, failure and the task's resources.
"""

from typing import NamedTuple

from kfp import dsl

__all__ = ["katib_experiment"]


@dsl.component(base_image="python:3.11")
def katib_experiment(
    experiment_spec: dict,
    experiment_name: str = "",
    experiment_namespace: str = "default",
    experiment_timeout_minutes: int = 60 * 24,
    delete_finished_experiment: bool = True,
) -> NamedTuple("Outputs", [("best_parameter_set", dict), ("best_parameters", dict)]):  # type: ignore[valid-type]  # noqa: UP014
    """Create a Katib Experiment from its spec, wait for its end, output its best trial and parameters."""
    from collections import namedtuple  # noqa: PLC0415 - KFP lightweight component: its body is the whole source the executor runs

    from millpond.katib.pipeline_step import main  # noqa: PLC0415 - KFP lightweight component: its body is the whole source the executor runs

    best_parameter_set, best_parameters = main(
        experiment_spec=experiment_spec, experiment_name=experiment_name, experiment_namespace=experiment_namespace,
        experiment_timeout_minutes=experiment_timeout_minutes, delete_finished_experiment=delete_finished_experiment,
    )
    # kfp runs this function's source alone, so its outputs' NamedTuple is made here, at run time.
    return namedtuple("Outputs", ["best_parameter_set", "best_parameters"])(best_parameter_set, best_parameters)  # type: ignore[call-arg]  # made at run time
