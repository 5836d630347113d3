"""``millpond server``: the KFP v2beta1 REST API (what ``kfp.Client`` speaks) over the same store as the CLI.

A run created here is recorded by the same ``prepare_run`` as ``millpond run`` and executed
by the same engine in a worker process, so the CLI and the API see one history.
"""
