"""``millpond dataset …``: mount, unmount, sync, load, clean, and where cached files are.

The Fluid objects themselves are applied with ``millpond apply -f``; these commands act on
an applied dataset's cache and access paths. Errors a user can fix (no such dataset, a
mount point in use, an unreachable UFS) are one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.errors import UnavailableError, UserError

if TYPE_CHECKING:
    from millpond.datasets.cache.engine import DatasetCache
    from millpond.datasets.mounts import DeadMount

FOLLOW_POLL_S = 0.2
NAMESPACE = click.option("--namespace", "-n", type=NAMESPACE_TYPE, default="default", show_default=True,
                         help="The dataset's namespace.")


def _cache(name: str, namespace: str) -> DatasetCache:
    from millpond.datasets.cache.engine import open_cache
    from millpond.datasets.mounts import clear_all_dead

    for dead in clear_all_dead(name, namespace):
        _say_dead(dead)
    return open_cache(name, namespace)


def _say_dead(dead: DeadMount | None) -> None:
    """A mount found dead (its daemon gone) and cleared by this command, said on stderr."""
    if dead is not None:
        record = dead.record
        click.echo(f"info: the mount of dataset {record.dataset} at {record.folder} was {dead.words}", err=True)


def _clear_dead_at(folder: Path) -> DeadMount | None:
    """The mount at ``folder``, if its daemon is gone: unmounted and forgotten before this command acts there."""
    from millpond.datasets.mounts import clear_dead

    dead = clear_dead(str(folder.expanduser().resolve()))
    _say_dead(dead)
    return dead


@contextmanager
def _ufs_errors(action: str, name: str) -> Iterator[None]:
    """UFS failures (unreachable endpoint, bad credentials: exit 1) and bad paths (exit 2) become one line."""
    from millpond.datasets.ufs import UfsError

    try:
        yield
    except UfsError as exc:
        raise UnavailableError(f"{action} {name}: {exc}") from None
    except FileNotFoundError as exc:
        raise UserError(f"{action} {name}: no such file or folder in the dataset: {exc.filename}") from None
    except PermissionError as exc:
        raise UserError(f"{action} {name}: {exc.strerror}: {exc.filename}") from None


@click.group("dataset")
def dataset_group() -> None:
    """Act on an applied dataset: mount it, load it into the cache, sync or clean it."""


@dataset_group.command("mount")
@click.argument("name")
@click.argument("folder", type=click.Path(path_type=Path))
@NAMESPACE
def mount_command(name: str, folder: Path, namespace: str) -> None:
    """Mount dataset NAME at FOLDER (FUSE); returns once ready, serves in the background."""
    from millpond.datasets.mounts import mount

    _clear_dead_at(folder)
    record = mount(name, folder, namespace)
    click.echo(
        f"dataset {name} mounted at {record.folder} (pid {record.pid}); "
        f"unmount with: millpond dataset unmount {record.folder}"
    )


@dataset_group.command("unmount")
@click.argument("folder", type=click.Path(path_type=Path))
def unmount_command(folder: Path) -> None:
    """Unmount a dataset mounted at FOLDER and stop its process."""
    from millpond.datasets.mounts import unmount

    dead = _clear_dead_at(folder)
    record = dead.record if dead is not None else unmount(folder)
    click.echo(f"unmounted {record.folder if record else folder}")


@dataset_group.command("mounts")
def mounts_command() -> None:
    """List the mounts this MILLPOND_HOME started (a shared one with who uses it; ``millpond ps`` lists all)."""
    from millpond.datasets.mounts import clear_dead, is_mounted, records
    from millpond.datasets.shared_mounts import users

    for record in records():
        dead = clear_dead(record.folder)  # a killed daemon's mount: reported once, unmounted, forgotten
        state = dead.words if dead is not None else "mounted" if is_mounted(record.folder) else "unmounted, ending"
        holders = "; ".join(lease.user for lease in users(record)) if record.shared else ""
        use = f"\tshared, used by {holders or 'nobody'}" if record.shared else ""
        click.echo(f"{record.dataset}\t{record.folder}\tpid {record.pid}\t{state}{use}")


@dataset_group.command("sync")
@click.argument("name")
@NAMESPACE
def sync_command(name: str, namespace: str) -> None:
    """List NAME's UFS now: new files appear, changed or removed ones leave the cache."""
    cache = _cache(name, namespace)
    with _ufs_errors("sync", name):
        count = cache.sync()
    click.echo(f"dataset {name}: {count} files listed")


@dataset_group.command("load")
@click.argument("name")
@click.argument("paths", nargs=-1)
@NAMESPACE
def load_command(name: str, paths: tuple[str, ...], namespace: str) -> None:
    """Load NAME's files (or only PATHS under it) into the cache, with progress.

    It creates a DataLoad named NAME-load-XXXXX (``millpond get dataloads`` lists it) and
    follows it to its end; interrupted, the DataLoad goes on in the background.
    """
    from millpond.datasets.cache.engine import normalize
    from millpond.datasets.operations import runner as operations
    from millpond.datasets.operations.generated import create
    from millpond.datasets.quantity import format_bytes

    cache = _cache(name, namespace)
    targets = list(paths) or ["/"]
    with _ufs_errors("load", name):  # bad paths are refused before any DataLoad exists
        tree = cache.namespace()
        for target in targets:
            inner = normalize(target)
            if not tree.under(inner) and not tree.is_folder(inner):
                raise FileNotFoundError(errno.ENOENT, "no such file or folder in the dataset", target)
    spec = {
        "dataset": {"name": name, "namespace": namespace},
        "target": [{"path": "/" + normalize(target)} for target in targets],
    }
    load = create("DataLoad", f"{name}-load-", namespace, spec, "dataset load")
    click.echo(f"dataload/{load.name} created", err=True)
    operations.start("DataLoad", load.name, namespace)
    status = _follow(name, load.name, namespace)
    if status.get("phase") != "Complete":
        message = (status.get("conditions") or [{}])[0].get("message") or status.get("phase", "?")
        raise UnavailableError(f"load {name}: DataLoad {load.name} failed: {message}")
    infos = status.get("infos") or {}
    fetched, seconds = int(infos.get("fetchedBytes", 0)), float(infos.get("seconds", 0))
    rate = fetched / seconds / 1e6 if seconds else 0.0
    files, cached = int(infos.get("files", 0)), int(infos.get("cachedFiles", -1))
    held = "cached" if cached in (-1, files) else (
        f"loaded, {cached} ({format_bytes(int(infos.get('cachedBytes', 0)))}) of them cached: "
        "the rest did not fit (the tiers' quota, or their disk)")
    click.echo(
        f"dataset {name}: {files} files ({format_bytes(int(infos.get('bytes', 0)))}) {held}; "
        f"fetched {infos.get('fetchedFiles', 0)} ({format_bytes(fetched)}) in {seconds:.2f}s ({rate:.1f} MB/s)"
    )


def _follow(dataset: str, name: str, namespace: str) -> dict[str, Any]:
    """Show the DataLoad's progress (bytes, rate, files, ETA) until it ends; its final status."""
    import time

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from millpond.datasets.operations.liveness import observed
    from millpond.datasets.operations.runner import TERMINAL
    from millpond.store.resources import ResourceStore

    store = ResourceStore()
    console = Console(stderr=True)
    columns = (
        TextColumn(f"load {dataset}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TextColumn("{task.fields[files]} files"), TimeRemainingColumn(),
    )
    try:
        with Progress(
            *columns, console=console, transient=not console.is_terminal, disable=not console.is_terminal
        ) as progress:
            task = progress.add_task("load", total=None, files=0)
            while True:
                found = store.get("DataLoad", name, namespace)
                if found is None:
                    raise UnavailableError(f"load {dataset}: DataLoad {name} was deleted before it ended")
                status = observed(store, found)  # a dead process is seen: resumed, or Failed saying so
                done = status.get("progress") or {}
                progress.update(task, completed=done.get("bytes", 0), total=done.get("totalBytes"),
                                files=done.get("files", 0))
                if status.get("phase") in TERMINAL:
                    return status
                time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        click.echo(f"DataLoad {name} goes on in the background (millpond get dataload {name})", err=True)
        raise


@dataset_group.command("clean")
@click.argument("name")
@NAMESPACE
def clean_command(name: str, namespace: str) -> None:
    """Drop everything NAME has cached (the UFS keeps the data)."""
    _cache(name, namespace).clean()
    click.echo(f"dataset {name}: cache cleaned")


@dataset_group.command("path")
@click.argument("name")
@click.argument("path", default="")
@NAMESPACE
def path_command(name: str, path: str, namespace: str) -> None:
    """Print the local file holding PATH of NAME, once it is completely cached (exit 1 if it is not) and
    every byte of it was checked against its CRC (a damaged block or length repaired from the UFS first).

    PATH is as in the FUSE mount: a mount without ``path`` sits at /<mount name> (Fluid's rule).
    """
    from millpond.datasets.path_hints import hint, under_mounts

    cache = _cache(name, namespace)
    with _ufs_errors("path", name):
        if cache.stat(path) is None:
            raise UserError(f"dataset {name} has no file {path!r}{hint(under_mounts(cache, path))}")
        local = cache.verified_path(path)  # checked (and repaired) before it is handed out
    if local is None:
        click.echo(f"{path} is not completely cached (millpond dataset load {name} {path})", err=True)
        sys.exit(1)
    click.echo(str(local))


@dataset_group.command("ls")
@click.argument("name")
@click.argument("path", default="")
@NAMESPACE
def ls_command(name: str, path: str, namespace: str) -> None:
    """List a folder of NAME: size, whether it is cached, name."""
    from millpond.datasets.path_hints import hint, under_mounts

    cache = _cache(name, namespace)
    with _ufs_errors("ls", name):
        names = cache.listdir(path)
        if names is None:
            raise UserError(f"dataset {name} has no folder {path!r}{hint(under_mounts(cache, path, folder=True))}")
        base = path.strip("/")
        for child in names:
            full = f"{base}/{child}" if base else child
            meta = cache.stat(full)
            if meta is None:
                click.echo(f"{'-':>12}  {'dir':6}  {child}/")
            else:
                cached = "cached" if cache.local_path(full) else "-"
                click.echo(f"{meta.size:>12}  {cached:6}  {child}")
