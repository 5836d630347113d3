"""Pod hostnames of Indexed Jobs, resolvable to their peers as a headless Service makes them on a cluster.

On Kubernetes a pod of an Indexed Job is named ``JOB-INDEX`` (its ``hostname``) and, when its template sets
``subdomain``, the headless Service of that name (a JobSet creates it) gives it the DNS name
``JOB-INDEX.SUBDOMAIN`` (also ``.NAMESPACE.svc`` and ``.NAMESPACE.svc.cluster.local``). On one machine every
pod is this host, so every such name resolves to the loopback address: each (namespace, subdomain) has one
hosts file, ``$MILLPOND_HOME/batch/dns/NAMESPACE/SUBDOMAIN.hosts``, listing every index of every Indexed Job
of that namespace whose pod template names the subdomain, and the pods see it as their ``/etc/hosts``
(a read-only bind in their sandbox). It is rewritten in place (the same file, so the bind of a pod already
running shows the names of Jobs created after it: a JobSet's later replicated jobs) each time a pod of such
a Job starts. Where no sandbox can be made the names are not resolvable, and the pod's events say so.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from millpond.settings import Settings
from millpond.store.resources import ResourceStore
from millpond.training.batch.kinds import KIND

LOCALHOST = ("127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback")


def subdomain_of(body: dict[str, Any]) -> str:
    """The pod template's ``subdomain`` of a stored Job ("" when none)."""
    return str((((body.get("spec") or {}).get("template") or {}).get("spec") or {}).get("subdomain") or "")


def names(job: str, index: int, subdomain: str, namespace: str) -> list[str]:
    """Every name of pod ``index`` of Indexed Job ``job``: hostname first, then its DNS names."""
    host = f"{job}-{index}"
    fqdn = f"{host}.{subdomain}"
    return [f"{fqdn}.{namespace}.svc.cluster.local", f"{fqdn}.{namespace}.svc", fqdn, host]


def hosts_text(namespace: str, subdomain: str, settings: Settings) -> str:
    """The hosts file of (``namespace``, ``subdomain``) as the store holds its Jobs now."""
    lines = list(LOCALHOST)
    for resource in ResourceStore(settings).list(KIND, namespace):
        spec = resource.spec
        if subdomain_of(resource.manifest) != subdomain or spec.get("completionMode") != "Indexed":
            continue
        for index in range(int(spec.get("completions") or 0)):
            lines.append("127.0.0.1\t" + " ".join(names(resource.name, index, subdomain, namespace)))
    return "\n".join(lines) + "\n"


def hosts_file(namespace: str, subdomain: str, settings: Settings) -> Path:
    """The hosts file of (``namespace``, ``subdomain``), brought up to date in place (under a lock)."""
    path = settings.home / "batch" / "dns" / namespace / f"{subdomain}.hosts"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = hosts_text(namespace, subdomain, settings).encode()
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        if handle.read() != text:
            handle.seek(0)
            handle.truncate()
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    return path
