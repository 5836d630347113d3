"""Kubeflow Notebooks on one machine: the ``kubeflow.org`` Notebook kind, one JupyterLab server per Notebook."""
