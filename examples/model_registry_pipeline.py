"""Train a digits classifier and register the run's Model artifact in the model registry, lineage kept.

    millpond server &                   # the registry's REST API (Kubeflow Model Registry's)
    millpond run examples/model_registry_pipeline.py -p registry_url=http://127.0.0.1:8888 -p version=1
    millpond serve --model digits:1 --wait

``register`` is an ordinary KFP component calling the ``model-registry`` client, as on Kubeflow: the
version records the run (``kfp.run_id``, with KFP's ``{{$.pipeline_job_uuid}}`` placeholder), the task and
output the model came from and the artifact's URI, and the model artifact its source (``modelSourceKind``
``kfp``, ``modelSourceClass`` ``pipelinerun``, ``modelSourceId`` the run id), so a served version leads back to
the run that trained it. It imports the client from the task's Python: millpond runs lightweight components with
its own interpreter, where ``pip install millpond[test]`` (or ``pip install model-registry``) put it; on
Kubeflow add ``packages_to_install=["model-registry>=0.3,<0.4"]`` to its decorator.
"""

from kfp import dsl
from kfp.dsl import Input, Model, Output


@dsl.component(base_image="python:3.11")
def train(rows: int, model: Output[Model]) -> None:
    """A logistic regression on scikit-learn's digits, saved with joblib."""
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    joblib.dump(LogisticRegression(max_iter=300).fit(x[:rows], y[:rows]), model.path)
    model.metadata["framework"] = "scikit-learn"


@dsl.component(base_image="python:3.11")
def register(model: Input[Model], registry_url: str, name: str, version: str, run_id: str, author: str) -> str:
    """Register the model's URI as ``name``:``version``; answer the ``model-registry://`` reference to serve it."""
    from model_registry import ModelRegistry

    registry = ModelRegistry(registry_url, author=author, is_secure=registry_url.startswith("https"),
                             user_token="none")
    registry.register_model(
        name, model.uri, version=version, model_format_name="sklearn", model_format_version="1",
        version_description=f"trained by run {run_id}",
        model_source_kind="kfp", model_source_class="pipelinerun", model_source_id=run_id,
        metadata={"kfp.run_id": run_id, "kfp.task": "train", "kfp.output": "model", "kfp.artifact_uri": model.uri})
    return f"model-registry://{name}/{version}"


@dsl.pipeline(name="model-registry-demo")
def registry_pipeline(registry_url: str = "http://127.0.0.1:8888", name: str = "digits", version: str = "1",
                      rows: int = 1500, author: str = "pipelines") -> str:
    trained = train(rows=rows)
    return register(model=trained.outputs["model"], registry_url=registry_url, name=name, version=version,
                    run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, author=author).output
