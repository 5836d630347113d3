"""Serving models as KServe does: InferenceService manifests, their predictor specs, model servers."""
