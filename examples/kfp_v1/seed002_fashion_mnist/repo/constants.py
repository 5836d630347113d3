"""Where the pipeline clones this repository (the pipeline's volume is mounted at /workspace)."""
PROJECT_ROOT = '/workspace/kubeflow-mnist'
