"""``python -m millpond.serving.with_data NAMESPACE NAME DATASET:/PATH… -- COMMAND…``: a command with datasets.

``arena serve custom --data DATASET:/PATH`` mounts a dataset at PATH inside the serving container
(Arena's chart: a PVC volume and a volumeMount). A custom predictor's command runs on this host,
where PATH does not exist; the replica supervisor starts the container's command as written. So
``arena serve`` writes the volumes and mounts KServe-style in the manifest, and runs the command
through this small launcher, as a training job's instances see their ``--data``:

- each DATASET is the namespace's Dataset (its shared mount, leased for as long as the command
  runs, as a training job leases it), else the named local volume ``$MILLPOND_HOME/volumes/DATASET``
  (what a PVC is on one machine);
- the command runs in a private mount namespace (bubblewrap, ``runners.sandbox``) with each of them
  bound at its PATH, so ``/mnt/models`` in the command means the dataset;
- SIGTERM/SIGINT are passed on to it, and its exit status is this process's.

A dataset that does not exist, or no bubblewrap, ends it with one ``error:`` line and exit status
2 before the command starts: the replica supervisor shows that line as why the model did not load.

A replica that runs in its image (``serving.placement``) cannot run this launcher there: the
supervisor reads the launcher's words back (:func:`parse_command`) and binds the same sources
(:func:`sources`) into the container at the same paths.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from millpond.datasets.shared_mounts import release, use
from millpond.errors import MillpondError, UserError
from millpond.runners.base import Bind
from millpond.runners.sandbox import wrap
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.resources import ResourceStore

MODULE = "millpond.serving.with_data"


def command(namespace: str, name: str, mounts: list[tuple[str, str]], argv: list[str]) -> list[str]:
    """The launcher's command line: run ``argv`` with each (dataset, path) of ``mounts`` bound."""
    return [sys.executable, "-m", MODULE, namespace, name, *(f"{d}:{p}" for d, p in mounts), "--", *argv]


def _source(dataset: str, namespace: str, name: str, held: ExitStack) -> Path:
    if ResourceStore().get("Dataset", dataset, namespace) is not None:
        shared = use(dataset, namespace, f"InferenceService {namespace}/{name}")
        held.callback(release, shared)
        return shared.folder
    volume = volume_folders.find(load_settings().volumes_dir, namespace, dataset)  # a PVC of its namespace
    if volume.is_dir():
        return volume
    raise UserError(f"--data {dataset}: no Dataset {dataset} in namespace {namespace} and no volume {volume}")


def parse_command(argv: list[str]) -> tuple[str, str, list[tuple[str, str]], list[str]] | None:
    """(namespace, name, mounts, command) of a command line :func:`command` made; None for any other."""
    if len(argv) < 3 or argv[1:3] != ["-m", MODULE]:
        return None
    try:
        return _parse(argv[3:])
    except UserError:
        return None


def sources(namespace: str, name: str, mounts: list[tuple[str, str]], held: ExitStack) -> list[Bind]:
    """Each (dataset, path) as a bind of its folder here, each dataset's mount leased until ``held`` closes."""
    return [Bind(_source(dataset, namespace, name, held), path) for dataset, path in mounts]


def run(namespace: str, name: str, mounts: list[tuple[str, str]], argv: list[str]) -> int:
    """Mount, run ``argv`` bound, pass signals on; its exit status."""
    with ExitStack() as held:
        binds = sources(namespace, name, mounts, held)
        wrapped = wrap(argv, binds, Path.cwd())
        child = subprocess.Popen(wrapped)

        def forward(signum: int, _frame: object) -> None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, forward)
        code = child.wait()
        return code if code >= 0 else 128 - code


def _parse(args: list[str]) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    if "--" not in args or args.index("--") < 2:
        raise UserError(f"usage: python -m {MODULE} NAMESPACE NAME DATASET:/PATH... -- COMMAND...")
    cut = args.index("--")
    mounts = []
    for value in args[2:cut]:
        dataset, sep, path = value.partition(":")
        if not sep or not dataset or not path.startswith("/"):
            raise UserError(f"{value!r} must be DATASET:/PATH")
        mounts.append((dataset, path))
    if not args[cut + 1:]:
        raise UserError("no command after --")
    return args[0], args[1], mounts, args[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    try:
        namespace, name, mounts, command_line = _parse(list(sys.argv[1:] if argv is None else argv))
        return run(namespace, name, mounts, command_line)
    except MillpondError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
