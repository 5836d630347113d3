"""What a notebook's code finds without being told: the Kubernetes API, KFP, Fluid and Arena of this millpond.

In Kubeflow a notebook pod runs as its namespace's ``default-editor`` ServiceAccount: ``kubectl``, the
``kubernetes`` client and ``kfp.Client()`` (through the API server's service proxy to ``ml-pipeline``)
reach the cluster with the pod's token, in the pod's namespace. Here the server and its kernels get:

- ``KUBECONFIG``: a kubeconfig (0600, in the notebook's own folder, ``paths.folder``) whose one context is the
  running ``millpond server`` (``runners.listening``: its URL and CA), the notebook's namespace as its default,
  and the credential below. ``kubectl get pods`` lists the namespace's pods; ``kfp.Client()`` with no
  arguments loads it and reaches the KFP API through ``/api/v1/namespaces/NS/services/ml-pipeline:http/proxy/``
  (``server.service_proxy``), as it does from a laptop. ``KF_PIPELINES_ENDPOINT`` is deliberately not set:
  kfp.Client sends no credential with an endpoint taken from it, so a server that wants one would answer 401;
- the ServiceAccount's files, ``token`` and ``namespace`` (``serviceaccount/``, 0600), shown at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` when the server runs in a sandbox (kfp.Client reads the
  namespace there on a multi-user server) and named by ``KF_PIPELINES_SA_TOKEN_PATH`` (kfp's
  ``ServiceAccountTokenVolumeCredentials``);
- single-user mode: ``MILLPOND_HOME``, so ``arena``, ``millpond`` and the Fluid SDK (``from millpond import
  fluid``) act on this millpond's home, as the server does.

The credential, in single-user mode, is the server's own token when the server was started with
``--token-file`` (the file ``millpond kubeconfig`` reads too); a server started with ``MILLPOND_TOKEN``
leaves no copy to read, so the context has none. In multi-user mode it is a token that acts as
``system:serviceaccount:NS:default-editor`` (``notebooks.service_account``). The token is in no log,
status or page; the server's own secrets stay out of the environment (``runners.environment``).
Simplified: the kubeconfig is written when the server starts; a ``millpond server`` started later is
found at the notebook's next start.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from millpond.notebooks import paths
from millpond.runners.base import Bind
from millpond.runners.listening import ServerAddress, running_servers
from millpond.settings import Settings

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"  # where a pod finds its ServiceAccount's files
SA_TOKEN_ENV = "KF_PIPELINES_SA_TOKEN_PATH"  # kfp.client.KF_PIPELINES_SA_TOKEN_ENV
CONTEXT = "millpond"


@dataclass
class Defaults:
    """The environment of the notebook's defaults, and the bind of its ServiceAccount's folder (for a
    sandboxed server). ``env`` names files only, never a token."""

    env: dict[str, str] = field(default_factory=dict)
    binds: list[Bind] = field(default_factory=list)


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path`` (0600), replaced whole."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.tmp")
    partial.unlink(missing_ok=True)
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, path)


def server_token(server: ServerAddress) -> str | None:
    """The single-user server's own token, read from its ``--token-file`` (None without one)."""
    if not server.token_required or not server.token_file:
        return None
    try:
        return Path(server.token_file).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def kubeconfig(server: ServerAddress, namespace: str, token: str | None) -> dict[str, object]:
    """One context: the server, the notebook's namespace, the credential."""
    cluster: dict[str, object] = {"server": server.url}
    if server.ca_file:
        cluster["certificate-authority"] = server.ca_file
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": CONTEXT, "cluster": cluster}],
            "users": [{"name": CONTEXT, "user": {"token": token} if token else {}}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
            "current-context": CONTEXT}


def prepare(settings: Settings, uid: str, namespace: str, token: str | None, multi_user: bool) -> Defaults:
    """Write the notebook's kubeconfig and ServiceAccount files; the environment naming them.

    ``token``: the multi-user credential (``service_account.ensure_token``); in single-user mode the
    server's own is read here."""
    own = paths.folder(settings, uid)
    account = own / "serviceaccount"
    defaults = Defaults()
    servers = running_servers()
    server = servers[0] if servers else None
    credential = token if multi_user else (server_token(server) if server else None)
    _write_private(account / "namespace", namespace)
    if credential:
        _write_private(account / "token", credential)
        defaults.env[SA_TOKEN_ENV] = str(account / "token")
    else:
        (account / "token").unlink(missing_ok=True)
    if server is not None:
        config = own / "kube" / "config"
        _write_private(config, json.dumps(kubeconfig(server, namespace, credential), indent=1))  # JSON is YAML
        defaults.env["KUBECONFIG"] = str(config)
        if server.ca_file and Path(server.ca_file).is_file():
            _write_private(account / "ca.crt", Path(server.ca_file).read_text(encoding="utf-8"))
    if not multi_user:
        defaults.env["MILLPOND_HOME"] = str(settings.home)
    # at its real path: bubblewrap makes a mount point's missing parents, never through a symlink (/var/run -> /run)
    defaults.binds.append(Bind(account, os.path.realpath(SA_MOUNT), read_only=True))
    return defaults
