"""Katib (kubeflow.org/v1beta1 Experiment, Suggestion, Trial): hyperparameter tuning on this machine."""
