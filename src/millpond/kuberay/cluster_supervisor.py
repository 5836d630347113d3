"""A RayCluster's supervisor: one process per cluster uid that keeps its Ray nodes as its spec says.

``python -m millpond.kuberay.supervisor RayCluster NAMESPACE NAME UID`` (``objects.start``). Each tick
(``TICK_S``) it reads the object and reconciles, as KubeRay's controller does:

1. the object is gone, or another of that name (another uid): stop every node, end;
2. ``spec.suspend``: stop every node, give back quota and grants; state ``suspended``;
3. labelled for a Kueue queue: the cluster is one workload (all its nodes' requests); it waits
   suspended, with Kueue's reason, until admitted; evicted: its nodes stop and it queues again;
4. each node (head first) takes its pod's requests from the machine's ledger before it starts (a
   node that does not fit waits, its reason in the status, as an unschedulable pod);
5. the head starts, on free ports; one that exits before it was ever ready is started again (up to
   ``HEAD_START_ATTEMPTS`` in all: Ray gives a node 30 s to register, which a loaded machine can
   miss); a head that exits after it served fails the cluster (state ``failed``, the reason naming
   its pid and exit), every worker is stopped and the supervisor ends;
6. each worker group runs ``replicas`` nodes (0 when the group is suspended): missing ones start
   once the head is ready, extra ones stop (highest index first), one that exits is started again
   (a pod restarted), the failure in ``ReplicaFailure``;
7. the status (``cluster_status``) and the nodes (``node_view``) are written when they change.

SIGTERM (``objects.stop``, a delete) stops every node and ends. The supervisor's guardian ends the
nodes if the supervisor is killed outright.
"""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time

from millpond.errors import MillpondError, UserError
from millpond.kuberay import node_view, paths
from millpond.kuberay.cluster_status import FAILED, READY, SUSPENDED, Phase, cluster_status, same
from millpond.kuberay.kinds import PRIORITY_LABEL, QUEUE_LABEL, RAY_CLUSTER
from millpond.kuberay.nodes import HeadPorts, RayNode, argv, environment, new_mark, pod_suffix, ray_binary
from millpond.kuberay.nodes import start as start_node
from millpond.kuberay.nodes import stop as stop_nodes
from millpond.kuberay.specs import HEAD, ClusterSpec, NodeGroup, cluster_spec
from millpond.runners.guardian import guardian
from millpond.runners.ports import free_ports
from millpond.runners.processes import ProcessIdentity
from millpond.scheduling.ledger import Grant, Holder, Ledger, Request
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.model import WorkloadKind, WorkloadState
from millpond.scheduling.queues.submission import ANONYMOUS, requests
from millpond.settings import Settings
from millpond.store.resources import ProcessRecord, Resource, ResourceStore
from millpond.store.workloads import WorkloadStore

TICK_S = 0.5
HEAD_START_S = 180.0  # a head not ready by then failed to start (two cores, a loaded machine: ~5-20 s)
HEAD_START_ATTEMPTS = 3  # a head that exits before it was ever ready is started this many times in all


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _exit_words(code: int | None) -> str:
    if code is None:
        return "is gone"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def node_request(group: NodeGroup) -> Request:
    shape = group.shape
    return Request(int(shape.request_cpu * 1000), shape.request_memory, shape.request_gpus)


class ClusterSupervisor:
    """The reconciler of one RayCluster (see the module's docstring for its steps)."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str, user: str = "") -> None:
        self.settings = settings
        self.user = user or ANONYMOUS  # who applied it: its Kueue workload's user
        self.home = paths.HomeWatch(settings.home)
        self.namespace, self.name, self.uid = namespace, name, uid
        self.store = ResourceStore(settings)
        self.ledger = Ledger(settings)
        self.stopping = threading.Event()
        self.nodes: dict[tuple[str, int], RayNode] = {}
        self.grants: dict[str, Grant] = {}  # by node name
        self.ports: HeadPorts | None = None
        self.phase = Phase()
        self.workload_id = ""
        self.finished = False
        self.head_was_ready = False
        self.started = 0
        self.written: dict[str, object] = {}
        self.waiting: dict[str, str] = {}  # node -> why it waits for the machine
        self.binary = ray_binary()
        self.token = paths.ensure_token(settings)
        self.guard = guardian().env()  # processes it starts carry the guardian's token
        own = ProcessIdentity.own()
        self.holder = Holder("raycluster", f"{namespace}/{name}", own.pid, own.start, namespace=namespace)
        self.identity = ProcessRecord(own.pid, own.start or "")

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        self.store.record_process(RAY_CLUSTER.kind, self.name, self.namespace, self.identity)
        paths.sweep_dangling_links()
        try:
            while not self.stopping.is_set() and not self.finished and not self.home.gone():
                resource = self.store.get(RAY_CLUSTER.kind, self.name, self.namespace)
                if resource is None or resource.uid != self.uid:
                    break
                try:
                    cluster = cluster_spec(resource.spec, ["spec"])
                except UserError as exc:  # stored before a check that refuses it now
                    self._fail(f"its spec cannot run here: {exc}")
                    self._write(None, resource)
                    break
                self.step(cluster, resource)
                self._write(cluster, resource)
                self.stopping.wait(TICK_S)
        finally:
            self._stop_all()
            if not self.home.gone():
                self._release_workload("deleted" if not self.finished else "failed")
                self._write_nodes()

    def step(self, cluster: ClusterSpec, resource: Resource) -> None:
        labels = resource.manifest.get("metadata", {}).get("labels") or {}
        if cluster.suspend:
            self._stop_all()
            self._release_workload("suspended")
            self._enter(SUSPENDED, "spec.suspend is true")
            return
        queue = labels.get(QUEUE_LABEL, "")
        if queue and not self._admitted(cluster, queue, labels.get(PRIORITY_LABEL) or None):
            return
        if self.phase.state == SUSPENDED:
            self._enter("", "")
        head_group = cluster.head
        head = self.nodes.get((head_group.name, 0))
        if head is None:
            self._start(cluster, head_group, 0)
            return
        head.check()
        if head.exit_code is not None and not self.head_was_ready and head.restarts < HEAD_START_ATTEMPTS - 1:
            # it never came up (Ray gives a node 30 s to register: a loaded machine misses it): start it again,
            # as the kubelet restarts a pod's container; once it served, its death loses the cluster's state
            self.phase.reason = (f"the head node {head.name} (pid {head.pid}) {_exit_words(head.exit_code)} "
                                 f"while starting (its log: {head.log}); starting it again")
            restarts = head.restarts + 1
            self._stop(list(self.nodes))
            self._start(cluster, head_group, 0, restarts)
            return
        if head.exit_code is not None:
            self._fail(f"the head node {head.name} (pid {head.pid}) {_exit_words(head.exit_code)}")
            return
        if not head.ready:
            if time.time() - head.started_at > HEAD_START_S:
                self._fail(f"the head node {head.name} did not start within {HEAD_START_S:.0f} s (its log: {head.log})")
            return
        self.head_was_ready = True
        self._reconcile_workers(cluster)
        ready = all(node.ready and node.running() for node in self.nodes.values())
        desired = 1 + cluster.desired_workers()
        if ready and len(self.nodes) == desired and not self.waiting:
            if not self.phase.provisioned_at:
                self.phase.provisioned_at = now_iso()
            if self.phase.state != READY:
                self._enter(READY, "")
        elif self.phase.state == READY and not self.waiting:
            self.phase.reason = ""

    # ------------------------------------------------------------------ admission
    def _admitted(self, cluster: ClusterSpec, queue: str, priority: str | None) -> bool:
        """Whether Kueue admitted the cluster's workload (submitted on first call); stops it when evicted."""
        store = WorkloadStore(self.settings)
        if not self.workload_id:
            cpu, memory, gpus, _ = cluster.desired()
            try:
                self.workload_id = cycle.submit(
                    self.settings, kind=WorkloadKind.JOB.value, name=self.name, namespace=self.namespace,
                    user=self.user, queue=queue, requests=requests(int(cpu * 1000), memory, gpus),
                    priority_class=priority, pod_count=1 + cluster.desired_workers()).id
            except UserError as exc:  # its WorkloadPriorityClass is missing: it waits, saying so
                self._enter(SUSPENDED, f"Kueue: {exc}")
                return False
        cycle.run_cycle(self.settings)
        record = store.get(self.workload_id)
        if record is None or record.state == WorkloadState.FINISHED.value:
            self.workload_id = ""
            return False
        if record.state == WorkloadState.EVICTED.value:
            self._stop_all()
            cycle.release(self.settings, self.workload_id, stopped=True)
            self._enter(SUSPENDED, f"Kueue evicted it: {record.reason}")
            return False
        if record.state != WorkloadState.ADMITTED.value:
            self._enter(SUSPENDED, f"waiting for Kueue (queue {queue}): {record.reason}")
            return False
        return True

    def _release_workload(self, reason: str) -> None:
        if self.workload_id:
            try:
                cycle.release(self.settings, self.workload_id, reason=reason)
            except MillpondError:
                pass
            self.workload_id = ""

    # ------------------------------------------------------------------ nodes
    def _start(self, cluster: ClusterSpec, group: NodeGroup, index: int, restarts: int = 0) -> RayNode | None:
        """Start replica ``index`` of ``group`` once the ledger grants its pod's requests (else it waits)."""
        key = (group.name, index)
        waiting_name = f"{group.name}/{index}"
        request = node_request(group)
        grant = self.ledger.try_acquire(request, self.holder)
        if grant is None:
            why = self.ledger.impossible(request, "nvidia.com/gpu") or \
                self.ledger.why_waiting(request, self.holder.namespace)
            self.waiting[waiting_name] = (f"{'head' if group.head else 'a worker of ' + group.name} waits for this "
                                          f"machine: {why}")
            self.phase.reason = self.waiting[waiting_name]
            return None
        self.waiting.pop(waiting_name, None)
        if self.binary is None:
            self.ledger.release(grant.id)
            self._fail("ray is not installed: pip install 'millpond[ray]'")
            return None
        name = f"{self.name}-head-{pod_suffix()}" if group.head else f"{self.name}-{group.name}-worker-{pod_suffix()}"
        self.started += 1  # each node's own temp dir (a short name: Ray's socket paths must fit)
        temp = paths.make_temp_root(self.settings, self.uid) / f"n{self.started}"
        node = RayNode(name=name, group=group.name, head=group.head, index=index,
                       log=paths.node_log(self.settings, self.uid, name), temp_dir=temp, mark=new_mark(),
                       restarts=restarts)
        if group.head:
            gcs, dashboard, metrics, client = free_ports(4)
            self.ports = HeadPorts(gcs, dashboard, metrics, client)
        assert self.ports is not None
        gpus = len(grant.gpus)
        env = environment(group, self.token, self.guard, grant.gpus, node.mark)
        shape_gpus = min(group.shape.num_gpus, gpus) if group.shape.num_gpus else gpus
        start_node(node, argv(self.binary, group, node, self.ports, shape_gpus), env)
        self.grants[node.name] = grant
        self.nodes[key] = node
        self._write_nodes()
        return node

    def _stop(self, keys: list[tuple[str, int]]) -> None:
        nodes = [self.nodes.pop(key) for key in keys if key in self.nodes]
        if not nodes:
            return
        stop_nodes(nodes)
        for node in nodes:
            grant = self.grants.pop(node.name, None)
            if grant is not None:
                self.ledger.release(grant.id)
        self._write_nodes()

    def _stop_all(self) -> None:
        self._stop(list(self.nodes))  # together: each gets the same grace, not one after another
        self.waiting.clear()
        paths.remove_temp_root(self.settings, self.uid)  # no node left to write there

    def _reconcile_workers(self, cluster: ClusterSpec) -> None:
        exited = False
        for group in cluster.workers:
            desired = 0 if group.suspended else group.replicas
            for (name, index), node in list(self.nodes.items()):
                if name != group.name:
                    continue
                if index >= desired:
                    self._stop([(name, index)])
                    continue
                node.check()
                if node.exit_code is not None:
                    exited = True
                    self.phase.failure = f"worker {node.name} (pid {node.pid}) {_exit_words(node.exit_code)}; restarted"
                    self._stop([(name, index)])
                    self._start(cluster, group, index, node.restarts + 1)
            for index in range(desired):
                if (group.name, index) not in self.nodes:
                    self._start(cluster, group, index)
            for waiting in [key for key in self.waiting if key.startswith(f"{group.name}/")]:
                if int(waiting.rsplit("/", 1)[1]) >= desired:
                    self.waiting.pop(waiting)
        known = {group.name for group in cluster.workers}
        self._stop([key for key, node in self.nodes.items() if not node.head and key[0] not in known])
        # KubeRay removes ReplicaFailure at the first reconcile without an error: here, once every worker
        # runs and is ready again after the restart it names
        if self.phase.failure and not exited and not self.waiting and all(
                node.running() and node.ready for node in self.nodes.values() if not node.head):
            self.phase.failure = ""

    # ------------------------------------------------------------------ status
    def _enter(self, state: str, reason: str) -> None:
        if state and state != self.phase.state:
            self.phase.transitions[state] = now_iso()
        self.phase.state, self.phase.reason = state, reason

    def _fail(self, reason: str) -> None:
        self._stop_all()
        self._enter(FAILED, reason)
        self.finished = True

    def _write(self, cluster: ClusterSpec | None, resource: Resource) -> None:
        if cluster is None:
            status = {**resource.status, "state": FAILED, "reason": self.phase.reason}
        else:
            for node in self.nodes.values():
                node.check()
            status = cluster_status(cluster, self.name, list(self.nodes.values()), self.ports, self.phase, now_iso())
        if not same(self.written, status):
            self.store.set_status(RAY_CLUSTER.kind, self.name, status, self.namespace)
            self.written = status
            self._write_nodes()

    def _write_nodes(self) -> None:
        if self.home.gone():
            return  # never make a removed home's folders again
        views = [self._view(node, node_view.RUNNING if node.running() else node_view.FAILED)
                 for node in self.nodes.values()]
        for key, why in self.waiting.items():
            group, index = key.rsplit("/", 1)
            views.append(node_view.RayNodeView(
                name=f"{self.name}-{group}-pending-{index}", cluster=self.name, namespace=self.namespace, group=group,
                head=group == HEAD, index=int(index), pid=None, ticks=None, phase=node_view.PENDING, ready=False,
                exit_code=None, reason=why, log_path="", started_at=0.0, restarts=0))
        node_view.write(paths.nodes_file(self.settings, self.uid), views)

    def _view(self, node: RayNode, phase: str) -> node_view.RayNodeView:
        reason = "" if node.exit_code is None else f"ray start {_exit_words(node.exit_code)}"
        return node_view.RayNodeView(
            name=node.name, cluster=self.name, namespace=self.namespace, group=node.group, head=node.head,
            index=node.index, pid=node.pid, ticks=node.ticks, phase=phase, ready=node.ready, exit_code=node.exit_code,
            reason=reason, log_path=str(node.log), started_at=node.started_at, restarts=node.restarts)
