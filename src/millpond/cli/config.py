"""``millpond config set|get|unset|view``: the home's settings (``settings.json``).

``view`` also names the metadata database in force (``MILLPOND_DATABASE_URL``, else the
home's SQLite file), never with its password.

A setting's environment variable, when set, wins over what is stored here (``config get``
says which one is in force). Only the settings millpond knows are accepted, each with its own
values, so a typo is refused with one line instead of being stored and ignored.
"""

from __future__ import annotations

import json
import os

import click

from millpond.errors import UserError
from millpond.settings import CONFIGURABLE, SETTINGS_FILE, configured, load_settings, stored_settings
from millpond.store.db import redacted


def _key(key: str) -> tuple[str, tuple[str, ...]]:
    if key not in CONFIGURABLE:
        raise UserError(f"unknown setting {key!r}; settings: {', '.join(sorted(CONFIGURABLE))}")
    return CONFIGURABLE[key]


def _store(values: dict[str, str]) -> None:
    """Write the settings file whole, through a temporary file: a reader never sees half of it."""
    home = load_settings().home
    home.mkdir(parents=True, exist_ok=True)
    temporary = home / f".{SETTINGS_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, home / SETTINGS_FILE)


@click.group(name="config")
def config_group() -> None:
    """Settings kept in the home (MILLPOND_* environment variables win over them)."""


@config_group.command("set")
@click.argument("key")
@click.argument("value")
def config_set(key: str, value: str) -> None:
    """Set KEY to VALUE (gpu-fallback: cpu | none)."""
    variable, allowed = _key(key)
    if value not in allowed:
        raise UserError(f"{key} takes one of: {', '.join(allowed)} (not {value!r})")
    home = load_settings().home
    _store({**stored_settings(home), key: value})
    if os.environ.get(variable):
        click.echo(f"note: {variable} is set in this environment and wins over the stored {key}", err=True)


@config_group.command("unset")
@click.argument("key")
def config_unset(key: str) -> None:
    """Forget KEY (back to its default)."""
    _key(key)
    stored = stored_settings(load_settings().home)
    stored.pop(key, None)
    _store(stored)


@config_group.command("get")
@click.argument("key")
def config_get(key: str) -> None:
    """Print the value of KEY in force (``none`` when off)."""
    _key(key)
    click.echo(configured(load_settings().home, key) or "none")


@config_group.command("view")
def config_view() -> None:
    """Print every setting and its value in force, then the metadata database (its password hidden)."""
    settings = load_settings()
    for key in sorted(CONFIGURABLE):
        click.echo(f"{key}: {configured(settings.home, key) or 'none'}")
    click.echo(f"database: {redacted(settings.database_url)}")
