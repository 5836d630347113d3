"""Where a running ``millpond server`` can be reached: kept in ``runners.listening`` (a notebook's supervisor,
below the server's layer, reads it too to write the notebook's kubeconfig); re-exported here for the server."""

from millpond.runners.listening import SERVERS_DIR, ServerAddress, record, running_servers

__all__ = ["SERVERS_DIR", "ServerAddress", "record", "running_servers"]
