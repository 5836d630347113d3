"""``python -m millpond.kuberay.supervisor KIND NAMESPACE NAME UID [USER]``: a RayCluster's or RayJob's supervisor
(``USER``: who applied the object, its Kueue workload's user).

Started detached by ``kuberay.objects.start``; it runs until its object is deleted (or replaced by
another of that name), fails, or (a RayJob) is done. One per uid: a second one started at the same
moment leaves at once (an exclusive lock on a file of the object's folder).
"""

from __future__ import annotations

import fcntl
import sys

from millpond.kuberay import paths
from millpond.kuberay.cluster_supervisor import ClusterSupervisor
from millpond.kuberay.job_supervisor import JobSupervisor
from millpond.kuberay.kinds import RAY_CLUSTER, RAY_JOB
from millpond.settings import load_settings


def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5) or argv[0] not in (RAY_CLUSTER.kind, RAY_JOB.kind):
        print("usage: python -m millpond.kuberay.supervisor RayCluster|RayJob NAMESPACE NAME UID [USER]",
              file=sys.stderr)
        return 2
    kind, namespace, name, uid = argv[:4]
    user = argv[4] if len(argv) == 5 else ""
    settings = load_settings()
    folder = paths.folder(settings, uid)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "supervisor.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another supervisor of this uid runs
        if kind == RAY_CLUSTER.kind:
            ClusterSupervisor(settings, namespace, name, uid, user).run()
        else:
            JobSupervisor(settings, namespace, name, uid, user).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
