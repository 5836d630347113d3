"""MPI and TF jobs with real processes: a 2-rank mpirun job whose ranks check Open MPI's variables and
exchange their ranks through files, a real MPI_Allreduce (where mpicc is installed), a failing rank failing
the job, deleting a running job stopping its ranks, a TF job whose replicas check their
TF_CONFIG (and bind their own address), the planners' shapes, and bad input."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from millpond.runners.processes import start_ticks
from millpond.store.training import JobStore
from millpond.training.builder import CommonArgs, TfArgs, mpi_spec, tf_spec
from millpond.training.launch import plan
from tests.training_support import arena, gone, instances, wait_status


def _mpicc_builds() -> bool:
    """Whether mpicc is here with Open MPI's headers (openmpi-bin brings mpicc, libopenmpi-dev mpi.h)."""
    if not shutil.which("mpicc"):
        return False
    found = subprocess.run(["mpicc", "-E", "-x", "c", "-"], input="#include <mpi.h>\n", capture_output=True, text=True)
    return found.returncode == 0


needs_mpirun = pytest.mark.skipif(
    not shutil.which("mpirun"),
    reason="mpirun is not installed (Debian's openmpi-bin; scripts/setup.sh installs it, as CI does)")

RANK_SCRIPT = textwrap.dedent("""\
    import os, sys, time
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    assert size == 2 and os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] == "2", dict(os.environ)
    assert os.environ["OMPI_MCA_orte_set_default_slots"] == "1"
    assert os.environ["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    with open(os.environ["OMPI_MCA_orte_default_hostfile"]) as hostfile:
        assert hostfile.read() == "localhost slots=2\\n"
    out = sys.argv[1]
    with open(f"{out}/rank-{rank}.tmp", "w") as mine:
        mine.write(f"{rank} {os.getpid()}")
    os.rename(f"{out}/rank-{rank}.tmp", f"{out}/rank-{rank}")
    other = f"{out}/rank-{1 - rank}"
    deadline = time.monotonic() + 60
    while not os.path.exists(other):
        assert time.monotonic() < deadline, "the other rank never wrote"
        time.sleep(0.05)
    seen = open(other).read().split()
    assert int(seen[0]) == 1 - rank and int(seen[1]) != os.getpid()
    print(f"rank {rank} of {size} saw rank {seen[0]}", flush=True)
""")

TF_SCRIPT = textwrap.dedent("""\
    import json, os, socket
    raw = os.environ["TF_CONFIG"]
    config = json.loads(raw)
    assert list(config) == ["cluster", "task", "environment"] and config["environment"] == "cloud", raw
    assert list(config["task"]) == ["type", "index"], raw
    cluster, task = config["cluster"], config["task"]
    assert list(cluster) == ["chief", "ps", "worker"], raw
    assert [len(cluster[k]) for k in ("chief", "ps", "worker")] == [1, 1, 2], raw
    addresses = [a for k in cluster for a in cluster[k]]
    assert len(set(addresses)) == 4 and all(a.startswith("127.0.0.1:") for a in addresses), raw
    host, port = cluster[task["type"]][task["index"]].split(":")
    with socket.socket() as server:
        server.bind((host, int(port)))  # its own address is free for it to serve on
    print("TF_CONFIG " + raw, flush=True)
""")


def _args(**values) -> CommonArgs:
    return CommonArgs(**{"name": "j", "command": ("python", "train.py"), **values})


def test_the_mpi_planner_writes_a_hostfile_of_local_slots_and_maps_ranks_to_workers(tmp_path: Path) -> None:
    spec = mpi_spec(_args(workers=2, gpus=2, command=("mpirun", "python", "train.py")))
    assert [(r.role, r.replicas, r.resources.gpus) for r in spec.replicas] == [("launcher", 1, 0), ("worker", 2, 2)]
    launcher, *workers = plan(spec, (0, 1, 2, 3), 0, tmp_path)
    assert launcher.name == "j-launcher-0" and launcher.argv == ("sh", "-c", "mpirun python train.py")
    assert launcher.files == ((tmp_path / "hostfile", "localhost slots=4\n"),)
    assert launcher.env["OMPI_MCA_orte_default_hostfile"] == str(tmp_path / "hostfile")
    assert launcher.env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert launcher.env["OMPI_ALLOW_RUN_AS_ROOT"] == launcher.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert launcher.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert launcher.rank_logs == ("j-worker-0", "j-worker-0", "j-worker-1", "j-worker-1")
    assert [(w.name, w.gpus, w.started_by, w.argv) for w in workers] == [
        ("j-worker-0", (0, 1), "j-launcher-0", ()), ("j-worker-1", (2, 3), "j-launcher-0", ())]


def test_the_tf_planner_leaves_the_evaluator_out_of_the_cluster(tmp_path: Path) -> None:
    spec = tf_spec(_args(workers=1), TfArgs(ps=1, chief=True, evaluator=True))
    planned = plan(spec, (), 0, tmp_path)
    assert [p.name for p in planned] == ["j-chief-0", "j-worker-0", "j-ps-0", "j-evaluator-0"]
    configs = [json.loads(p.env["TF_CONFIG"]) for p in planned]
    assert [c["task"] for c in configs] == [{"type": "chief", "index": 0}, {"type": "worker", "index": 0},
                                            {"type": "ps", "index": 0}, {"type": "evaluator", "index": 0}]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    assert sorted(configs[0]["cluster"]) == ["chief", "ps", "worker"]
    assert planned[0].env["TF_CONFIG"].startswith('{"cluster":{"chief":["127.0.0.1:')  # Go's compact JSON


@needs_mpirun
def test_a_two_rank_mpi_job_runs_its_ranks_as_the_workers(capsys, home: Path, tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    submitted = arena(capsys, "submit", "mpi", "--name", "mpi2", "--workers", "2", "mpirun",
                      sys.executable, script, out)
    assert submitted.code == 0, submitted.err
    assert "mpijob.kubeflow.org/mpi2 created" in submitted.out
    info = wait_status(capsys, "mpi2")
    launcher_log = arena(capsys, "logs", "mpi2").out
    assert info["status"] == "SUCCEEDED", launcher_log
    assert info["trainer"] == "mpijob"
    assert [(i["name"], i["status"], i["chief"]) for i in info["instances"]] == [
        ("mpi2-launcher-0", "Succeeded", True), ("mpi2-worker-0", "Succeeded", False),
        ("mpi2-worker-1", "Succeeded", False)], info
    pids = {int((out / f"rank-{rank}").read_text().split()[1]) for rank in (0, 1)}
    assert len(pids) == 2  # two processes: mpirun's two ranks
    assert "rank 0 of 2 saw rank 1" in launcher_log and "rank 1 of 2 saw rank 0" in launcher_log, launcher_log
    assert "[1," not in launcher_log, launcher_log  # the rank tags are taken off
    worker_1 = arena(capsys, "logs", "mpi2", "-i", "mpi2-worker-1")
    assert worker_1.code == 0 and worker_1.out.strip() == "rank 1 of 2 saw rank 0", (worker_1, launcher_log)
    worker_0 = arena(capsys, "logs", "mpi2", "-i", "mpi2-worker-0", "--timestamps").out.strip()
    assert worker_0.endswith(" rank 0 of 2 saw rank 1") and worker_0.startswith("20"), worker_0
    rows = arena(capsys, "get", "mpi2").out
    assert "mpi2-launcher-0" in rows and "mpi2-worker-1" in rows


ALLREDUCE_C = textwrap.dedent("""\
    #include <mpi.h>
    #include <stdio.h>
    int main(int argc, char **argv) {
        int rank, size, value, sum;
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        value = rank + 1;
        MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        printf("rank %d of %d sum %d\\n", rank, size, sum);
        MPI_Finalize();
        return sum == size * (size + 1) / 2 ? 0 : 1;
    }
""")


@needs_mpirun
@pytest.mark.skipif(not _mpicc_builds(), reason="mpicc or mpi.h is not installed (Debian's libopenmpi-dev)")
def test_a_real_mpi_allreduce_runs_across_the_workers(capsys, home: Path, tmp_path: Path) -> None:
    source = tmp_path / "allreduce.c"
    source.write_text(ALLREDUCE_C)
    subprocess.run(["mpicc", "-o", str(tmp_path / "allreduce"), str(source)], check=True)
    assert arena(capsys, "submit", "mpi", "--name", "allreduce", "--workers", "2", "mpirun",
                 tmp_path / "allreduce").code == 0
    info = wait_status(capsys, "allreduce")
    assert info["status"] == "SUCCEEDED", arena(capsys, "logs", "allreduce").out
    for rank in (0, 1):
        shown = arena(capsys, "logs", "allreduce", "-i", f"allreduce-worker-{rank}").out.strip()
        assert shown == f"rank {rank} of 2 sum 3"


@needs_mpirun
def test_a_failing_rank_fails_the_mpi_job_and_stops_the_others(capsys, home: Path) -> None:
    began = time.monotonic()
    line = 'mpirun sh -c \'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then echo bad rank; exit 3; fi; sleep 120\''
    assert arena(capsys, "submit", "mj", "--name", "mpi-fail", "--workers", "2", line).code == 0
    info = wait_status(capsys, "mpi-fail", timeout=90)
    assert info["status"] == "FAILED"
    assert time.monotonic() - began < 60  # rank 0's sleep was cut short
    job = JobStore().get("mpi-fail", "default")
    assert job is not None and job.message and job.message.startswith("mpi-fail-launcher-0 exited with code ")
    assert [(i.name, i.status) for i in instances("mpi-fail")] == [
        ("mpi-fail-launcher-0", "Failed"), ("mpi-fail-worker-0", "Failed"), ("mpi-fail-worker-1", "Failed")]
    assert arena(capsys, "logs", "mpi-fail", "-i", "mpi-fail-worker-1").out.strip() == "bad rank"


@needs_mpirun
def test_deleting_a_running_mpi_job_stops_its_ranks(capsys, home: Path, tmp_path: Path) -> None:
    """mpirun puts each rank in a process group of its own: the launcher's whole session is stopped."""
    line = f'mpirun sh -c \'echo $$ > {tmp_path}/pid-$OMPI_COMM_WORLD_RANK; exec sleep 300\''
    assert arena(capsys, "submit", "mpi", "--name", "mpi-del", "--workers", "2", line).code == 0
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("pid-*"))) < 2:
        assert time.monotonic() < deadline, arena(capsys, "get", "mpi-del", "-e").out
        time.sleep(0.1)
    ranks = [int(path.read_text()) for path in sorted(tmp_path.glob("pid-*"))]
    ticks = [start_ticks(pid) for pid in ranks]
    assert all(ticks), "the ranks are running"
    assert arena(capsys, "delete", "mpi-del").code == 0
    assert all(gone(pid, tick) for pid, tick in zip(ranks, ticks, strict=True))


def test_a_tf_job_gives_each_replica_its_tf_config(capsys, home: Path, tmp_path: Path) -> None:
    script = tmp_path / "tf.py"
    script.write_text(TF_SCRIPT)
    submitted = arena(capsys, "submit", "tfjob", "--name", "tf", "--chief", "--workers", "2", "--ps", "1",
                      "--worker-port", "2222", sys.executable, script)
    assert submitted.code == 0, submitted.err
    assert "--worker-port only means something on a Kubernetes cluster" in submitted.err
    info = wait_status(capsys, "tf")
    assert info["status"] == "SUCCEEDED", arena(capsys, "get", "tf", "-e").out
    names = [i["name"] for i in info["instances"]]
    assert names == ["tf-chief-0", "tf-worker-0", "tf-worker-1", "tf-ps-0"]
    configs = {}
    for name in names:
        (line,) = arena(capsys, "logs", "tf", "-i", name).out.splitlines()
        configs[name] = json.loads(line.removeprefix("TF_CONFIG "))
    assert {name: c["task"] for name, c in configs.items()} == {
        "tf-chief-0": {"type": "chief", "index": 0}, "tf-worker-0": {"type": "worker", "index": 0},
        "tf-worker-1": {"type": "worker", "index": 1}, "tf-ps-0": {"type": "ps", "index": 0}}
    cluster = configs["tf-chief-0"]["cluster"]
    assert all(c["cluster"] == cluster and c["environment"] == "cloud" for c in configs.values())


BAD = [
    (["submit", "mpi", "--name", "j", "--workers", "0", "true"], "--workers 0: an mpi job has at least 1 worker"),
    (["submit", "mpijob", "--name", "j", "--nproc-per-node", "2", "true"], "--nproc-per-node is a pytorch flag"),
    (["submit", "mpi", "--name", "j"], "no command"),
    (["submit", "tf", "--name", "j", "--workers", "0", "true"], "--workers 0: a tf job has at least 1 worker"),
    (["submit", "tf", "--name", "j", "--ps", "-1", "true"], "--ps -1 is negative"),
    (["submit", "tf", "--name", "j", "--ps", "1", "--ps-memory", "lots", "true"], "--ps-memory"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a[:2] + a[4:]) for a, _ in BAD])
def test_bad_mpi_and_tf_input_is_one_error_line_and_records_nothing(capsys, home: Path, args, says) -> None:
    result = arena(capsys, *args)
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert JobStore().list(None) == []


def test_the_sdk_builders_make_mpi_and_tf_specs() -> None:
    from millpond.training import MPIJobBuilder, TFJobBuilder

    mpi = MPIJobBuilder().with_name("m").with_workers(2).with_gpus(0).with_command("mpirun python x.py").build()
    assert [(r.role, r.replicas) for r in mpi.replicas] == [("launcher", 1), ("worker", 2)]
    tf = (TFJobBuilder().with_name("t").with_workers(2).with_ps_count(1).enable_chief().enable_evaluator()
          .with_command("python x.py").build())
    assert [(r.role, r.replicas) for r in tf.replicas] == [("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1)]
    assert tf.trainer.value == "tfjob" and mpi.trainer.value == "mpijob"


def test_an_mpi_job_without_workers_is_refused(home: Path) -> None:
    """A Launcher-only MPIJob (from a manifest) has no ranks to run here: one line, nothing recorded."""
    from millpond.errors import UserError
    from millpond.training import jobs
    from millpond.training.spec import JobSpec, ReplicaSpec, Trainer

    spec = JobSpec("solo", "default", Trainer.MPI, (ReplicaSpec("launcher", 1, ("mpirun", "true")),))
    with pytest.raises(UserError, match="one launcher and at least one worker"):
        jobs.check(spec)
    assert JobStore().list(None) == []


def test_a_rank_line_mpirun_tagged_twice_is_logged_without_its_tags(tmp_path: Path) -> None:
    """mpirun tags each chunk it reads: a line written in two pieces carries its rank's tag inside (seen in CI)."""
    from millpond.training.instances import _copy

    output = io.BytesIO(b"[1,0]<stdout>:rank 0 of 2 saw rank 1[1,0]<stdout>:\n[1,1]<stdout>:rank 1 saw 0\n")
    _copy(output, tmp_path / "launcher.log", [tmp_path / "w0.log", tmp_path / "w1.log"])
    launcher = [line.split(" ", 1)[1] for line in (tmp_path / "launcher.log").read_text().splitlines()]
    assert launcher == ["rank 0 of 2 saw rank 1", "rank 1 saw 0"]
    assert (tmp_path / "w0.log").read_text().split(" ", 1)[1] == "rank 0 of 2 saw rank 1\n"
    assert (tmp_path / "w1.log").read_text().split(" ", 1)[1] == "rank 1 saw 0\n"


def _slots_mpijob(slots: object) -> dict:
    """An MPIJob (v2beta1) whose launcher echoes each rank; its workers' own command (sshd) is not run here."""
    echo = 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"'
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "slots", "namespace": "default"},
            "spec": {"slotsPerWorker": slots, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "launcher", "image": "x", "command": ["mpirun", "sh", "-c", echo]}]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                    {"name": "worker", "image": "x", "command": ["/usr/sbin/sshd", "-De"]}]}}}}}}


def test_slots_per_worker_sets_the_hostfile_and_each_workers_ranks(tmp_path: Path) -> None:
    """mpi-operator's meaning: each worker has slotsPerWorker slots, ranks = workers × slots, rank r on worker r//S."""
    from millpond.errors import UserError
    from millpond.training.kinds import KINDS
    from millpond.training.manifests import replica_job_spec

    spec, _ = replica_job_spec(KINDS["MPIJob"], _slots_mpijob(3))
    assert spec.slots_per_worker == 3
    launcher, *workers = plan(spec, (), 0, tmp_path)
    assert launcher.files == ((tmp_path / "hostfile", "localhost slots=6\n"),)
    assert launcher.env["OMPI_MCA_orte_set_default_slots"] == "3"
    assert launcher.rank_logs == ("slots-worker-0",) * 3 + ("slots-worker-1",) * 3
    assert [w.rank for w in workers] == [0, 3]
    with pytest.raises(UserError, match="spec.slotsPerWorker: 0 is below the minimum 1"):
        replica_job_spec(KINDS["MPIJob"], _slots_mpijob(0))


@needs_mpirun
def test_an_mpijob_with_two_slots_per_worker_runs_four_ranks(cli, capsys, home: Path, tmp_path: Path) -> None:
    import yaml

    manifest = tmp_path / "slots.yaml"
    manifest.write_text(yaml.safe_dump(_slots_mpijob(2)))
    applied = cli("apply", "-f", manifest)
    assert applied.code == 0, applied.err
    info = wait_status(capsys, "slots")
    launcher_log = arena(capsys, "logs", "slots").out
    assert info["status"] == "SUCCEEDED", launcher_log
    for worker, ranks in (("slots-worker-0", (0, 1)), ("slots-worker-1", (2, 3))):
        lines = sorted(arena(capsys, "logs", "slots", "-i", worker).out.split("\n"))[1:]
        assert lines == [f"rank {rank} of 4" for rank in ranks], (worker, lines, launcher_log)
