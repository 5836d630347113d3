#!/usr/bin/env bash
# Seed 002 on one machine: its git repository (local), its ssh key (a secret), then the run.
#
#   examples/kfp_v1/seed002_fashion_mnist/run.sh [PIPELINE]
#
# PIPELINE: pipeline.tar.gz (default: what dsl-compile made, as uploaded in the seed), pipeline.py
# (the v1 source: millpond compiles it with kfp 1.8.22 in a side environment, once) or
# pipeline_v2.py (the same pipeline in kfp 2). PYTHON: a python with numpy and scikit-learn
# (default: python3), which the steps run; REPO: where the repository goes (default
# /var/tmp/kubeflow-mnist.git: not /tmp, which each kfp 1.x step has of its own, as a pod).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pipeline="${1:-$here/pipeline.tar.gz}"
python="$(command -v "${PYTHON:-python3}")"
repo="$("$python" "$here/make_repo.py" "${REPO:-/var/tmp/kubeflow-mnist.git}")"

keys="$(mktemp -d)"
trap 'rm -rf "$keys"' EXIT
ssh-keygen -q -t ed25519 -N '' -f "$keys/id_rsa"   # the seed's deploy key, here a throwaway one
millpond secret create ssh-key-secret --from-file "id_rsa=$keys/id_rsa" --replace

millpond run "$pipeline" -p repo_url="$repo" -p python="$python"
