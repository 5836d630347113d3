"""A TFJob on one machine: every replica gets ``TF_CONFIG`` exactly as the TFJob operator writes it.

The operator (training-operator ``tensorflow/tensorflow.go``, ``genTFConfigJSONStr``) gives each
replica ``{"cluster": {TYPE: ["HOST:PORT", ...]}, "task": {"type": TYPE, "index": I},
"environment": "cloud"}``: the types lower case, the cluster's keys sorted (Go marshals a map
so), every replica of every type listed except evaluators (not part of the training cluster).
On a cluster HOST is the replica's service and PORT 2222; here every replica listens on the
loopback, each on its own free port, so they can all run on one machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from millpond.training.planned import LOCAL_ADDR, Planned, free_ports
from millpond.training.spec import JobSpec

EVALUATOR = "evaluator"


def tf_config(cluster: dict[str, list[str]], role: str, index: int) -> str:
    """The TF_CONFIG of one replica, serialised as Go's encoding/json does (no spaces)."""
    document = {"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"}
    return json.dumps(document, separators=(",", ":"))


def plan_tf(spec: JobSpec, gpus: tuple[int, ...], port: int, folder: Path) -> list[Planned]:
    """Chief, workers, ps (and an evaluator), each with its TF_CONFIG and its share of the GPUs."""
    members = [(replica, index) for replica, index in spec.instances() if replica.role != EVALUATOR]
    ports = iter(free_ports(len(members)))
    cluster: dict[str, list[str]] = {}
    for replica, _index in sorted(members, key=lambda item: item[0].role):
        cluster.setdefault(replica.role, []).append(f"{LOCAL_ADDR}:{next(ports)}")
    planned = []
    offset = 0
    for rank, (replica, index) in enumerate(spec.instances()):
        share = tuple(gpus[offset:offset + replica.resources.gpus])
        offset += replica.resources.gpus
        env = {"TF_CONFIG": tf_config(cluster, replica.role, index), "PYTHONUNBUFFERED": "1",
               "CUDA_VISIBLE_DEVICES": ",".join(map(str, share))}
        env.update(dict(spec.env))
        env.update(dict(replica.env))
        planned.append(Planned(f"{spec.name}-{replica.role}-{index}", replica.role, index, rank,
                               tuple(replica.command), env, share))
    return planned
