"""A pipeline that trains the digits classifier and serves it with ``millpond.serving.components.deploy_model``
(tests/serving/test_serving_cli.py)."""

from kfp import dsl
from kfp.dsl import Model, Output

from millpond.serving.components import deploy_model


@dsl.component
def fit(rows: int, model: Output[Model]) -> None:
    """The digits classifier on the first ``rows`` digits, written to ``model.path`` as KFP components do."""
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    joblib.dump(LogisticRegression(max_iter=200).fit(x[:rows], y[:rows]), model.path)
    model.metadata["framework"] = "scikit-learn"


@dsl.pipeline(name="deploy-step")
def deploy_step(name: str, rows: int = 1500) -> str:
    trained = fit(rows=rows)
    served = deploy_model(model=trained.outputs["model"], name=name, timeout_s=120.0).set_caching_options(False)
    return served.output
