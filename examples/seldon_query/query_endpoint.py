"""Seed 003's query script (intro-to-ml-with-kubeflow-examples ch2/query-endpoint.py), run against millpond.

Only the address changed: ``AMBASSADOR_API_IP`` is ``millpond server``'s (the first argument, else
``$MILLPOND_SELDON_ADDRESS``, else the server's default ``127.0.0.1:8888``), whose gateway answers
``/seldon/NAME/api/v0.1/predictions`` for every served SeldonDeployment and InferenceService. Two
things the 2019 script imported no longer install and are stood in for, in the set-up part only, with the same calls:
``tensorflow.examples.tutorials.mnist.input_data`` (gone from TensorFlow 2) reads MNIST-shaped
digits (``examples/fluid_mnist/make_data.py``) with the same ``mnist.train.next_batch(1)``, and
matplotlib's ``show`` draws the digit as text. The query itself, between ``tag::scriptGuts`` and
``end::scriptGuts``, is the seed's line for line.

    python examples/seldon_query/seldon_mnist.py         # a SeldonDeployment mnist-classifier (probabilities)
    python examples/seldon_query/serve_mnist.py          # or an InferenceService (the class), as arena serves it
    python examples/seldon_query/query_endpoint.py 127.0.0.1:PORT
"""

import json
import os
import sys
from pathlib import Path

import numpy as np
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fluid_mnist"))


class _Batches:
    """``mnist.train`` of TensorFlow 1's tutorial reader: ``next_batch(n)`` → (images 0-1, one-hot labels)."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels, self.at = images.reshape(-1, 784) / 255.0, np.eye(10)[labels], 0

    def next_batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        batch = slice(self.at, self.at + n)
        self.at += n
        return self.images[batch], self.labels[batch]


class _Plot:
    def __init__(self, two_d: np.ndarray) -> None:
        self.two_d = two_d

    def show(self) -> None:
        for row in self.two_d[::2]:
            print("".join(" .:-=+*#%@"[min(9, int(v) // 26)] for v in row))


def download_mnist():
    from make_data import digits_as_mnist

    arrays = digits_as_mnist()

    class _Mnist:
        train = _Batches(arrays["t10k-images"], arrays["t10k-labels"])

    return _Mnist()


def gen_image(arr):
    two_d = (np.reshape(arr, (28, 28)) * 255).astype(np.uint8)
    return _Plot(two_d)
#end::scriptSetup[]

AMBASSADOR_API_IP = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MILLPOND_SELDON_ADDRESS", "127.0.0.1:8888")

#tag::scriptGuts[]
mnist = download_mnist()
batch_xs, batch_ys = mnist.train.next_batch(1)
chosen = 0
gen_image(batch_xs[chosen]).show()
data = batch_xs[chosen].reshape((1, 784))
features = ["X" + str(i + 1) for i in range(0, 784)]
request = {"data": {"names": features, "ndarray": data.tolist()}}
deploymentName = "mnist-classifier"
uri = "http://" + AMBASSADOR_API_IP + "/seldon/" + \
    deploymentName + "/api/v0.1/predictions"

response = requests.post(uri, json=request)
#end::scriptGuts[]
print(response.status_code)
print(json.dumps(response.json()), "(label", int(batch_ys[chosen].argmax()), end=")\n")
