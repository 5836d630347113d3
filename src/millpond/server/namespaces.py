"""Every namespace a request names is a DNS-1123 label, or the request is refused with 400 and why.

The path (``/jobs/{namespace}/{name}``, ``/serving/{namespace}/...``), the query (``?namespace=``)
and the bodies that carry one (an experiment, a pipeline, a recurring run) are checked with
``names.check_namespace``, the rule the CLI and every kind's manifest checks use, so that the API
neither stores what it could not serve back nor answers a 404 that hides a typo. An empty
namespace is no namespace (KFP's single-user clients send ``namespace=""``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Request
from pydantic import AfterValidator

from millpond.names import check_namespace


async def namespace_checked(request: Request) -> None:
    """The app-wide dependency: the path's and the query's ``namespace``, when given (async: no thread hop)."""
    for where, value in (("path namespace", request.path_params.get("namespace")),
                         ("query parameter namespace", request.query_params.get("namespace"))):
        if value:
            check_namespace(str(value), where)


def _body_namespace(value: str | None) -> str | None:
    return check_namespace(value, "namespace") if value else value


BodyNamespace = Annotated[str | None, AfterValidator(_body_namespace)]
"""A body's optional ``namespace`` field: a UserError (400, the handler's KFP shape) when it is no label."""
