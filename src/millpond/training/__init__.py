"""Training jobs: Arena's model (submit, list, get, logs, delete) run by a background supervisor per job."""
