"""The images of the tasks millpond runs itself, not as a container: kfp-kubernetes' PVC stubs, a kfp 1.x snapshot.

A module of their own so that what only names them (the Argo translation, the conformance
check) does not import ``platform``, which runs them and reads datasets and mounts to do so.
"""

from __future__ import annotations

CREATE_PVC_IMAGE = "argostub/createpvc"
DELETE_PVC_IMAGE = "argostub/deletepvc"
# A kfp 1.x VolumeSnapshotOp (pipelines.argo.to_ir): locally, a snapshot is a copy of the volume.
SNAPSHOT_IMAGE = "millpond/argo-volume-snapshot"
# The kfp 1.x translation's own small steps (pipelines.argo.to_ir): a raw input artifact written to a file, a
# loop's items rendered. They run millpond's commands on the host; no image exists for them.
RAW_ARTIFACT_IMAGE = "argo-raw-artifact"
RENDER_ITEMS_IMAGE = "argo-render-items"
# Images that name millpond's own steps, never a container image: the runtime policy leaves them alone.
MILLPOND_STEP_IMAGES = frozenset({CREATE_PVC_IMAGE, DELETE_PVC_IMAGE, SNAPSHOT_IMAGE, RAW_ARTIFACT_IMAGE,
                                  RENDER_ITEMS_IMAGE})
