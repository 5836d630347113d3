"""The demo: preprocess → train → evaluate on scikit-learn's digits, in the shape of seed 002.

Written with the real kfp SDK; millpond compiles it with kfp's compiler and runs it locally:

    millpond run examples/digits_pipeline.py -p n_estimators=50
    millpond run examples/digits_pipeline.py -p deploy=true     # also serve the model, and query it

With ``deploy`` (off by default, so the demo's time does not grow) the trained model is served as
the InferenceService ``serve_name`` (``millpond.serving.components.deploy_model``: KServe v1, the
Open Inference Protocol v2 and Seldon v0.1 on its URL), and ``query`` posts held-out digits to it.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from millpond.serving.components import deploy_model


@dsl.component(base_image="python:3.11")
def preprocess(test_fraction: float, seed: int, train_data: Output[Dataset], test_data: Output[Dataset]) -> int:
    """Load the digits shipped with scikit-learn, scale them, and split train from test."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    features = digits.data / 16.0
    x_train, x_test, y_train, y_test = train_test_split(
        features, digits.target, test_size=test_fraction, random_state=seed, stratify=digits.target
    )
    # Write through a file object: savez would append ".npz" to a bare path.
    with open(train_data.path, "wb") as out:
        np.savez_compressed(out, x=x_train, y=y_train)
    with open(test_data.path, "wb") as out:
        np.savez_compressed(out, x=x_test, y=y_test)
    train_data.metadata["rows"] = len(y_train)
    test_data.metadata["rows"] = len(y_test)
    print(f"train rows: {len(y_train)}, test rows: {len(y_test)}")
    return len(y_train)


@dsl.component(base_image="python:3.11")
def train(train_data: Input[Dataset], n_estimators: int, seed: int, model: Output[Model]) -> None:
    """Fit a random forest and save it with joblib."""
    import joblib
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    with np.load(train_data.path) as data:
        x, y = data["x"], data["y"]
    classifier = RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
    classifier.fit(x, y)
    joblib.dump(classifier, model.path)
    model.metadata["framework"] = "scikit-learn"
    model.metadata["n_estimators"] = n_estimators
    print(f"trained a random forest of {n_estimators} trees on {len(y)} rows")


@dsl.component(base_image="python:3.11")
def evaluate(test_data: Input[Dataset], model: Input[Model], metrics: Output[Metrics]) -> float:
    """Score the model on the held-out digits and log accuracy as a KFP Metrics artifact."""
    import joblib
    import numpy as np
    from sklearn.metrics import accuracy_score, f1_score

    with np.load(test_data.path) as data:
        x, y = data["x"], data["y"]
    classifier = joblib.load(model.path)
    predicted = classifier.predict(x)
    accuracy = float(accuracy_score(y, predicted))
    metrics.log_metric("accuracy", accuracy)
    metrics.log_metric("f1_macro", float(f1_score(y, predicted, average="macro")))
    print(f"test accuracy: {accuracy:.4f}")
    return accuracy


@dsl.component(base_image="python:3.11")
def query(url: str, name: str, test_data: Input[Dataset], model: Input[Model], answers: Output[Metrics]) -> None:
    """Post five held-out digits to the served model (KServe v1) and compare with the model called directly."""
    import json
    import urllib.request

    import joblib
    import numpy as np

    with np.load(test_data.path) as data:
        x, y = data["x"][:5], data["y"][:5]
    endpoint = f"{url.rstrip('/')}/v1/models/{name}:predict"
    body = json.dumps({"instances": x.tolist()}).encode()
    request = urllib.request.Request(endpoint, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        predicted = json.load(response)["predictions"]
    direct = joblib.load(model.path).predict(x).tolist()
    print(f"POST {endpoint} with 5 rows of 64 pixels -> {predicted} (labels {y.tolist()}, the model itself {direct})")
    answers.log_metric("rows", len(predicted))
    answers.log_metric("same_as_model", sum(int(a == b) for a, b in zip(predicted, direct, strict=True)))
    answers.log_metric("correct", sum(int(a == b) for a, b in zip(predicted, y.tolist(), strict=True)))


@dsl.pipeline(name="digits-classifier", description="Train and evaluate a digits classifier.")
def digits_pipeline(n_estimators: int = 100, test_fraction: float = 0.25, seed: int = 7, deploy: bool = False,
                    serve_name: str = "digits") -> float:
    data = preprocess(test_fraction=test_fraction, seed=seed)
    model = train(train_data=data.outputs["train_data"], n_estimators=n_estimators, seed=seed)
    scores = evaluate(test_data=data.outputs["test_data"], model=model.outputs["model"])
    with dsl.If(deploy == True):  # noqa: E712 - KFP builds the condition from the comparison
        # never cached: a cached deploy would answer the URL of a service that may be gone since
        served = deploy_model(model=model.outputs["model"], name=serve_name, format="sklearn")
        served.set_caching_options(False)
        asked = query(url=served.output, name=serve_name, test_data=data.outputs["test_data"],
                      model=model.outputs["model"])
        asked.set_caching_options(False)
    return scores.outputs["Output"]
