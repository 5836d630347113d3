"""Katib: hyperparameter tuning (Experiments, Suggestions, Trials) as kubeflow/katib does it."""
