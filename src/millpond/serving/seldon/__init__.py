"""Seldon Core v1's SeldonDeployment (``machinelearning.seldon.io``), served by the same supervisors and gateway
as KServe's InferenceServices.

``kinds`` names the kind, ``graph`` reads a predictor's inference graph into what millpond's supervisor
starts, ``manifests`` checks a document as Seldon's admission webhook does, ``objects`` stores and shows it
with the status Seldon's operator writes, ``supervisor`` serves its predictors (one revision each, the
traffic split between them), ``handler`` is its entry in the one registry of kinds.
"""
