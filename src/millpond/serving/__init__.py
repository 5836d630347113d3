"""Serving trained models locally the way KServe and Seldon users do (issue 16).

``serving.models`` loads a model directory (scikit-learn, PyTorch) behind one small interface,
``serving.protocols`` speaks KServe v1, the Open Inference Protocol v2 and Seldon's v0.1 over it,
and ``serving.model_server`` is the one process that serves one model with all three.
"""
