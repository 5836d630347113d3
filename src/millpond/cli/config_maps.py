"""``millpond secret …`` and ``millpond configmap …``: the objects kfp-kubernetes reads.

Shaped like ``kubectl create secret generic``, so the command a platform error suggests
is one the user already knows. ``-n NAMESPACE`` (``default`` when not given) names the namespace, as
kubectl's: a run, job or model server of that namespace is what reads it. Nothing here ever prints a
value: listings show names and keys, and an argument that cannot be parsed is named by position, not echoed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from millpond.errors import UserError
from millpond.settings import load_settings
from millpond.store.secrets import DEFAULT_NAMESPACE, ConfigStore, MissingConfig


def _store() -> ConfigStore:
    return ConfigStore(load_settings().home)


def _collect(kind: str, literals: list[str], files: list[str]) -> dict[str, str]:
    """Key/value pairs from ``--from-literal KEY=VALUE`` and ``--from-file [KEY=]PATH``."""
    data: dict[str, str] = {}

    def add(key: str, value: str) -> None:
        if key in data:
            raise UserError(f"{kind} key {key!r} is given twice")
        data[key] = value

    for position, item in enumerate(literals, start=1):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--from-literal #{position} must be KEY=VALUE (no KEY= found)")
        add(key, value)
    for item in files:
        key, sep, path_text = item.partition("=")
        if not sep:
            key, path_text = Path(item).name, item
        path = Path(path_text).expanduser()
        if not path.is_file():
            raise UserError(f"--from-file {path_text}: no such file")
        try:
            add(key, path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"--from-file {path_text}: not UTF-8 text (binary values are not supported)") from None
    return data


def _in(namespace: str) -> str:
    return "" if namespace == DEFAULT_NAMESPACE else f" in namespace {namespace!r}"


def _create(kind: str, name: str, literals: list[str], files: list[str], replace: bool, namespace: str) -> None:
    _store().create(kind, name, _collect(kind, literals, files), replace=replace, namespace=namespace)
    print(f"{kind} {name!r} {'replaced' if replace else 'created'}{_in(namespace)}", file=sys.stderr)


def _list(kind: str, output: str, namespace: str | None) -> None:
    """One namespace's (``default``'s unless ``-n``), or every namespace's with ``-A`` (a NAMESPACE column)."""
    rows = _store().everywhere(kind, namespace)
    if output == "json":
        sys.stdout.write(json.dumps([{"name": n, **({} if namespace else {"namespace": ns}), "keys": keys}
                                     for ns, n, keys in rows], indent=2) + "\n")
        return
    if not rows:
        print(f"no {kind}s{_in(namespace) if namespace else ''}", file=sys.stderr)
        return
    width = max(len("NAME"), *(len(n) for _, n, _ in rows))
    spaces = max(len("NAMESPACE"), *(len(ns) for ns, _, _ in rows))
    print(("" if namespace else f"{'NAMESPACE':<{spaces}}  ") + f"{'NAME':<{width}}  KEYS")
    for ns, name, keys in rows:
        print(("" if namespace else f"{ns:<{spaces}}  ") + f"{name:<{width}}  {','.join(keys)}")


def _delete(kind: str, name: str, namespace: str) -> None:
    try:
        _store().delete(kind, name, namespace)
    except MissingConfig as exc:
        raise UserError(str(exc)) from None
    print(f"{kind} {name!r} deleted{_in(namespace)}", file=sys.stderr)


def _group(kind: str, plural: str) -> click.Group:
    """One sub-command group per kind; both behave the same."""
    group = click.Group(kind, help=f"Manage {plural} that pipelines read through kfp-kubernetes.")
    name_arg = click.argument("name", metavar="NAME")
    namespace_opt = click.option("--namespace", "-n", default=DEFAULT_NAMESPACE, show_default=True,
                                 help=f"The namespace of the {kind} (a run, job or model server reads its own's).")

    @group.command("create", help=f"Create a {kind} from literal values and files.")
    @name_arg
    @click.option("--from-literal", "from_literal", multiple=True, help="KEY=VALUE (repeatable).")
    @click.option(
        "--from-file", "from_file", multiple=True,
        help="[KEY=]PATH: the file's text under KEY, or its name (repeatable).",
    )
    @click.option("--replace", is_flag=True, help="Overwrite one that exists.")
    @namespace_opt
    def create(name: str, from_literal: tuple[str, ...], from_file: tuple[str, ...], replace: bool,
               namespace: str) -> None:
        _create(kind, name, list(from_literal), list(from_file), replace, namespace)

    @group.command("list", help=f"List {plural} by name with their keys (never their values).")
    @click.option(
        "--output", "-o", type=click.Choice(["table", "json"]), default="table", help="table (default) or json."
    )
    @namespace_opt
    @click.option("--all-namespaces", "-A", "everywhere", is_flag=True, help="Every namespace's, with its namespace.")
    def list_(output: str, namespace: str, everywhere: bool) -> None:
        _list(kind, output, None if everywhere else namespace)

    @group.command("delete", help=f"Delete a {kind}.")
    @name_arg
    @namespace_opt
    def delete(name: str, namespace: str) -> None:
        _delete(kind, name, namespace)

    return group


secret_group = _group("secret", "secrets")
configmap_group = _group("configmap", "config maps")
