"""Katib's suggestion services and its median-stop early stopping, as a library (api.py, earlystopping.py).

The libraries the algorithms run on (hyperopt, optuna, cmaes, scikit-optimize) are imported only when an
experiment uses them: ``pip install 'millpond[katib]'``.
"""
