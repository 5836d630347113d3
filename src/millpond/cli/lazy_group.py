"""A click group whose subcommands are imported when used, not when ``millpond`` starts.

``millpond apply`` has no use for the Arena, serving or server commands, and importing them all
(``millpond train`` alone pulls in the serving stack) cost every command ~0.15 s of start-up before it
did anything. Each lazy subcommand is named by ``"module:attribute"`` and imported on first lookup;
``millpond --help`` lists them all, so it imports them all. This is click's documented LazyGroup.
"""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    """``lazy_subcommands``: command name -> ``"module:attribute"`` of the click command it names."""

    def __init__(self, *args: Any, lazy_subcommands: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands and cmd_name not in self.commands:
            module, attribute = self.lazy_subcommands[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_subcommands[cmd_name]} is no click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)
