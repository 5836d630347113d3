#!/bin/sh
# The command arena runs in each instance (the seed's ./launch-example.sh): train.py on $DATA_DIR.
#   arena submit pytorch --workers 2 --working-dir "$PWD" --data imagenet:/data \
#       -e DATA_DIR=/data/imagenet -e PYTHON="$(command -v python)" ./train.sh
# $PYTHON is the interpreter with torch and Pillow (default: python3 on the PATH); $EPOCHS (default 2)
# and $CHECKPOINT (a file rank 0 writes, none by default) pass on to train.py, as do this script's arguments.
set -eu
: "${DATA_DIR:?set DATA_DIR to the folder holding train/ and val/, e.g. -e DATA_DIR=/data/imagenet}"
here=$(dirname "$0")
set -- --data "$DATA_DIR" --epochs "${EPOCHS:-2}" "$@"
if [ -n "${CHECKPOINT:-}" ]; then
  set -- "$@" --checkpoint "$CHECKPOINT"
fi
echo "instance ${RANK:-0} of ${WORLD_SIZE:-1}: $(hostname), master ${MASTER_ADDR:-none}:${MASTER_PORT:-none}"
exec "${PYTHON:-python3}" "$here/train.py" "$@"
