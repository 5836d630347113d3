"""``FluidClient``: Fluid's SDK entry point, over millpond's store instead of a cluster.

Objects go where ``millpond apply -f`` puts them (the metadata database of
``$MILLPOND_HOME``), so ``millpond get datasets`` shows what a notebook created and the
other way round. Kubernetes connection settings are accepted, so a notebook runs
unchanged, and ignored.
"""

from __future__ import annotations

import logging
from typing import Any

from millpond.datasets.config import bound_runtime
from millpond.fluid import constants, models
from millpond.fluid.config import ClientConfig
from millpond.fluid.dataset import FluidDataset
from millpond.fluid.objects import already_exists, apply, not_found, shown
from millpond.fluid.utils import infer_data_operation_kind, infer_runtime_kind
from millpond.store.resources import ResourceStore

__all__ = ["ClientConfig", "FluidClient"]

logger = logging.getLogger("fluidsdk")

MODES = {"ReadOnly": "ReadOnlyMany", "ReadWrite": "ReadWriteMany"}


def _store() -> ResourceStore:
    return ResourceStore()


class FluidClient:
    """Create and get Fluid objects; ``get_dataset`` gives the FluidDataset that builds dataflows."""

    def __init__(self, config: ClientConfig | None = None) -> None:
        config = config or ClientConfig()
        if not config.namespace:
            raise ValueError("namespace should not be None")
        self.config = config

    def _namespace(self, namespace: str | None) -> str:
        return namespace or self.config.namespace

    def create_dataset(self, dataset_name: str, mount_name: str | None = None, mount_point: str | None = None,
                       mount_path: str = "/", mode: str = "ReadOnly", options: dict[str, str] | None = None,
                       cred_secret_name: str | None = None, cred_secret_options: dict[str, str] | None = None,
                       namespace: str | None = None, **kwargs: Any) -> None:
        """Create a Dataset with one mount (``mount_point`` shown at ``mount_path``, the root by default).

        ``cred_secret_options`` maps an option name to the key of millpond secret
        ``cred_secret_name`` that holds its value (``{"access-key": "access-key"}``);
        ``kwargs`` are further Dataset spec fields (``shared_options=…``).
        """
        if mode not in MODES:
            raise ValueError("mode must be ReadOnly or ReadWrite")
        if bool(cred_secret_name) != bool(cred_secret_options):
            raise ValueError("cred_secret_name and cred_secret_options must be set together")
        if mount_point is None and mount_name is not None:
            raise ValueError("mount_name and mount_point must be set together")
        namespace = self._namespace(namespace)
        spec: dict[str, Any] = {"accessModes": [MODES[mode]]}
        if mount_point is not None:
            encrypt = [models.EncryptOption(name=option, value_from=models.EncryptOptionSource(
                secret_key_ref=models.SecretKeySelector(key=key, name=cred_secret_name)))
                for option, key in (cred_secret_options or {}).items()]
            mount = models.Mount(mount_point=mount_point, name=mount_name or dataset_name, path=mount_path,
                                 options=options or None, encrypt_options=encrypt or None)
            spec["mounts"] = [mount.to_dict()]
        spec.update({models.camel_case(key): models.to_manifest(value) for key, value in kwargs.items()})
        store = _store()
        if store.get(constants.DATASET_KIND, dataset_name, namespace) is not None:
            raise already_exists(constants.DATASET_KIND, dataset_name, namespace)
        manifest = {"apiVersion": constants.API_VERSION, "kind": constants.DATASET_KIND,
                    "metadata": {"name": dataset_name, "namespace": namespace}, "spec": spec}
        apply([manifest], "create_dataset", store)
        logger.debug(f'Dataset "{namespace}/{dataset_name}" created')

    def get_dataset(self, dataset_name: str, namespace: str | None = None) -> FluidDataset:
        namespace = self._namespace(namespace)
        found = _store().get(constants.DATASET_KIND, dataset_name, namespace)
        if found is None:
            raise not_found(constants.DATASET_KIND, dataset_name, namespace)
        return FluidDataset(found.name, found.namespace, found, self)

    def cleanup_dataset(self, dataset_name: str, namespace: str | None = None, wait: bool = True) -> None:
        """Delete the dataset, its runtime and its cache; nothing to do when it does not exist."""
        found = _store().get(constants.DATASET_KIND, dataset_name, self._namespace(namespace))
        if found is not None:
            FluidDataset(found.name, found.namespace, found, self).clean_up(wait)

    def delete_dataset(self, name: str, namespace: str | None = None, wait_until_cleaned_up: bool = False,
                       **kwargs: Any) -> None:
        """As Fluid's ``FluidK8sClient.delete_dataset``: a missing dataset is a warning, not an error."""
        namespace = self._namespace(namespace)
        if _store().get(constants.DATASET_KIND, name, namespace) is None:
            logger.warning(f'Dataset "{namespace}/{name}" not found. Maybe already deleted.')
            return
        self.cleanup_dataset(name, namespace, wait_until_cleaned_up)

    def get_runtime(self, name: str, runtime_type: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """The runtime named ``name`` (of kind ``runtime_type``, else whichever is bound), with its status."""
        namespace = self._namespace(namespace)
        kind = infer_runtime_kind(runtime_type)
        if runtime_type and kind is None:
            raise ValueError(f"runtime_type {runtime_type!r} is not supported")
        store = _store()
        found = store.get(kind, name, namespace) if kind else bound_runtime(store, name, namespace)
        if found is None:
            raise not_found(kind or self.config.runtime_kind, name, namespace)
        return shown(found, store)

    def get_data_operation(self, name: str, data_op_type: str, namespace: str | None = None) -> dict[str, Any]:
        """A DataLoad, DataMigrate, DataProcess or DataBackup with its status (phase, duration, conditions)."""
        namespace = self._namespace(namespace)
        kind = infer_data_operation_kind(data_op_type)
        if kind is None:
            raise ValueError(f"data_op_type {data_op_type!r} is not supported")
        store = _store()
        found = store.get(kind, name, namespace)
        if found is None:
            raise not_found(kind, name, namespace)
        return shown(found, store)

