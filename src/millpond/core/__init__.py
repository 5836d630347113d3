"""Kubernetes' built-in kinds (the core group ``v1`` and RBAC) as millpond keeps or derives them.

Namespaces, Secrets, ConfigMaps, ServiceAccounts and RBAC objects are kept; PersistentVolumeClaims are
named local volumes (or Fluid's view of a bound Dataset); PersistentVolumes, Nodes and Events are
derived from what millpond already knows (volumes, the machine's ledger, each family's events).
``core.kinds`` registers the names, ``core.handler`` the handler.
"""
