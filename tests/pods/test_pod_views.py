"""Pod views without processes: the Pod object the ``kubernetes`` client's models accept, kubectl's STATUS
cell, the log reader's tail/follow/stamps and its errors, deletions' uids, and label selectors."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import UserError
from millpond.label_selectors import parse
from millpond.pods import deletions
from millpond.pods.logs import LogRequest, container_of, pod_log
from millpond.pods.objects import as_object, status_cell
from millpond.pods.records import (
    ContainerView,
    LogFile,
    OwnerRef,
    PodView,
    ProcessRef,
    Running,
    Waiting,
    pod_uid,
    terminated,
)
from millpond.settings import load_settings

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
STAMP = "2026-01-02T03:04:05.000000Z"


def view(*containers: ContainerView, name: str = "p") -> PodView:
    return PodView(name=name, namespace="default", uid=pod_uid("owner", name), created_at=NOW,
                   containers=containers, owner=OwnerRef("kubeflow.org/v1", "PyTorchJob", "j", "u"),
                   labels={"a": "b"}, started_at=NOW)


def container(name: str = "main", state: object = None, log: Path | None = None, stamped: bool = True,
              **fields: object) -> ContainerView:
    return ContainerView(name=name, image="img", state=state or Running(NOW),  # type: ignore[arg-type]
                         log=LogFile(log, stamped) if log else None, **fields)  # type: ignore[arg-type]


def test_the_object_is_one_the_kubernetes_clients_models_accept() -> None:
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.client.ApiClient()
    for state in (Running(NOW), terminated(-9, NOW, NOW), Waiting("ContainerCreating")):
        shown = as_object(view(container(state=state, ready=isinstance(state, Running), limits={"cpu": "1"})))
        pod = client._ApiClient__deserialize(shown, "V1Pod")  # what list_namespaced_pod makes of the answer
        assert pod.metadata.owner_references[0].kind == "PyTorchJob" and pod.spec.containers[0].name == "main"
        assert pod.status.container_statuses[0].name == "main"
    killed = as_object(view(container(state=terminated(-9, NOW, NOW))))["status"]["containerStatuses"][0]
    assert killed["state"]["terminated"]["exitCode"] == 137  # 128 + SIGKILL, as the kubelet reports it


@pytest.mark.parametrize(("states", "phase", "cell"), [
    ((Running(NOW),), "Running", "Running"),
    ((Waiting("ContainerCreating"),), "Pending", "ContainerCreating"),
    ((terminated(0, NOW, NOW),), "Succeeded", "Completed"),
    ((terminated(2, NOW, NOW),), "Failed", "Error"),
    ((terminated(0, NOW, NOW), Running(NOW)), "Running", "Running"),
])
def test_phase_and_kubectls_status_cell(states: tuple[object, ...], phase: str, cell: str) -> None:
    pod = view(*(container(f"c{i}", state, ready=isinstance(state, Running)) for i, state in enumerate(states)))
    assert (pod.phase, status_cell(pod)) == (phase, cell)


def test_a_container_waiting_after_it_ran_is_crash_loop_back_off_in_a_running_pod() -> None:
    pod = view(container(state=Waiting("CrashLoopBackOff"), restart_count=2))
    assert (pod.phase, status_cell(pod)) == ("Running", "CrashLoopBackOff")


def stamped(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{STAMP} {line}\n" for line in lines))
    return path


def read(pod: PodView, **asked: object) -> str:
    return b"".join(pod_log(pod, LogRequest(**asked), lambda: pod)).decode()  # type: ignore[arg-type]


def test_whole_and_tailed_logs_without_their_stamps(tmp_path: Path) -> None:
    lines = [f"line {i}" for i in range(5000)]  # longer than one block read backwards
    pod = view(container(state=terminated(0, NOW, NOW), log=stamped(tmp_path / "a.log", lines)))
    assert read(pod) == "".join(f"{line}\n" for line in lines)
    assert read(pod, tail_lines=3) == "line 4997\nline 4998\nline 4999\n"
    assert read(pod, tail_lines=0) == ""
    assert read(pod, tail_lines=10**6) == read(pod)
    assert read(pod, tail_lines=1, timestamps=True) == f"{STAMP} line 4999\n"
    plain = tmp_path / "plain.log"
    plain.write_text("a b\nc d")  # a pipeline task's: no stamps, a last line without its newline
    assert read(view(container(state=terminated(0, NOW, NOW), log=plain, stamped=False)), tail_lines=1) == "c d"


@given(st.lists(st.text(alphabet="ab \n", max_size=5), max_size=20), st.integers(min_value=0, max_value=25))
def test_a_tail_is_the_last_lines_of_the_whole(tmp_path_factory: pytest.TempPathFactory, chunks: list[str],
                                               tail: int) -> None:
    path = tmp_path_factory.mktemp("tail") / "x.log"
    path.write_text("".join(chunks))
    pod = view(container(state=terminated(0, NOW, NOW), log=path, stamped=False))
    whole = read(pod)
    assert read(pod, tail_lines=tail) == "".join(whole.splitlines(keepends=True)[-tail:] if tail else [])


def test_following_yields_new_lines_until_the_process_ends(tmp_path: Path) -> None:
    path = stamped(tmp_path / "f.log", ["first"])
    process = ProcessRef(1, "1")
    live = view(container(log=path, process=process))
    ended = {"now": False}

    def refresh() -> PodView:
        return view(container(state=terminated(0, NOW, NOW), log=path)) if ended["now"] else live

    got: list[bytes] = []
    follower = threading.Thread(target=lambda: got.extend(pod_log(live, LogRequest(follow=True), refresh)))
    follower.start()
    time.sleep(0.5)
    with open(path, "a") as out:
        out.write(f"{STAMP} second\n{STAMP} thi")
    time.sleep(0.5)
    assert follower.is_alive() and b"".join(got) == b"first\nsecond\n"  # a half-written line waits for its end
    with open(path, "a") as out:
        out.write("rd\n")
    ended["now"] = True
    follower.join(timeout=10)
    assert not follower.is_alive() and b"".join(got) == b"first\nsecond\nthird\n"


def test_a_container_not_the_pods_or_not_named_or_not_started_is_one_error(tmp_path: Path) -> None:
    pod = view(container("a", log=tmp_path / "a.log"), container("b", log=tmp_path / "b.log"), name="two")
    with pytest.raises(UserError, match="^container c is not valid for pod two$"):
        container_of(pod, "c")
    with pytest.raises(UserError, match=r"^a container name must be specified for pod two, choose one of: \[a b\]$"):
        container_of(pod, None)
    waiting = view(container(state=Waiting("ContainerCreating"), log=tmp_path / "none.log"), name="w")
    with pytest.raises(UserError, match='container "main" in pod "w" is waiting to start: ContainerCreating'):
        read(waiting)


def test_a_deleted_pod_is_hidden_until_its_owner_runs_it_again_with_a_new_uid(home: Path) -> None:
    settings = load_settings()
    old = view(container(process=ProcessRef(10, "1")), name="d")
    deletions.record(settings, old, (ProcessRef(10, "1"),))
    gone = deletions.read(settings)
    assert deletions.shown(old, gone) is None
    assert deletions.shown(view(container(state=terminated(143, NOW, NOW)), name="d"), gone) is None
    again = deletions.shown(view(container(process=ProcessRef(11, "2")), name="d"), gone)
    assert again is not None and again.uid not in (old.uid, "")
    deletions.record(settings, again, (ProcessRef(11, "2"),))  # deleted a second time: another uid after
    third = deletions.shown(view(container(process=ProcessRef(12, "3")), name="d"), deletions.read(settings))
    assert third is not None and third.uid not in (old.uid, again.uid)
    other = view(container(), name="other")
    assert deletions.shown(other, gone) == other


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "c"}, False), ("a!=b", {}, True), ("a", {"a": ""}, True),
    ("!a", {"a": "x"}, False), ("a in (x, y),b", {"a": "y", "b": "1"}, True), ("a notin (x)", {"a": "x"}, False),
    ("training.kubeflow.org/replica-type=worker", {"training.kubeflow.org/replica-type": "worker"}, True),
    ("", {"any": "thing"}, True),
])
def test_label_selectors(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse(selector).matches(labels) is matches


@pytest.mark.parametrize("bad", ["a=b=c", "a in x", "=b", "a,,b"])
def test_a_selector_that_is_none_is_one_error(bad: str) -> None:
    with pytest.raises(UserError, match="unable to parse requirement"):
        parse(bad)


def test_a_queued_mpijobs_launcher_and_ranks_as_the_operators_pods() -> None:
    from millpond.pods.training_pods import job_pod
    from millpond.store.training import InstanceRecord, JobRecord
    from millpond.training.spec import JobSpec, ReplicaSpec, Trainer, spec_to_json

    spec = JobSpec(name="pi", namespace="team", trainer=Trainer.MPI, queue="lq", priority="high", image="mpi:1",
                   replicas=(ReplicaSpec("launcher", 1, ("mpirun", "hostname")), ReplicaSpec("worker", 2, ())))
    job = JobRecord(uid="7f0c1d2e-0000-4000-8000-000000000001", name="pi", namespace="team", trainer="mpijob",
                    spec=spec_to_json(spec), status="RUNNING", reason=None, message=None, created_at=NOW,
                    started_at=NOW, finished_at=None, supervisor_pid=None, supervisor_start=None, attempt=0, gpus=())
    launcher = job_pod(job, spec, InstanceRecord("pi-launcher", "launcher", 0, 0, "Running", pid=42, pid_start="9",
                                                 started_at=NOW))
    rank = job_pod(job, spec, InstanceRecord("pi-worker-1", "worker", 1, 1, "Running", started_at=NOW))
    assert (launcher.name, rank.name) == ("pi-launcher", "pi-worker-1")
    assert launcher.labels == {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/replica-type": "launcher",
                               "training.kubeflow.org/operator-name": "mpijob-controller",
                               "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/job-role": "master",
                               "kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": "high"}
    assert rank.labels["kueue.x-k8s.io/queue-name"] == "lq" and "training.kubeflow.org/job-role" not in rank.labels
    assert launcher.containers[0].name == "mpi" and launcher.containers[0].command == ("mpirun", "hostname")
    assert launcher.containers[0].process == ProcessRef(42, "9") and launcher.undeletable == ""
    assert rank.undeletable.startswith("pod pi-worker-1 runs as ranks of its launcher's mpirun")
    assert as_object(launcher)["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"


def test_a_trainjobs_node_pods_are_what_the_kubeflow_sdk_reads() -> None:
    """``TrainerClient`` converts the pods it lists into the Trainer API's models and reads their labels."""
    kubernetes = pytest.importorskip("kubernetes")
    models = pytest.importorskip("kubeflow_trainer_api.models")
    from millpond.pods.training_pods import job_pod
    from millpond.store.training import InstanceRecord, JobRecord
    from millpond.training.spec import JobSpec, ReplicaSpec, Trainer, spec_to_json

    manifest = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "torch:1"}}}
    spec = JobSpec(name="tj", namespace="default", trainer=Trainer.PYTORCH, manifest=manifest, source="manifest",
                   replicas=(ReplicaSpec("node", 2, ("torchrun", "train.py"), env=(("PET_NPROC_PER_NODE", "1"),)),))
    job = JobRecord(uid="7f0c1d2e-0000-4000-8000-000000000002", name="tj", namespace="default", trainer="pytorchjob",
                    spec=spec_to_json(spec), status="RUNNING", reason=None, message=None, created_at=NOW,
                    started_at=NOW, finished_at=None, supervisor_pid=None, supervisor_start=None, attempt=0, gpus=())
    shown = [as_object(job_pod(job, spec, InstanceRecord(f"tj-node-{i}", "node", i, i, "Running", started_at=NOW)))
             for i in range(2)]
    listed = kubernetes.client.ApiClient()._ApiClient__deserialize(
        {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": shown}, "V1PodList")
    pods = models.IoK8sApiCoreV1PodList.from_dict(listed.to_dict()).items  # as TrainerClient.get_job does
    assert [(p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"],
             p.metadata.labels["batch.kubernetes.io/job-completion-index"], p.status.phase) for p in pods] == [
        ("node", "0", "Running"), ("node", "1", "Running")]
    assert [c.name for c in pods[0].spec.containers] == ["node"] and pods[0].spec.containers[0].image == "torch:1"
    assert pods[0].metadata.name.startswith("tj-node-0-0-")
