"""ML Metadata's gRPC service (``ml_metadata.MetadataStoreService``) over millpond's lineage, read-only.

KFP's UI and users read ML Metadata: ``millpond server --mlmd-port PORT`` answers them from the lineage the runs
record (``store.lineage``), with KFP's own types and properties. ``proto`` holds the generated messages and
service (``scripts/gen_mlmd_protos.py``); ``queries`` turns MLMD's list options and filters into the store's typed
requests; ``convert`` turns lineage rows into MLMD's messages; ``callers`` identifies a caller and the namespaces
it may read; ``servicer`` answers each call; ``endpoint`` starts and stops the gRPC server.
"""
