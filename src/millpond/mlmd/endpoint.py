"""The ML Metadata endpoint's start and stop: a gRPC server beside ``millpond server``'s HTTP one.

``millpond server --mlmd-port PORT`` starts it on the server's host (KFP's ``metadata-grpc-service`` listens on
8080; 0, the default, starts none): a thread pool of its own, the HTTP server's authenticator and authorizer
(``mlmd.callers``), and TLS with the HTTP server's certificate when that one serves HTTPS (an MLMD client's
``ssl_config`` then names the certificate or millpond's CA). A port in use is an error before anything is served:
gRPC's SO_REUSEPORT, on by default, is turned off so a second server cannot share the port silently.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from millpond.errors import MillpondError
from millpond.mlmd.callers import Callers
from millpond.mlmd.proto import metadata_store_service_pb2_grpc as service
from millpond.mlmd.servicer import MetadataStore
from millpond.store.lineage_reads import LineageReads

if TYPE_CHECKING:
    from millpond.access.authorizer import Authorizer
    from millpond.server.access import Authenticator
    from millpond.server.tls import CertificateFiles

WORKERS = 8  # calls answered at once; each is one short database read
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a page of lineage can be large; MLMD's clients raise their limits too
STOP_GRACE_S = 5.0


@dataclass
class Endpoint:
    """A started endpoint: the port it listens on, and how to stop it."""

    server: grpc.Server
    port: int

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop taking calls; those in flight get ``grace_s`` seconds."""
        self.server.stop(grace_s).wait(grace_s + 1)


def start(database_url: str, authenticator: Authenticator, authorizer: Authorizer, host: str, port: int,
          certificate: CertificateFiles | None = None) -> Endpoint:
    """Listen on ``host``:``port`` (0: a free port) and serve; MillpondError when the port cannot be had."""
    reads = LineageReads(database_url)
    server = grpc.server(ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mlmd"), options=[
        ("grpc.so_reuseport", 0), ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
    service.add_MetadataStoreServiceServicer_to_server(MetadataStore(reads, Callers(authenticator, authorizer, reads)),
                                                       server)
    name = host.strip("[]")
    address = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
    try:
        if certificate is not None:
            credentials = grpc.ssl_server_credentials(
                [(certificate.key.read_bytes(), certificate.certificate.read_bytes())])
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio raises when it cannot bind (older versions returned 0)
        raise MillpondError(f"--mlmd-port: cannot listen on {address}: {exc}") from None
    if not bound:
        raise MillpondError(f"--mlmd-port: cannot listen on {address} (in use?)")
    server.start()
    return Endpoint(server, bound)
