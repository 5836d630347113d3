"""A custom predictor container's environment and command line, as the kubelet makes them.

``env`` entries are a value, or ``valueFrom`` a Secret's or ConfigMap's key (``secretKeyRef``,
``configMapKeyRef``; ``optional: true`` leaves the variable out when the key is missing). On one
machine those are the home's secrets and config maps (``store.secrets``: ``millpond secret
create``, or a Secret applied with the manifest), as a Dataset's ``secretKeyRef`` reads them.
A pod's own fields (``fieldRef``, ``resourceFieldRef``) have no meaning here and are refused.

Kubernetes expands ``$(VAR)`` in ``command``, ``args`` and in later ``env`` values from the
variables defined before (``$$`` is a literal ``$``; a reference to an undefined variable stays
as written): :func:`expand` is that rule (Kubernetes' ``third_party/forked/golang/expansion``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.errors import UserError
from millpond.serving.spec import EnvVar
from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore, MissingConfig

_REFS = {"secretKeyRef": "secret", "configMapKeyRef": "configmap"}


def expand(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with each ``$(NAME)`` of ``variables`` replaced, ``$$`` made ``$``, the rest as written."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            end = text.find(")", i + 2)
            if end < 0:  # no closing parenthesis: kept as written
                out.append(text[i:])
                break
            name = text[i + 2:end]
            out.append(variables[name] if name in variables else text[i:end + 1])
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def resolve(env: tuple[EnvVar, ...], base: Mapping[str, str] | None = None,
            configs: ConfigStore | None = None) -> dict[str, str]:
    """The container's variables in order, each value expanded against ``base`` and those before it.

    UserError (one line naming the variable, never a secret's value) for a reference that cannot be read.
    """
    configs = configs or ConfigStore(load_settings().home)
    known = dict(base or {})
    resolved: dict[str, str] = {}
    for item in env:
        if item.value_from is None:
            value: str | None = expand(item.value or "", known)
        else:
            value = _referenced(item.name, item.value_from, configs)
        if value is None:
            continue
        resolved[item.name] = known[item.name] = value
    return resolved


def _referenced(name: str, value_from: dict[str, Any], configs: ConfigStore) -> str | None:
    for field, kind in _REFS.items():
        ref = value_from.get(field)
        if ref is None:
            continue
        source, key, optional = str(ref.get("name") or ""), str(ref.get("key") or ""), bool(ref.get("optional"))
        try:
            values = configs.get(kind, source)
        except MissingConfig:
            if optional:
                return None
            raise UserError(f"env {name}: {kind} {source!r} not found (millpond {kind} create {source} ...)") from None
        if key not in values:
            if optional:
                return None
            raise UserError(f"env {name}: {kind} {source!r} has no key {key!r}")
        return values[key]
    shown = ", ".join(sorted(value_from)) or "nothing"
    raise UserError(f"env {name}: valueFrom {shown} cannot be read here (millpond reads secretKeyRef and "
                    "configMapKeyRef; a pod's own fields do not exist on one machine)")
