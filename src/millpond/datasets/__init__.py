"""Fluid-style datasets: manifests, mounts over object storage, a tiered local cache, and access.

Modules, by concept:

- ``quantity``: Kubernetes quantities (``150Gi``, ``40960``) and Fluid's byte formatting.
- ``manifests``: parsing and validating Fluid manifests (``millpond apply -f``).
- ``ufs``: the under file systems a mount point names (s3://, file://, local://, http(s)://, pvc://…).
- ``config``: a Dataset + its runtime manifests resolved into what the cache engine needs.
- ``cache/``: the tiered cache engine (index, tiers, fills, eviction, checksums).
- ``fsspec_fs``: the ``millpond://`` fsspec filesystem.
- ``fuse_mount``: the FUSE mount; ``mounts``: its background process and record.
- ``shared_mounts``, ``mount_users``: the mount a DataProcess or a task uses, ended with its last user.
- ``status``: Dataset status the way Fluid reports it.
"""
