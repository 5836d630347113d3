"""``millpond secret …`` and ``millpond configmap …``: the objects kfp-kubernetes reads.

Shaped like ``kubectl create secret generic``, so the command a platform error suggests
is one the user already knows. Nothing here ever prints a value: listings show names and
keys, and an argument that cannot be parsed is named by position, not echoed.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from millpond.errors import UserError
from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore, MissingConfig


class Format(str, Enum):
    table = "table"
    json = "json"


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


def _create(kind: str, name: str, literals: list[str], files: list[str], replace: bool) -> None:
    _store().create(kind, name, _collect(kind, literals, files), replace=replace)
    print(f"{kind} {name!r} {'replaced' if replace else 'created'}", file=sys.stderr)


def _list(kind: str, output: Format) -> None:
    rows = _store().list(kind)
    if output == Format.json:
        sys.stdout.write(json.dumps([{"name": n, "keys": keys} for n, keys in rows], indent=2) + "\n")
        return
    if not rows:
        print(f"no {kind}s", file=sys.stderr)
        return
    width = max(len("NAME"), *(len(n) for n, _ in rows))
    print(f"{'NAME':<{width}}  KEYS")
    for name, keys in rows:
        print(f"{name:<{width}}  {','.join(keys)}")


def _delete(kind: str, name: str) -> None:
    try:
        _store().delete(kind, name)
    except MissingConfig as exc:
        raise UserError(str(exc)) from None
    print(f"{kind} {name!r} deleted", file=sys.stderr)


NameArg = Annotated[str, typer.Argument(help="A DNS-1123 name: lowercase letters, digits, '-' and '.'.")]
LiteralOpt = Annotated[Optional[list[str]], typer.Option("--from-literal", help="KEY=VALUE (repeatable).")]
FileOpt = Annotated[Optional[list[str]], typer.Option("--from-file", help="[KEY=]PATH: the file's text under KEY, or its name (repeatable).")]
ReplaceOpt = Annotated[bool, typer.Option("--replace", help="Overwrite one that exists.")]
FormatOpt = Annotated[Format, typer.Option("--output", "-o", help="table (default) or json.")]


def _app(kind: str, plural: str) -> typer.Typer:
    """One sub-command group per kind; both behave the same."""
    app = typer.Typer(help=f"Manage {plural} that pipelines read through kfp-kubernetes.", no_args_is_help=True)

    @app.command("create", help=f"Create a {kind} from literal values and files.")
    def create(name: NameArg, from_literal: LiteralOpt = None, from_file: FileOpt = None, replace: ReplaceOpt = False) -> None:
        _create(kind, name, from_literal or [], from_file or [], replace)

    @app.command("list", help=f"List {plural} by name with their keys (never their values).")
    def list_(output: FormatOpt = Format.table) -> None:
        _list(kind, output)

    @app.command("delete", help=f"Delete a {kind}.")
    def delete(name: NameArg) -> None:
        _delete(kind, name)

    return app


secret_app = _app("secret", "secrets")
configmap_app = _app("configmap", "config maps")
