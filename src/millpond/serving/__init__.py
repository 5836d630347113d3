"""Serving models as KServe does: InferenceService manifests, their predictor specs, model servers.

``serving.manifests``/``spec``/``objects`` take KServe's InferenceService and serving runtimes
(``apply -f``, ``get``), ``serving.models`` loads a model directory (scikit-learn, PyTorch) behind
one small interface, ``serving.protocols`` speaks KServe v1, the Open Inference Protocol v2 and
Seldon's v0.1 over it, and ``serving.model_server`` is the one process serving one model with all three.
"""
