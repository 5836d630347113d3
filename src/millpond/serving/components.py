"""KFP components that serve: ``deploy_model`` serves a Model artifact and outputs its endpoint's URL.

.. code-block:: python

    from kfp import dsl
    from millpond.serving.components import deploy_model

    @dsl.pipeline
    def digits():
        model = train(...)
        served = deploy_model(model=model.outputs["model"], name="digits")
        query(url=served.output)

A lightweight Python component, as ``millpond.training.components.train_job`` is: the real ``kfp``
SDK compiles it into the pipeline's IR. Its body only calls ``millpond.serving.pipeline_step.main``,
where the work is: the artifact becomes an InferenceService (``storageUri``: its URI; the format
asked, else its ``framework`` metadata or file name), stored and started as ``millpond serve``
does; the task waits until it is Ready and outputs its URL. See ``pipeline_step`` for reruns,
cancellation and the task's resources.
"""

from kfp import dsl
from kfp.dsl import Input, Model

__all__ = ["deploy_model"]


@dsl.component(base_image="python:3.11")
def deploy_model(
    model: Input[Model],
    name: str = "",
    format: str = "",  # noqa: A002 - the KServe predictor's word (sklearn, pytorch)
    replicas: int = 1,
    namespace: str = "default",
    timeout_s: float = 300.0,
) -> str:
    """Serve the Model artifact as an InferenceService, wait until it answers, output its URL."""
    from millpond.serving.pipeline_step import main  # noqa: PLC0415 - KFP lightweight component: its body is the whole source the executor runs

    return main(model_uri=model.uri, model_metadata=dict(model.metadata), name=name, format=format,
                replicas=replicas, namespace=namespace, timeout_s=timeout_s)
