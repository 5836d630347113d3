#!/usr/bin/env bash
# Set millpond up in .venv/ (creating it if needed), then run the demo or the tests.
#   bash scripts/setup.sh demo          # install, then run examples/digits_pipeline.py
#   bash scripts/setup.sh test [ARGS]   # install with test extras, then pytest [ARGS]
# Debian packages millpond uses (bubblewrap for task sandboxes, fuse3 for dataset mounts, openmpi-bin for mpi
# training jobs, jq for the scripts that read `arena get -o json`, podman for tasks in their container images,
# postgresql for the tests' PostgreSQL server, and the container tests' image and registry tools)
# are installed when running
# as root with apt-get; otherwise the one command that would install them is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-demo}"
shift || true
python="${PYTHON:-python3}"

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# FUSE mounts of datasets: fusermount3 and libfuse3 (the fuse3 package brings both).
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
# MPI training jobs (arena submit mpi): the launcher runs Open MPI's mpirun (openmpi-bin brings its libraries).
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
# The tests build a real MPI_Allreduce program: mpicc (openmpi-bin's) needs Open MPI's headers.
if [ "$mode" = test ] && ! echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1; then
  missing+=(libopenmpi-dev)
fi
# Scripts written for Arena poll a job with `arena get NAME -o json | jq .status` (seed 000's training step).
command -v jq >/dev/null 2>&1 || missing+=(jq)
# The store tests also run on PostgreSQL (tests/pg_server.py starts Debian's server from /usr/lib/postgresql/*/bin).
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
# The web UI's browser tests (tests/ui/test_server_ui.py) drive Debian's Chromium through Playwright.
[ -x /usr/bin/chromium ] || missing+=(chromium)
# Tasks in their container images (millpond.runners.containers): Podman with runc (crun refuses cgroups in
# hybrid mode; millpond passes --runtime runc itself, so no containers.conf is written), and what Podman
# needs beside it: fuse-overlayfs and slirp4netns for rootless storage and networks, newuidmap (uidmap),
# the storage configuration (containers-storage's /usr/share/containers/storage.conf), and catatonit, the init
# `podman run --init` starts (only recommended by Debian's podman; millpond runs every container with --init).
command -v podman >/dev/null 2>&1 || missing+=(podman)
{ command -v runc || [ -x /usr/sbin/runc ]; } >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
command -v fuse-overlayfs >/dev/null 2>&1 || missing+=(fuse-overlayfs)
command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
[ -f /usr/share/containers/storage.conf ] || missing+=(containers-storage)
if [ "$mode" = test ]; then
  # The container tests make their own images and registry, as no image registry is reachable
  # (tests/containers_support.py): a Debian Python base with mmdebstrap, a FROM-scratch image around a
  # static busybox (busybox-static; Debian's busybox package is dynamically linked), Debian's
  # docker-registry with htpasswd credentials (apache2-utils), and skopeo to read what a registry holds.
  command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
  [ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null)" = "install ok installed" ] || missing+=(busybox-static)
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
  command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
fi
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages: ${missing[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "millpond: missing Debian packages: ${missing[*]} — install them with: sudo apt-get install -y ${missing[*]}" >&2
  fi
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
# millpond is installed editable: compile its bytecode once, so no command recompiles it at start-up
# (some machines set PYTHONDONTWRITEBYTECODE, which would make every start pay for it).
compile_bytecode() { .venv/bin/python -m compileall -q src >/dev/null; }
# install EXTRAS [PIP-ARGS]: pip install -e '.[EXTRAS]', skipped when .venv already holds exactly that (the
# stamp is pyproject.toml's hash and the extras: the install is editable, so only a changed pyproject.toml
# needs pip again; a no-op pip run still costs ~10 s).
install() {
  local extras="$1" stamp
  shift
  stamp="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
  [ "$(cat .venv/.millpond-installed 2>/dev/null)" = "$stamp" ] && return 0
  .venv/bin/python -m pip install -q "$@" -e ".[$extras]"
  compile_bytecode
  echo "$stamp" > .venv/.millpond-installed
}
case "$mode" in
  demo)
    install examples,s3
    exec .venv/bin/millpond run examples/digits_pipeline.py "$@"
    ;;
  test)
    install test
    exec .venv/bin/python -m pytest "$@"
    ;;
  *)
    echo "usage: bash scripts/setup.sh demo|test [ARGS]" >&2
    exit 2
    ;;
esac
