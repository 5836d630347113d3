"""Serve an ``mnist-classifier`` as seed 003's query expects it: 784 pixels in, a digit's class out.

Seed 003 queries a Seldon deployment named ``mnist-classifier`` with one flattened 28×28 image
(values 0-1, as TensorFlow's ``input_data`` gives them). This trains a small scikit-learn model on
MNIST-shaped digits (``examples/fluid_mnist/make_data.py``: scikit-learn's handwritten digits at
MNIST's size, nothing downloaded), writes ``model.joblib``, and serves it with Arena's command:

    arena serve sklearn --name mnist-classifier --model-uri DIR

then waits until it is Ready and prints how to run ``query_endpoint.py`` against it.

    python examples/seldon_query/serve_mnist.py [--dir /tmp/mnist-classifier] [--timeout 120]
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


def train(model_dir: Path) -> float:
    """Fit a ridge classifier (closed form: a second, where a logistic regression takes ten) on the train
    split's 784 pixels (0-1); the held-out accuracy."""
    import joblib
    from make_data import digits_as_mnist
    from sklearn.linear_model import RidgeClassifier

    arrays = digits_as_mnist()
    x = arrays["train-images"].reshape(-1, 784) / 255.0
    classifier = RidgeClassifier(alpha=1.0).fit(x, arrays["train-labels"])
    model_dir.mkdir(parents=True, exist_ok=True)
    joblib.dump(classifier, model_dir / "model.joblib")
    test = arrays["t10k-images"].reshape(-1, 784) / 255.0
    return float(classifier.score(test, arrays["t10k-labels"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp") / NAME, help="Where model.joblib is written.")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    accuracy = train(args.dir)
    print(f"trained {NAME}: held-out accuracy {accuracy:.3f}, {args.dir / 'model.joblib'}")
    arena = shutil.which("arena") or str(Path(sys.executable).with_name("arena"))
    subprocess.run([arena, "serve", "delete", NAME], capture_output=True)  # a previous run's, if any
    subprocess.run([arena, "serve", "sklearn", "--name", NAME, "--model-uri", str(args.dir)], check=True)
    from millpond.serving.deploy import ready_url
    from millpond.store.resources import ResourceStore

    url = ready_url(ResourceStore(), NAME, "default", args.timeout)
    print(f"{NAME} is served ({url}); query it through millpond server's gateway:")
    print(f"  python {HERE / 'query_endpoint.py'} 127.0.0.1:8888     # millpond server's HOST:PORT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
