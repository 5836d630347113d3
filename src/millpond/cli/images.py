"""``millpond images``: the container images tasks run in — list them, pull one, prune what millpond pulled.

``list`` shows the runtime's images with whether millpond pulled each (``images.json`` in the home);
``pull`` pulls as a task would (pull policy, a ``kubernetes.io/dockerconfigjson`` Secret's
credentials), printing the runtime's progress; ``prune`` removes the images millpond pulled (never
one the user pulled or built) and any container of millpond's that is not running.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click

from millpond.errors import MillpondError, UserError
from millpond.runners.containers import images, pulled, runtimes, sweep
from millpond.runners.containers.command import ENGINE_LABEL
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore
from millpond.tables import format_table


def _runtime(name: str | None) -> ContainerRuntime:
    found = runtimes.find(name)
    if isinstance(found, str):
        raise MillpondError(f"no container runtime works here: {found}")
    return found


@click.group(name="images", invoke_without_command=True)
@click.pass_context
def images_group(ctx: click.Context) -> None:
    """Container images: list (the default), pull, prune."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(images_list)


@images_group.command("list")
@click.option("--runtime", "runtime_name", type=click.Choice(runtimes.RUNTIMES),
              help="Which runtime (default: the first that works).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def images_list(runtime_name: str | None, output: str) -> None:
    """The runtime's images; PULLED-BY says which millpond pulled."""
    runtime = _runtime(runtime_name)
    done = subprocess.run(runtime.argv("images", "--format", "json"), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise MillpondError(f"{runtime.name} images failed: {done.stderr.strip()[:300]}")
    listed = _parse_listing(done.stdout)
    ours = pulled.read(load_settings().home)
    rows = []
    for image in listed:
        names = image.get("Names") or [f"{image.get('Repository', '')}:{image.get('Tag', '')}"]
        for name in names if isinstance(names, list) else [str(names)]:
            rows.append({"image": name, "id": str(image.get("Id") or image.get("ID") or "")[:12],
                         "size": image.get("Size"), "pulled_by": "millpond" if name in ours else ""})
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(format_table(("IMAGE", "ID", "SIZE", "PULLED-BY"),
                            [[str(r["image"]), str(r["id"]), _size(r["size"]), str(r["pulled_by"])] for r in rows]))


def _parse_listing(text: str) -> list[dict[str, object]]:
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        return [item for item in json.loads(text) if isinstance(item, dict)]
    return [json.loads(line) for line in text.splitlines() if line.strip()]  # docker: one object a line


def _size(value: object) -> str:
    if isinstance(value, (int, float)):
        return f"{value / 1e6:.0f}MB"
    return str(value or "")


@images_group.command("pull")
@click.argument("image")
@click.option("--policy", "pull_policy", type=click.Choice(images.PULL_POLICIES), default="Always", show_default=True)
@click.option("--secret", "secrets", multiple=True, metavar="NAME",
              help="A kubernetes.io/dockerconfigjson Secret (millpond secret, kubectl) with the registry's "
                   "credentials.")
@click.option("--runtime", "runtime_name", type=click.Choice(runtimes.RUNTIMES))
def images_pull(image: str, pull_policy: str, secrets: tuple[str, ...], runtime_name: str | None) -> None:
    """Pull IMAGE as a task would, showing the runtime's progress."""
    runtime = _runtime(runtime_name)
    try:
        images.parse(image)
    except MillpondError as exc:
        raise UserError(str(exc)) from None
    store = ConfigStore(load_settings().home)
    configs = [images.dockerconfig_of(store.get("secret", name), f"secret {name!r}") for name in secrets]
    said = images.ensure(runtime, image, pull_policy, pull_secrets=configs, log=sys.stderr.buffer)
    click.echo(f"{images.parse(image).full}: {said}")


@images_group.command("prune")
@click.option("--runtime", "runtime_name", type=click.Choice(runtimes.RUNTIMES))
def images_prune(runtime_name: str | None) -> None:
    """Remove the images millpond pulled, and millpond's containers that are not running."""
    runtime = _runtime(runtime_name)
    stopped = set(sweep.labelled(runtime, ENGINE_LABEL)) - set(sweep.labelled(runtime, ENGINE_LABEL, running_only=True))
    sweep.remove(runtime, *sorted(stopped))
    home = load_settings().home
    removed = []
    for image, record in pulled.read(home).items():
        if record.get("runtime") != runtime.name:
            continue
        done = subprocess.run(runtime.argv("rmi", image), capture_output=True, text=True, timeout=300)
        if done.returncode == 0 or "image not known" in done.stderr or "No such image" in done.stderr:
            removed.append(image)
        else:
            click.echo(f"kept {image}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'in use'}",
                       err=True)
    pulled.forget(home, removed)
    click.echo(f"removed {len(removed)} image(s) and {len(stopped)} stopped container(s)")
