#!/usr/bin/env bash
# Stand-ins for the images seeds 002 and 003 name, built from Debian packages with Podman, for machines
# that reach no image registry (where one is reachable, pull the real ones instead):
#
#   docker.io/alpine/git:latest                    git and ssh (seed 002's clone step)
#   docker.io/benjamintanweihao/kubeflow-mnist:latest  Python with scikit-learn, at the conda path the seed
#                                                  runs (/opt/conda/envs/kubeflow-mnist/bin/python)
#   docker.io/tensorflow/tensorflow:1.14.0-py3     Python with numpy (seed 003's my_divmod imports numpy)
#   docker.io/library/python:3.7                   Debian's Python (3.11) standing in for kfp 1.x's default
#                                                  base image (seed 003's add steps are plain Python)
#
# Each is FROM a Debian Python base with apt (mmdebstrap, ~30 s once); each build is skipped when the image exists.
# They live in a container store of their own (store.sh), never in the machine's usual one.
# Needs root, podman, runc and mmdebstrap (apt-get install -y podman runc mmdebstrap).
#   examples/kfp_v1/images/build.sh            # build what is missing
#   REBUILD=1 examples/kfp_v1/images/build.sh  # build again
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/store.sh"
flags=(--runtime runc)
[ -d /run/systemd/system ] || flags+=(--cgroup-manager cgroupfs --events-backend file)
podman() { command podman "${flags[@]}" "$@"; }
base=localhost/millpond-examples/debian-python:bookworm
exec 9>"$store/build.lock"  # one build at a time (two seeds' scripts started together)
flock 9

have() { [ -z "${REBUILD:-}" ] && podman image exists "$1"; }

if ! have "$base"; then
  mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  echo "building $base from $mirror (mmdebstrap)" >&2
  mmdebstrap --quiet --variant=apt --include=python3 bookworm "$work/base.tar" "$mirror"
  podman import --change 'CMD ["python3"]' "$work/base.tar" "$base" >/dev/null
fi

build() {  # build TAG CONTAINERFILE
  local tag="$1" file="$2"
  if have "$tag"; then echo "$tag: present" >&2; return; fi
  echo "building $tag" >&2
  podman build --quiet --network host --build-arg "BASE=$base" -t "$tag" -f "$here/$file" "$here" >/dev/null
}
build docker.io/alpine/git:latest Containerfile.git
build docker.io/benjamintanweihao/kubeflow-mnist:latest Containerfile.mnist
build docker.io/tensorflow/tensorflow:1.14.0-py3 Containerfile.numpy
if ! have docker.io/library/python:3.7; then podman tag "$base" docker.io/library/python:3.7; fi
