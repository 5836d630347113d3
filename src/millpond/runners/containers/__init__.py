"""Tasks in their container images: the runtime (Podman or Docker), images, the policy, the command.

- ``runtimes``: which container runtime works here (probed once), and the flags it needs on
  machines without systemd or with cgroups in hybrid mode;
- ``images``: image references as Kubernetes reads them, pull policies, credentials, pulls that
  end in Kubernetes' reasons (``ErrImagePull``, ``ErrImageNeverPull``) and never hang;
- ``policy``: ``host | container | podman | docker | auto``, from a flag, ``MILLPOND_RUNTIME``,
  ``millpond config set runtime`` and an object's ``millpond.io/runtime`` annotation, and how
  ``auto`` decides (predictably) between a task's image and the host;
- ``command``: the ``podman run`` words for one process: the same mounts, environment and
  grants the host sandbox gives, plus limits the runtime enforces;
- ``sweep``: containers are named and labelled with their engine, so whatever ends an engine
  (kill -9 included) leaves none of them running.
"""
