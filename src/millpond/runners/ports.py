"""Free TCP ports on the loopback, for processes millpond starts and tells where to listen.

A training job's master and a served model's replicas and own port all need a port nobody
holds; the kernel picks one (bind to port 0), the probe closes, and the process binds it a
moment later (as a pod gets its port on a cluster). ``is_free`` tells whether a port chosen
earlier (an InferenceService's own port, kept across restarts of its supervisor) can be taken again.
"""

from __future__ import annotations

import socket

LOCAL_ADDR = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on the loopback now (the master binds it a moment later, as on a cluster)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOCAL_ADDR, 0))
        return int(probe.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (each asked for while the others are still held)."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probes.append(probe)
            probe.bind((LOCAL_ADDR, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def is_free(port: int) -> bool:
    """Whether ``port`` can be bound on the loopback now (a port in 1..65535; False for any other)."""
    if not 0 < port < 65536:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOCAL_ADDR, port))
        except OSError:
            return False
    return True
