"""``ClientConfig``: the settings of a Fluid SDK client, and what a dataset reads of its client.

Below both ``client`` (which makes datasets) and ``dataset`` (which asks its client for the
default runtime kind), so neither imports the other's module to name the other's type.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from millpond.fluid import constants
from millpond.fluid.utils import infer_runtime_kind

logger = logging.getLogger("fluidsdk")


class ClientConfig:
    """The namespace objects go to by default, and the runtime kind ``bind_runtime`` uses when given none."""

    def __init__(self, namespace: str = "default", runtime_kind: str = constants.ALLUXIO_RUNTIME_KIND,
                 kube_config_file: str | None = None, kube_context: str | None = None,
                 kube_client_configuration: Any = None) -> None:
        kind = infer_runtime_kind(runtime_kind)
        if kind is None:
            raise ValueError(f"Unsupported runtime kind {runtime_kind}")
        self.namespace = namespace
        self.runtime_kind = kind
        self.kube_config_file = kube_config_file
        self.kube_context = kube_context
        self.kube_client_configuration = kube_client_configuration
        given = (("kube_config_file", kube_config_file), ("kube_context", kube_context),
                 ("kube_client_configuration", kube_client_configuration))
        ignored = [name for name, value in given if value is not None]
        if ignored:
            logger.debug(
                f"{', '.join(ignored)} ignored: millpond keeps Fluid objects in its own store, not in a cluster"
            )


class ConfiguredClient(Protocol):
    """A client as a ``FluidDataset`` sees it (``FluidClient`` is one): only its configuration."""

    config: ClientConfig

