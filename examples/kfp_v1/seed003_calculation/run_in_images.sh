#!/usr/bin/env bash
# Seed 003 in its images: my_divmod in tensorflow/tensorflow:1.14.0-py3 (where numpy is), the add steps in
# python:3.7 (func_to_container_op's default), as on Kubeflow. Needs Podman; where the images cannot be
# pulled, ../images/build.sh makes stand-ins from Debian packages first.
#
#   examples/kfp_v1/seed003_calculation/run_in_images.sh [PIPELINE] [a] [b] [c]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../images/build.sh"
. "$here/../images/store.sh"  # the stand-ins' own store: millpond's runs use it too
millpond run --runtime container "${1:-$here/pipeline.yaml}" -p a="${2:-3}" -p b="${3:-7}" -p c="${4:-17}"
