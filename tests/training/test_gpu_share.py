"""GPU sharing: ``--gpumemory``/``--gpucore`` shares packed onto one GPU by the machine-wide ledger.

On the test-only fake inventory (``MILLPOND_FAKE_GPUS=1x16Gi``: one GPU of 16 GiB, no device
behind it) real training jobs run, share GPU 0 and see their limits in the environment; a share
that does not fit waits QUEUING naming GPU 0's free memory. Processes racing on the ledger never
over-commit a GPU (checked under the ledger's lock), kill -9 frees a share, an older ledger file
keeps its grants. With ``nvidia-smi`` (a GPU machine) two real PyTorch jobs share one real GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from millpond.runners.processes import own_identity
from millpond.scheduling import Holder, Ledger, Request
from millpond.scheduling import share_env as share_env_module
from millpond.scheduling.ledger import GpuShare
from millpond.scheduling.share_env import mps_running, share_env
from millpond.scheduling.sharing import GpuState, place
from millpond.store.training import JobStore
from millpond.training import gpu_share
from millpond.training.builder import CommonArgs, pytorch_spec
from millpond.training.spec import spec_from_json, spec_to_json
from tests.training_support import arena, instances, job_json, record, wait_status

GIB = 2**30
REPO = Path(__file__).resolve().parents[2]
SHOW = 'echo "dev=[$CUDA_VISIBLE_DEVICES] limit=$MILLPOND_GPU_MEMORY_LIMIT iso=$MILLPOND_GPU_ISOLATION"; '


@pytest.fixture
def one_gpu(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> Iterator[None]:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1x16Gi")  # test-only: one GPU of 16 GiB, no device behind it
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-mps"))  # no MPS daemon here, whatever the host
    yield
    for job in JobStore().list(None):  # a failed test leaves no job holding the ledger of a later run
        arena(capsys, "delete", job.name, "-n", job.namespace)


def _me(name: str = "test") -> Holder:
    pid, ticks = own_identity()
    return Holder(kind="job", name=name, pid=pid, start=ticks)


def _reason(name: str, needle: str) -> str:
    """The job's QUEUING message once it names ``needle`` (the ledger's answer follows the status)."""
    message = ""
    for _ in range(150):
        message = record(name).message or ""
        if needle in message:
            break
        time.sleep(0.1)
    return message


def _log(name: str) -> str:
    [instance] = instances(name)
    deadline = time.monotonic() + 30
    while True:
        text = Path(instance.log_path or "").read_text() if instance.log_path else ""
        if "dev=" in text or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def test_two_shares_run_together_on_one_gpu_and_a_third_waits_naming_its_free_memory(capsys, one_gpu) -> None:
    for name in ("a", "b"):
        assert arena(capsys, "submit", "pytorch", "--name", name, "--gpumemory", "6", SHOW + "sleep 300").code == 0
    for name in ("a", "b"):
        wait_status(capsys, name, ("RUNNING",), timeout=60)
    assert record("a").status == record("b").status == "RUNNING"  # at the same time, on one GPU
    for name in ("a", "b"):
        assert _log(name).strip().endswith(f" dev=[0] limit={6 * GIB} iso=cooperative")
        assert [i.gpus for i in instances(name)] == [(0,)]
    shown = arena(capsys, "get", "a").out
    assert "GPUShare:   master: 6 GiB of one GPU's memory" in shown and " 6GiB " in shown
    assert job_json(capsys, "a")["requestGPUMemory"] == 6 and job_json(capsys, "a")["requestGPUs"] == 0
    top_job = arena(capsys, "top", "job", "a").out
    assert "a-master-0" in top_job and " 6GiB " in top_job
    assert arena(capsys, "submit", "pytorch", "--name", "c", "--gpumemory", "6", SHOW + "sleep 300").code == 0
    assert arena(capsys, "submit", "pytorch", "--name", "whole", "--gpus", "1", SHOW).code == 0
    reason = _reason("c", "GPU 0")
    assert record("c").status == "QUEUING"
    assert "needs a share of 6.0 GiB of one GPU; GPU 0: 4.0 of 16.0 GiB free (shared by job default/" in reason
    assert "default/a" in reason and "default/b" in reason
    assert "needs 1 GPU, 0 free" in _reason("whole", "GPU")  # a whole GPU never goes to shares' GPU
    shares = arena(capsys, "top", "node", "-s")
    assert shares.code == 0 and "GPU0(Allocated/Total)" in shares.out and " 12/16 " in shares.out
    assert arena(capsys, "delete", "a").code == 0
    wait_status(capsys, "c", ("RUNNING",), timeout=60)  # a's share freed: c runs beside b
    assert record("whole").status == "QUEUING"
    for name in ("b", "c"):
        assert arena(capsys, "delete", name).code == 0
    assert wait_status(capsys, "whole")["status"] == "SUCCEEDED"
    assert arena(capsys, "logs", "whole").out.strip() == "dev=[0] limit= iso="


@pytest.mark.parametrize(("flags", "error"), [
    (["--gpumemory", "-1"], "error: --gpumemory -1 is negative"),
    (["--gpumemory", "4", "--gpucore", "101"], "error: --gpucore 101 must be a percent of one GPU, 1 to 100"),
    (["--gpucore", "30"], "error: --gpucore needs --gpumemory: a GPU share is admitted by its memory"),
    (["--gpumemory", "4", "--gpus", "1"],
     "error: --gpumemory asks for part of one GPU; it cannot be given with --gpus 1"),
    (["--gpumemory", "17"], "error: the job bad can never run here: requests 17.0 GiB of one GPU's memory "
                            "but the largest GPU here has 16.0 GiB"),
])
def test_a_bad_share_is_one_error_line_and_nothing_stored(capsys, one_gpu, flags: list[str], error: str) -> None:
    result = arena(capsys, "submit", "pytorch", "--name", "bad", *flags, "true")
    assert (result.code, result.err) == (2, error + "\n")
    assert JobStore().list(None) == []


def test_a_fake_inventory_without_memory_refuses_shares_saying_how(capsys, home, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1")  # the plain count still works, for whole GPUs
    result = arena(capsys, "submit", "pytorch", "--name", "bad", "--gpumemory", "4", "true")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "MILLPOND_FAKE_GPUS declares GPUs without memory (give N x SIZE, like 1x16Gi" in result.err
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1xlots")
    result = arena(capsys, "submit", "pytorch", "--name", "bad", "--gpus", "1", "true")
    assert result.code == 2 and result.err.startswith("error: MILLPOND_FAKE_GPUS='1xlots': the memory of each GPU")


def _worker(home: Path, *args: object, gpus: str = "2x16Gi") -> subprocess.Popen[str]:
    env = {**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_FAKE_GPUS": gpus}
    return subprocess.Popen([sys.executable, "-m", "tests.gpu_share_worker", *map(str, args)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_processes_racing_for_shares_never_over_commit_a_gpu(home: Path) -> None:
    racers = [_worker(home, "race", 80) for _ in range(3)]
    try:
        outputs = [racer.communicate(timeout=300) for racer in racers]
    finally:
        for racer in racers:
            racer.kill()
    for racer, (out, err) in zip(racers, outputs, strict=True):
        assert racer.returncode == 0, out + err  # 3: the ledger held more than a GPU has, or a GPU twice
    assert Ledger().grants() == []


def test_a_share_holder_killed_with_kill_9_frees_its_share(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1x16Gi")
    holder = _worker(home, "hold", 10, gpus="1x16Gi")
    try:
        assert holder.stdout is not None and json.loads(holder.stdout.readline()) == [0]
        ledger = Ledger()
        assert ledger.try_acquire(Request(shares=(GpuShare(10 * GIB),)), _me()) is None  # 6 GiB free
    finally:
        holder.kill()  # SIGKILL: it gives nothing back
        holder.wait(timeout=60)
    grant = ledger.try_acquire(Request(shares=(GpuShare(10 * GIB),)), _me())
    assert grant is not None and grant.share_gpus == (0,)
    assert [g.holder.pid for g in ledger.grants()] == [os.getpid()]


OLD_SCHEMA = """
CREATE TABLE grants (id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, pid INTEGER NOT NULL, start TEXT,
    boot TEXT NOT NULL, cpu_millis INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, gpus_requested INTEGER NOT NULL,
    granted_at TEXT NOT NULL);
CREATE TABLE gpus (idx INTEGER PRIMARY KEY, grant_id TEXT NOT NULL REFERENCES grants(id));
"""


def test_a_ledger_from_before_gpu_sharing_keeps_its_live_grants(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2x16Gi")
    home.mkdir(parents=True)
    pid, ticks = own_identity()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    with sqlite3.connect(home / "ledger.db") as db:  # written as the ledger before this change wrote it
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO grants VALUES ('old', 'job', 'default/old', ?, ?, ?, 0, 0, 1, '2026-01-01')",
                   (pid, ticks, boot))
        db.execute("INSERT INTO gpus VALUES (0, 'old')")
    ledger = Ledger()
    [old] = ledger.grants()
    assert (old.id, old.gpus, old.request.shares) == ("old", (0,), ())
    grant = ledger.try_acquire(Request(shares=(GpuShare(4 * GIB),)), _me("new"))
    assert grant is not None and grant.share_gpus == (1,)  # GPU 0 is held whole: the share goes to GPU 1
    assert ledger.try_acquire(Request(gpus=1), _me("whole")) is None  # GPU 1 is shared now
    assert "GPU 0: held whole by job default/old" in ledger.why_waiting(Request(shares=(GpuShare(13 * GIB),)))


def test_shares_are_packed_on_the_fullest_gpu_that_fits() -> None:
    gpus = [GpuState(0, 16 * GIB, memory_shared=6 * GIB, shared_by=("a",)), GpuState(1, 16 * GIB),
            GpuState(2, 16 * GIB, whole_by="job w")]
    assert place((GpuShare(4 * GIB),), gpus) == (0,)  # 10 GiB free on 0, 16 on 1: the fuller one
    assert place((GpuShare(12 * GIB),), gpus) == (1,)
    assert place((GpuShare(10 * GIB), GpuShare(10 * GIB)), gpus) == (0, 1)
    assert place((GpuShare(10 * GIB),) * 3, gpus) is None  # all or nothing; never the GPU held whole
    cores = [GpuState(0, 16 * GIB, memory_shared=GIB, core_shared=80, shared_by=("a",)), GpuState(1, 16 * GIB)]
    assert place((GpuShare(GIB, 30),), cores) == (1,)  # GPU 0 has the memory but 20% of its cores


def test_the_environment_says_which_isolation_a_share_gets(tmp_path: Path) -> None:
    pipe = tmp_path / "mps"
    assert not mps_running({"CUDA_MPS_PIPE_DIRECTORY": str(pipe)})
    pipe.mkdir()
    (pipe / "nvidia-cuda-mps-control.pid").write_text(f"{os.getpid()}\n")  # a live control daemon's pid file
    assert mps_running({"CUDA_MPS_PIPE_DIRECTORY": str(pipe)})
    env = share_env((0,), GpuShare(6 * GIB, 30), (16 * GIB,), mps=True)
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=6G" and env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["MILLPOND_GPU_ISOLATION"] == "mps" and env["MILLPOND_GPU_MEMORY_FRACTION"] == "0.3750"
    assert (env["ALIYUN_COM_GPU_MEM_CONTAINER"], env["ALIYUN_COM_GPU_MEM_DEV"]) == ("6", "16")
    cooperative = share_env((1,), GpuShare(5 * GIB), (15 * GIB,), mps=False)
    assert cooperative["MILLPOND_GPU_MEMORY_FRACTION"] == "0.3333"  # rounded down, never over the share
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in cooperative and cooperative["CUDA_VISIBLE_DEVICES"] == "1"
    assert gpu_share.FRACTION_VAR == share_env_module.FRACTION_VAR


def test_a_stored_spec_keeps_its_share_and_one_without_is_stored_as_before() -> None:
    shared = pytorch_spec(CommonArgs(name="s", command=("true",), gpumemory=4, gpucore=50, workers=2))
    data = json.loads(json.dumps(spec_to_json(shared)))
    assert spec_from_json(data) == shared and spec_from_json(data).total.shares == (GpuShare(4 * GIB, 50),) * 2
    plain = spec_to_json(pytorch_spec(CommonArgs(name="p", command=("true",), gpus=1)))
    assert "shares" not in json.dumps(plain)


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs a real GPU (nvidia-smi)")
def test_two_real_jobs_share_one_real_gpu_by_memory(capsys, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU machine: two jobs of a third of GPU 0's memory each run at once on it; each one's PyTorch,
    capped by ``gpu_share.apply()``, allocates within its share and fails past it."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("MILLPOND_FAKE_GPUS", raising=False)  # the real GPU, its memory from nvidia-smi
    monkeypatch.delenv("MILLPOND_GPUS", raising=False)
    third = int(torch.cuda.get_device_properties(0).total_memory // GIB // 3)
    script = Path(home.parent / "share.py")
    script.write_text(
        "import time, torch\n"
        "from millpond.training.gpu_share import apply\n"
        "fraction = apply()\n"
        "total = torch.cuda.get_device_properties(0).total_memory\n"
        "inside = torch.empty(int(total * fraction * 0.8), dtype=torch.uint8, device='cuda')\n"
        "try:\n"
        "    torch.empty(int(total * fraction * 0.5), dtype=torch.uint8, device='cuda')\n"
        "    print('past the share: allocated', flush=True)\n"
        "except torch.cuda.OutOfMemoryError:\n"
        "    print(f'capped at {fraction}', flush=True)\n"
        "time.sleep(5)\n"
    )
    for name in ("g1", "g2"):
        assert arena(capsys, "submit", "pytorch", "--name", name, "--gpumemory", third,
                     f"{sys.executable} {script}").code == 0
    for name in ("g1", "g2"):
        wait_status(capsys, name, ("RUNNING",), timeout=120)
    for name in ("g1", "g2"):
        assert wait_status(capsys, name, timeout=300)["status"] == "SUCCEEDED"
        assert arena(capsys, "logs", name).out.strip().startswith("capped at 0.")
        assert [i.gpus for i in instances(name)] == [(0,)]


def _pytorchjob(limits: dict[str, object]) -> dict[str, object]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"], "resources": {"limits": limits}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "m", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                "containers": [container]}}}}}}


def test_a_pytorchjob_asking_aliyun_gpu_mem_holds_a_share(cli, one_gpu, tmp_path: Path) -> None:
    from millpond.training.kinds import KINDS
    from millpond.training.manifests import replica_job_spec

    spec, _ = replica_job_spec(KINDS["PyTorchJob"], _pytorchjob({"aliyun.com/gpu-mem": "5.5",
                                                                "aliyun.com/gpu-core.percentage": 25}))
    assert spec.total.shares == (GpuShare(int(5.5 * GIB), 25),) and spec.total.gpus == 0
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(_pytorchjob({"aliyun.com/gpu-mem": 4, "nvidia.com/gpu": 1})))
    refused = cli("apply", "-f", path)
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert "a GPU share cannot be asked with nvidia.com/gpu 1" in refused.err
    assert JobStore().list(None) == []


def test_each_instance_holding_a_share_sees_its_gpu_and_an_mpi_launcher_all_its_workers(tmp_path: Path) -> None:
    from millpond.training.builder import TfArgs, mpi_spec, tf_spec
    from millpond.training.launch import plan
    from millpond.training.launch_share import with_shares

    def memory_of(index: int) -> int:
        return 16 * GIB

    mpi = mpi_spec(CommonArgs(name="m", command=("mpirun", "python", "x.py"), gpumemory=4, workers=2))
    planned = with_shares(mpi, plan(mpi, (), 1234, tmp_path), (0, 1), memory_of, False)
    launcher, *workers = planned
    assert launcher.env["CUDA_VISIBLE_DEVICES"] == "0,1" and launcher.env["MILLPOND_GPU_MEMORY_FRACTION"] == "0.2500"
    assert [w.gpus for w in workers] == [(0,), (1,)]
    tf = tf_spec(CommonArgs(name="t", command=("true",), gpumemory=4, workers=1), TfArgs(chief=True, ps=1))
    by_role = {p.role: p for p in with_shares(tf, plan(tf, (), 1234, tmp_path), (1, 1), memory_of, True)}
    assert by_role["chief"].env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4G" and by_role["worker"].gpus == (1,)
    assert by_role["ps"].env["CUDA_VISIBLE_DEVICES"] == "" and "MILLPOND_GPU_MEMORY_LIMIT" not in by_role["ps"].env


@settings(max_examples=200, deadline=None)
@given(totals=st.lists(st.integers(0, 32), min_size=1, max_size=4),
       used=st.lists(st.tuples(st.integers(0, 32), st.integers(0, 100)), min_size=4, max_size=4),
       whole=st.sets(st.integers(0, 3)),
       shares=st.lists(st.tuples(st.integers(1, 33), st.integers(0, 100)), min_size=1, max_size=4))
def test_placement_never_over_commits_and_takes_the_fullest_gpu_that_fits(totals, used, whole, shares) -> None:
    gpus = [GpuState(n, total * GIB, min(used[n][0], total) * GIB, used[n][1], "w" if n in whole else "")
            for n, total in enumerate(totals)]
    asked = tuple(GpuShare(gib * GIB, cores) for gib, cores in shares)
    placed = place(asked, gpus)
    if placed is None:  # nothing fits together: at least the largest one has no GPU of its own that fits it
        return
    after = {gpu.index: gpu for gpu in gpus}
    for index, share in zip(placed, asked, strict=True):
        assert not after[index].whole_by
        after[index] = after[index].plus(share, "x")
    assert all(gpu.memory_free >= 0 and gpu.core_free >= 0 for gpu in after.values())
    if len(asked) == 1:
        fitting = [gpu for gpu in gpus if gpu.fits(asked[0])]
        assert placed[0] == min(fitting, key=lambda gpu: (gpu.memory_free, gpu.index)).index


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=20))
@example(text="²")
@example(text="2x16Gi")
@example(text="1x0")
def test_any_fake_inventory_text_is_read_or_refused_in_one_line(text: str) -> None:
    from millpond.errors import UserError
    from millpond.settings import _fake_gpus

    if "\x00" in text:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MILLPOND_FAKE_GPUS", text)
        try:
            count, memory = _fake_gpus()
        except UserError as exc:
            assert "\n" not in str(exc) and "MILLPOND_FAKE_GPUS" in str(exc)
            return
    assert count is not None and count >= 0 and (memory is None or memory > 0)


def test_the_cooperative_hook_reads_its_share_and_does_nothing_without_one(monkeypatch) -> None:
    monkeypatch.delenv("MILLPOND_GPU_MEMORY_FRACTION", raising=False)
    assert gpu_share.fraction() is None and gpu_share.apply() is None  # no share: torch is not even imported
    for text, expected in (("0.3750", 0.375), ("1", 1.0), ("0", None), ("1.5", None), ("nan", None), ("x", None)):
        monkeypatch.setenv("MILLPOND_GPU_MEMORY_FRACTION", text)
        assert gpu_share.fraction() == expected
