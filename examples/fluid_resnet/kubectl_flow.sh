#!/usr/bin/env bash
# Seed 001's dataset steps with the seed's own kubectl commands, against millpond server.
#
#   millpond server &                # (or --tls with a token: see docs/guides/kubectl.md)
#   millpond kubeconfig --use        # kubectl's current context is now millpond
#   BUCKET=... S3_ENDPOINT=http://127.0.0.1:8333 S3_REGION=us-east-1 \
#   AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... examples/fluid_resnet/kubectl_flow.sh
#
# The bucket holds the images under imagenet/ (make_images.py puts them there). The seed writes its
# OSS keys into the Dataset; here they go into the Secret imagenet-s3 that dataset.yaml names.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${BUCKET:?the bucket holding imagenet/}" "${S3_ENDPOINT:?the S3 endpoint URL}"
: "${AWS_ACCESS_KEY_ID:?}" "${AWS_SECRET_ACCESS_KEY:?}"
S3_REGION="${S3_REGION:-us-east-1}"
KUBECTL="${KUBECTL:-kubectl}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat > "$work/secret.yaml" <<SECRET
apiVersion: v1
kind: Secret
metadata:
  name: imagenet-s3
stringData:
  aws.accessKeyId: "${AWS_ACCESS_KEY_ID}"
  aws.secretKey: "${AWS_SECRET_ACCESS_KEY}"
SECRET
"$KUBECTL" apply -f "$work/secret.yaml"

# dataset.yaml with its ${BUCKET}, ${S3_ENDPOINT} and ${S3_REGION} filled in (envsubst, without needing it)
sed -e "s|\${BUCKET}|${BUCKET}|g" -e "s|\${S3_ENDPOINT}|${S3_ENDPOINT}|g" -e "s|\${S3_REGION}|${S3_REGION}|g" \
    "$here/dataset.yaml" > "$work/dataset.yaml"

set -x
"$KUBECTL" create -f "$work/dataset.yaml"
"$KUBECTL" wait --for=jsonpath='{.status.phase}'=Bound dataset/imagenet --timeout=120s
"$KUBECTL" describe alluxioruntime imagenet
"$KUBECTL" describe dataset
"$KUBECTL" get pv,pvc
