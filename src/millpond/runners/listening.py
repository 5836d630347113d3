"""Where a running ``millpond server`` can be reached, for the commands that write a client's configuration.

``millpond ps`` already lists the server (``runners.background``); a client also needs what its
record does not say: whether the address is HTTPS and which CA to trust, and whether the server
wants a token. ``millpond server`` writes one ``ServerAddress`` under
``$MILLPOND_HOME/servers`` as it starts (mode 0600, whole or not at all); ``millpond kubeconfig``
reads the ones whose process still runs (pid and start time, as every record of the home).

The token itself is never written here: only the path of ``--token-file`` when the token came
from one (a file the user already keeps), so a reader can use the same token without millpond
keeping a second copy of it on disk.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from millpond.runners.processes import ProcessIdentity
from millpond.settings import load_settings

SERVERS_DIR = "servers"


@dataclass(frozen=True)
class ServerAddress:
    """One running server: the ``url`` a client on this machine dials (``https://127.0.0.1:8888``), the CA a
    client must trust (``ca_file``: millpond's own; None for plain HTTP or a certificate the user brought),
    whether it wants a token and where that token came from (``token_file``, None unless a file)."""

    url: str
    ca_file: str | None
    token_required: bool
    token_file: str | None
    pid: int
    ticks: str | None
    started: str = ""

    @property
    def tls(self) -> bool:
        return self.url.startswith("https://")


def _folder() -> Path:
    return load_settings().home / SERVERS_DIR


def record(address: ServerAddress) -> None:
    """Write ``address`` for its process, readable by the user only."""
    folder = _folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{address.pid}-{address.ticks or 'x'}.json"
    partial = path.with_name(f".{path.name}.tmp")
    partial.unlink(missing_ok=True)
    with os.fdopen(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w", encoding="utf-8") as handle:
        json.dump(asdict(address), handle)
    os.replace(partial, path)


def running_servers() -> list[ServerAddress]:
    """The servers of this home still running, the latest started first; a record of a server that has
    ended (or that is no record of ours) is removed."""
    folder = _folder()
    found: list[ServerAddress] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            address = ServerAddress(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if ProcessIdentity(address.pid, address.ticks).is_running():
            found.append(address)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda address: (address.started, address.pid), reverse=True)
