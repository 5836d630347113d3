"""The Katib SDK's side environment (``tests/katib_sdk_env.py``), and the server the Kubeflow SDKs' tests use:
``millpond server --tls`` with a token, with the kubeconfig ``millpond kubeconfig`` writes for it (its CA, its
token), as a user's notebook reaches it (``tests/kube/test_sdk_clients.py``'s module fixtures)."""

from tests.katib_sdk_env import katib_sdk  # noqa: F401 - fixtures for this folder's tests
from tests.kube.test_sdk_clients import home, kubectl, served  # noqa: F401
