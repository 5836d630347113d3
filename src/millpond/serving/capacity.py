"""Whether this machine can ever hold an InferenceService's replicas: checked before anything is stored.

Every replica is a process of this machine (millpond's model server, or a custom container's
command), so it takes memory whether or not its ``resources`` ask for any: ``REPLICA_MEMORY_FLOOR``
is the least one is counted for (a model server measured ~85 MB resident: 117 of them took 10 GB).
Two rules, as ``arena submit`` refuses a job that can never run (``training.jobs.check``):

- :func:`count_refusal`, for every front end (a manifest, the API, ``arena serve``): ``minReplicas`` or
  ``maxReplicas`` above what the machine's memory can hold at the floor can never run here, however
  long it waits;
- :func:`resource_refusal`, for the front ends that build the object from flags (``arena serve``,
  ``millpond serve``, a pipeline step): the replicas' requests together (cpu, memory, GPUs, GPU shares)
  beyond the machine (``Ledger.impossible``). A manifest asking for more than the machine has is
  accepted as Kubernetes accepts a pod it cannot schedule yet: its replicas wait, the status saying why.

InferenceServices run on this machine only (never on a Ray cluster), so this machine is what counts.
"""

from __future__ import annotations

from millpond.scheduling import machine
from millpond.scheduling.ledger import Ledger, Request
from millpond.serving.spec import PredictorSpec

REPLICA_MEMORY_FLOOR = 64 * 2**20


def most_replicas(predictor: PredictorSpec) -> int:
    """How many replicas (processes) this machine's memory could ever hold, each at the floor; a memory request
    beyond the machine is :func:`resource_refusal`'s (a manifest's waits, as a pod waits)."""
    del predictor  # every replica counts the same here, whatever it asks
    return machine.memory_bytes() // REPLICA_MEMORY_FLOOR


def count_refusal(predictor: PredictorSpec) -> str | None:
    """Why ``minReplicas``/``maxReplicas`` can never run on this machine (one line naming the field), or None.
    Checked for a predictor millpond cannot serve too: an update may make it servable."""
    most = most_replicas(predictor)
    for field, count in (("minReplicas", predictor.replicas), ("maxReplicas", predictor.max_replicas)):
        if count > most:
            return (f"spec.predictor.{field}: {count} replicas can never run on this machine: each is a process "
                    f"taking at least {_gib(REPLICA_MEMORY_FLOOR)} of memory and it has "
                    f"{_gib(machine.memory_bytes())}, room for {most}")
    return None


def resource_refusal(predictor: PredictorSpec, ledger: Ledger | None = None) -> str | None:
    """Why the predictor's replicas, all running, can never be granted their resources here, or None."""
    counted = count_refusal(predictor)
    if predictor.unservable is not None or counted is not None:
        return counted
    each, count = predictor.resources, predictor.replicas
    total = Request(each.cpu_millis * count, each.memory_bytes * count, each.gpus * count, each.shares * count)
    why = (ledger or Ledger()).impossible(total)
    if why is None:
        return None
    return f"spec.predictor: {count} replica{'s' if count != 1 else ''} can never run on this machine: {why}"


def _gib(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count < 2**30 else f"{count / 2**30:.1f} GiB"
