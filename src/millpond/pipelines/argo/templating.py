"""Argo's ``{{...}}`` tags: which ones a workflow may use, and their substitution at run time.

Argo resolves a tag from one flat map of names (``inputs.parameters.size``,
``tasks.flip.outputs.parameters.out``, ``workflow.name``, ``item.a``) to text, and so does
this module. As Argo does (``validate.go``: ``checkValidWorkflowVariablePrefix``), only tags
under its own prefixes must resolve: any other ``{{x}}`` (a Python f-string's ``{{x}}`` inside
a lightweight component's source, a Jinja template in an argument) stays as written. Spaces
inside the braces are trimmed, as Argo trims them. Argo's ``{{=expr}}`` expressions (its
newer ``expr`` language, which kfp 1.x never writes) are refused where a workflow is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from millpond.errors import TaskFailure, UserError

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# Argo's prefixes whose tags must resolve; ``item`` resolves inside a loop and nowhere else.
_ARGO_PREFIXES = ("inputs.", "outputs.", "pod.", "node.", "tasks.", "steps.", "workflow.")
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_FORMS = [
    re.compile(rf"inputs\.parameters\.{_NAME}"),
    re.compile(rf"inputs\.artifacts\.{_NAME}"),  # as a ``from``; with ``.path``: where it is placed
    re.compile(rf"outputs\.parameters\.{_NAME}\.path"),
    re.compile(rf"outputs\.artifacts\.{_NAME}\.path"),
    re.compile(rf"(tasks|steps)\.{_NAME}\.outputs\.(parameters|artifacts)\.{_NAME}"),
    re.compile(r"(tasks|steps)\.[A-Za-z0-9_-]+\.(id|ip|status|startedAt|finishedAt|outputs\.result)"),
    re.compile(rf"workflow\.parameters\.{_NAME}"),
    re.compile(r"workflow\.(name|uid|namespace|serviceAccountName|creationTimestamp|status|duration|failures)"),
    re.compile(r"pod\.name"),
    re.compile(r"node\.name"),
]
MAX_TAG = 1000  # a tag longer than this is not one Argo or kfp writes


class TagError(TaskFailure):
    """A tag that cannot be resolved at run time (a task output that does not exist): the task fails."""


def tags(text: str) -> Iterator[str]:
    """The trimmed contents of every ``{{...}}`` in ``text``."""
    for match in _TAG.finditer(text):
        yield match.group(1).strip()


def is_argo_tag(tag: str) -> bool:
    """Whether Argo itself must resolve ``tag`` (its prefixes, ``item``, ``=expr``) rather than leave it."""
    return tag.startswith(_ARGO_PREFIXES) or tag == "item" or tag.startswith(("item.", "="))


def check_tag(tag: str, where: str) -> None:
    """Refuse a tag under Argo's prefixes that millpond does not resolve (UserError naming it and ``where``)."""
    if not is_argo_tag(tag) or tag == "item" or tag.startswith("item."):
        return
    if tag.startswith("="):
        raise UserError(f"{where}: Argo expression tag {{{{{tag[:60]}}}}} is not supported (kfp 1.x never writes one)")
    if len(tag) > MAX_TAG or not any(form.fullmatch(tag) for form in _FORMS):
        raise UserError(f"{where}: unsupported Argo tag {{{{{tag[:80]}}}}}")


def check_text(text: str, where: str) -> None:
    for tag in tags(text):
        check_tag(tag, where)


def substitute(text: str, values: Mapping[str, str], loop: bool = False) -> str:
    """``text`` with every Argo tag replaced from ``values`` (tag → text); other ``{{...}}`` left as written.

    ``loop`` says whether ``{{item}}``/``{{item.x}}`` must resolve (a task with withItems or
    withParam); outside a loop they stay literal, as in Argo. A tag under Argo's prefixes that
    ``values`` lacks is a ``TagError`` naming it.
    """
    def replace(match: re.Match[str]) -> str:
        tag = match.group(1).strip()
        if tag in values:
            return values[tag]
        is_item = tag == "item" or tag.startswith("item.")
        if (is_item and loop) or (not is_item and is_argo_tag(tag)):
            raise TagError(f"cannot resolve {{{{{tag[:80]}}}}}")
        return match.group(0)

    return _TAG.sub(replace, text)


def value_text(value: object) -> str:
    """A parameter value as Argo passes it: strings as they are, anything else as compact JSON.

    Argo writes loop items that are numbers or maps with Go's JSON encoder; a float that is a
    whole number is written as an integer, as Go's encoder does for ``float64`` 3.0 (``3``).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def item_values(item: object) -> dict[str, str]:
    """The tags one loop item defines: ``item``, and ``item.KEY`` for each key of a map item."""
    values = {"item": value_text(item)}
    if isinstance(item, dict):
        for key, child in item.items():
            values[f"item.{key}"] = value_text(child)
    return values


def substitute_value(value: Any, values: Mapping[str, str], loop: bool = False) -> Any:
    """``value`` (a withItems entry: JSON) with tags substituted in every string it holds, keys too."""
    if isinstance(value, str):
        return substitute(value, values, loop)
    if isinstance(value, list):
        return [substitute_value(child, values, loop) for child in value]
    if isinstance(value, dict):
        return {substitute(str(k), values, loop): substitute_value(v, values, loop) for k, v in value.items()}
    return value


def loop_items(with_param: str, values: Mapping[str, str], where: str) -> list[Any]:
    """The items of a ``withParam``: the tag resolved, then read as a JSON list, as Argo reads it.

    Argo fails the task when the text is not a JSON list ("withParam value could not be
    parsed as a JSON list"); so does this, naming the start of the text.
    """
    text = substitute(with_param, values)
    try:
        items = json.loads(text)
    except (ValueError, RecursionError):
        raise TagError(f"{where}: withParam value is not a JSON list: {text[:80]!r}") from None
    if not isinstance(items, list):
        raise TagError(f"{where}: withParam value is not a JSON list: {text[:80]!r}")
    return items
