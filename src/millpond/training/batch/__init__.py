"""Kubernetes' ``batch/v1`` Job, run on this machine: its pods are processes, admitted by Kueue.

Why a family of its own inside ``training`` (owner ``training.batch``) rather than a seventh trainer:
a Job is not a gang. A training job's instances start together, hold one grant and restart
together (``training.supervisor``); a Job's pods are independent: up to ``parallelism`` of them run
at once, each asks the ledger for its own resources (a pod that does not fit stays Pending, as the
scheduler leaves it), a failed pod is replaced (its failure counted against ``backoffLimit``) while
the others run on, and the Job is Complete once ``completions`` pods (or every index) succeeded. So
the controller (``controller``), the record of what runs (``pods``) and the status the Job
controller writes (``status``) are its own; what a pod *is* is the training family's, reused as is:
the pod template read as one machine runs it (``training.pod_template``), an instance process in
its own session and sandbox, marked so nothing outlives it (``training.instances``), the machine's
ledger (``scheduling.ledger``) and Kueue's admission cycle (``scheduling.queues.cycle``). Living in
the training package keeps the layers as they are (a sibling package would have to sit above
``training`` to import it).

Objects are kept in the resource store (kind ``Job``: manifest, status, the controller's pid), not in
the training jobs' table: ``arena list`` does not show batch Jobs, and a PyTorchJob and a Job may
share a name, as on Kubernetes.
"""
