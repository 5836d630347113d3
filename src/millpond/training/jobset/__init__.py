"""Kubernetes' ``jobset.x-k8s.io/v1alpha2`` JobSet, run on this machine as replicated ``batch/v1`` Jobs.

Why inside ``training`` (owner ``training.jobset``), beside ``training.batch``: a JobSet is JobSet's
controller over batch Jobs, and each of its Jobs is a ``batch/v1`` Job of the store with its own controller
and pods (``training.batch``), exactly as upstream's JobSet controller creates Jobs that the Job controller
runs. This package is the JobSet's part: the document's checks and webhook defaults (``manifest``), the Jobs
it makes with JobSet's labels and annotations (``jobs``), the startup, success and failure policies as pure
decisions (``policy``), the controller process (``controller``), its liveness and resumption
(``lifecycle``), its status (``status``) and the kind's handler (``handler``). The pods' DNS names
(``JOBSET-RJOB-J-P.SUBDOMAIN``) and the downward API are the batch family's (``training.batch.dns``,
``training.batch.downward``): any Indexed Job with a ``subdomain`` gets them.
"""
