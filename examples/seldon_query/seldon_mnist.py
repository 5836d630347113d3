"""Serve seed 003's ``mnist-classifier`` as the SeldonDeployment the seed queries, with Seldon's SKLEARN_SERVER.

Seed 003's query script posts one flattened 28×28 image to ``/seldon/mnist-classifier/api/v0.1/predictions``
of a Seldon Core deployment. This trains a scikit-learn logistic regression on MNIST-shaped digits
(``examples/fluid_mnist/make_data.py``: scikit-learn's handwritten digits at MNIST's size, nothing
downloaded), writes ``model.joblib`` (the file Seldon's sklearnserver loads) and the SeldonDeployment:

    apiVersion: machinelearning.seldon.io/v1
    kind: SeldonDeployment
    metadata: {name: mnist-classifier}
    spec:
      predictors:
      - name: default
        graph: {name: classifier, implementation: SKLEARN_SERVER, modelUri: file:///DIR}

applies it with ``millpond apply -f`` (``kubectl apply -f`` against ``millpond server`` does the same), waits
until its status says ``state: Available``, and prints how to run ``query_endpoint.py``, which answers the
ten digits' probabilities (``predict_proba``, Seldon's default) in ``data.ndarray`` with ``data.names``
``t:0`` … ``t:9``, as Seldon does.

    python examples/seldon_query/seldon_mnist.py [--dir /tmp/mnist-classifier-seldon] [--timeout 120]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fluid_mnist"))

NAME = "mnist-classifier"
MANIFEST = """apiVersion: machinelearning.seldon.io/v1
kind: SeldonDeployment
metadata:
  name: {name}
spec:
  predictors:
  - name: default
    replicas: 1
    graph:
      name: classifier
      implementation: SKLEARN_SERVER
      modelUri: file://{model_dir}
"""


def train(model_dir: Path) -> float:
    """Fit a logistic regression (it has ``predict_proba``, which Seldon's SKLEARN_SERVER calls) on the train
    split's 784 pixels (0-1); the held-out accuracy."""
    import joblib
    from make_data import digits_as_mnist
    from sklearn.linear_model import LogisticRegression

    arrays = digits_as_mnist()
    x = arrays["train-images"].reshape(-1, 784) / 255.0
    classifier = LogisticRegression(max_iter=200).fit(x, arrays["train-labels"])
    model_dir.mkdir(parents=True, exist_ok=True)
    joblib.dump(classifier, model_dir / "model.joblib")
    test = arrays["t10k-images"].reshape(-1, 784) / 255.0
    return float(classifier.score(test, arrays["t10k-labels"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp") / f"{NAME}-seldon",
                        help="Where model.joblib and the manifest are written.")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    model_dir = args.dir.resolve() / "model"
    accuracy = train(model_dir)
    print(f"trained {NAME}: held-out accuracy {accuracy:.3f}, {model_dir / 'model.joblib'}")
    manifest = args.dir.resolve() / "seldon-deployment.yaml"
    manifest.write_text(MANIFEST.format(name=NAME, model_dir=model_dir))
    millpond = shutil.which("millpond") or str(Path(sys.executable).with_name("millpond"))
    subprocess.run([millpond, "apply", "-f", str(manifest)], check=True)
    from millpond.serving.seldon.lifecycle import wait_available
    from millpond.store.resources import ResourceStore

    url = wait_available(ResourceStore(), NAME, "default", args.timeout)
    print(f"{NAME} is Available ({url}); query it through millpond server's gateway:")
    print(f"  python {HERE / 'query_endpoint.py'} 127.0.0.1:8888     # millpond server's HOST:PORT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
