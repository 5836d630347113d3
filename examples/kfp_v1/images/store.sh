# Sourced by build.sh and the seeds' run_in_images.sh: the stand-in images live in a container store of their
# own (STORE, default ~/.cache/millpond-examples/containers), so they never stand in for the real images
# (alpine/git, python:3.7, …) anywhere else on this machine: Podman and millpond read CONTAINERS_STORAGE_CONF.
store="${STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/millpond-examples/containers}"
mkdir -p "$store"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s/graph"\nrunroot = "%s/run"\n' "$store" "$store" \
  > "$store/storage.conf"
export CONTAINERS_STORAGE_CONF="$store/storage.conf"
