"""The one type of every ``-n/--namespace`` option of ``millpond`` and ``arena``: a DNS-1123 label.

Checked while the command line is parsed, before a command does anything, so that a job, a
dataset or a queue can never be recorded in a namespace the REST API cannot reach
(``-n '../x'``, ``-n KUBE``): one ``error:`` line naming the option and the value, exit 2.
"""

from __future__ import annotations

import click

from millpond.names import check_namespace


class NamespaceType(click.ParamType):
    """A namespace (``names.check_namespace``); a bad one raises ``UserError``, which both CLIs print as one line."""

    name = "namespace"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        where = "/".join(param.opts) if param is not None and param.opts else "--namespace"
        return check_namespace(str(value), where)


NAMESPACE = NamespaceType()
