#!/usr/bin/env bash
# Seed 003 on one machine: add(divmod(a + 4, b).quotient, c).
#
#   examples/kfp_v1/seed003_calculation/run.sh [PIPELINE] [a] [b] [c]
#
# PIPELINE: pipeline.yaml (default: the compiled workflow), pipeline.py (the v1 source: millpond
# compiles it with kfp 1.8.22 in a side environment, once) or pipeline_v2.py (kfp 2). The seed's
# default a='a' is no number: its first step would fail, so a is given (3 by default).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
millpond run "${1:-$here/pipeline.yaml}" -p a="${2:-3}" -p b="${3:-7}" -p c="${4:-17}"
