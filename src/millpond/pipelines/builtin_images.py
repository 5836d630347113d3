"""The images of the tasks millpond runs itself, not as a container: kfp-kubernetes' PVC stubs, a kfp 1.x snapshot.

A module of their own so that what only names them (the Argo translation, the conformance
check) does not import ``platform``, which runs them and reads datasets and mounts to do so.
"""

from __future__ import annotations

CREATE_PVC_IMAGE = "argostub/createpvc"
DELETE_PVC_IMAGE = "argostub/deletepvc"
# A kfp 1.x VolumeSnapshotOp (pipelines.argo.to_ir): locally, a snapshot is a copy of the volume.
SNAPSHOT_IMAGE = "millpond/argo-volume-snapshot"
