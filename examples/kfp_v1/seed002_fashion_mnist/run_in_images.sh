#!/usr/bin/env bash
# Seed 002 in its images: each step runs in the image the seed names (git clone in alpine/git, the
# preprocessing and training in benjamintanweihao/kubeflow-mnist with its conda Python), as on Kubeflow.
#
#   examples/kfp_v1/seed002_fashion_mnist/run_in_images.sh [PIPELINE]
#
# Needs Podman (apt-get install -y podman runc). Where the images cannot be pulled (no registry reachable),
# ../images/build.sh makes stand-ins from Debian packages first. The repository is served by `git daemon`
# on 127.0.0.1 (the steps share the host's network) and cloned with a git:// URL, as the seed suggests for a
# repository that needs no key; the ssh key is still mounted from its secret, as in the seed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pipeline="${1:-$here/pipeline.tar.gz}"
"$here/../images/build.sh"
. "$here/../images/store.sh"  # the stand-ins' own store: millpond's runs use it too
repo="$(python3 "$here/make_repo.py" "${REPO:-/var/tmp/kubeflow-mnist.git}")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
git daemon --reuseaddr --listen=127.0.0.1 --port="$port" --base-path="$(dirname "$repo")" --export-all \
  "$(dirname "$repo")" &
daemon=$!
keys="$(mktemp -d)"
trap 'kill "$daemon" 2>/dev/null; rm -rf "$keys"' EXIT
for _ in $(seq 50); do git ls-remote "git://127.0.0.1:$port/$(basename "$repo")" >/dev/null 2>&1 && break; sleep 0.1; done
ssh-keygen -q -t ed25519 -N '' -f "$keys/id_rsa"
millpond secret create ssh-key-secret --from-file "id_rsa=$keys/id_rsa" --replace

millpond run --runtime container "$pipeline" -p repo_url="git://127.0.0.1:$port/$(basename "$repo")" \
  -p python=/opt/conda/envs/kubeflow-mnist/bin/python
