"""The machine-wide ledger: real processes draw GPUs from one home, get killed, and run pipelines at once.

No mocks: every holder is a process of its own, killed with a real SIGKILL; the GPUs are the
test-only ``MILLPOND_FAKE_GPUS`` ones (indices the scheduler hands out, no device behind them).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millpond.runners.processes import own_identity
from millpond.scheduling import Holder, Ledger, Request
from millpond.settings import Settings, load_settings
from millpond.store.journal import open_journal
from millpond.store.runs import RunStore
from tests.conftest import PIPELINES, spawn_cli

RESOURCES = PIPELINES / "resources.py"
REPO = Path(__file__).resolve().parents[2]


def _worker(home: Path, *args: object, gpus: int = 2) -> subprocess.Popen[str]:
    env = {**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_FAKE_GPUS": str(gpus)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ledger_worker", *[str(a) for a in args]],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _me(name: str = "test") -> Holder:
    pid, ticks = own_identity()
    return Holder(kind="job", name=name, pid=pid, start=ticks)


def test_processes_acquiring_at_once_never_hold_the_same_gpu(home: Path, tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    claims.mkdir()
    racers = [_worker(home, "race", 120, claims) for _ in range(3)]
    try:
        outputs = [racer.communicate(timeout=300) for racer in racers]
    finally:
        for racer in racers:
            racer.kill()
    for racer, (out, err) in zip(racers, outputs, strict=True):
        assert racer.returncode == 0, out + err  # 3: two processes held one index at once
    latencies = sorted(s for out, _ in outputs for s in json.loads(out.splitlines()[-1]))
    print(f"try_acquire: median {statistics.median(latencies) * 1e3:.2f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.2f} ms over {len(latencies)} calls")
    assert Ledger().grants() == []  # every grant was given back


def test_a_holder_killed_with_kill_9_has_its_gpus_reclaimed(
    cli, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")
    holder = _worker(home, "hold", 2)
    assert holder.stdout is not None
    assert json.loads(holder.stdout.readline()) == [0, 1]
    ledger = Ledger()
    assert ledger.try_acquire(Request(gpus=1), _me()) is None
    assert ledger.why_waiting(Request(gpus=1)) == f"needs 1 GPU, 0 free (held by task holder-{holder.pid})"
    assert [g.holder.pid for g in ledger.grants()] == [holder.pid]
    listed = [row for row in cli("ps", "-o", "json").json() if row["pid"] == holder.pid]
    rows = [(r["kind"], r["object"], r["state"]) for r in listed]
    assert rows == [("task", f"holder-{holder.pid}", "holds GPUs 0,1")]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=60)
    grant = ledger.try_acquire(Request(gpus=2), _me())  # the dead holder's grant is reclaimed here
    assert grant is not None and grant.gpus == (0, 1)
    assert [(g.holder.name, g.gpus) for g in ledger.grants()] == [("test", (0, 1))]
    ledger.release(grant.id)
    ledger.release(grant.id)  # twice: no error
    assert ledger.grants() == []


def test_a_killed_holder_that_is_not_yet_reaped_counts_as_gone(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1")
    holder = _worker(home, "hold", 1, gpus=1)
    assert holder.stdout is not None and json.loads(holder.stdout.readline()) == [0]
    os.kill(holder.pid, signal.SIGKILL)
    try:  # a zombie until wait(): its pid still exists, but it holds nothing
        deadline_grant = None
        for _ in range(600):
            deadline_grant = Ledger().try_acquire(Request(gpus=1), _me())
            if deadline_grant is not None:
                break
            os.sched_yield()
        assert deadline_grant is not None and deadline_grant.gpus == (0,)
    finally:
        holder.wait(timeout=60)


def test_cpu_and_memory_are_shared_out_and_why_waiting_names_the_holder(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger()
    capacity = ledger.capacity
    assert capacity.cpu_millis == len(os.sched_getaffinity(0)) * 1000
    first = ledger.try_acquire(Request(cpu_millis=capacity.cpu_millis), _me("first"))
    assert first is not None and first.gpus == ()
    assert ledger.try_acquire(Request(cpu_millis=1), _me("second")) is None
    assert ledger.why_waiting(Request(cpu_millis=1500)).startswith("needs 1.5 CPUs, 0 free (held by job first)")
    assert ledger.try_acquire(Request(memory_bytes=1), _me("memory")) is not None  # memory is not CPU
    ledger.release(first.id)
    assert ledger.try_acquire(Request(cpu_millis=1), _me("second")) is not None
    assert ledger.why_waiting(Request(cpu_millis=1)) == "nothing: it fits now"


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_the_cpus_are_those_the_process_may_run_on(home: Path) -> None:
    code = "from millpond.scheduling import Ledger; print(Ledger().capacity.cpu_millis)"
    done = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "1000"


def test_impossible_requests_are_refused_in_one_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "0")
    ledger = Ledger()
    cpus = ledger.capacity.cpu_millis // 1000
    assert ledger.impossible(Request(gpus=1)) == (
        "requests 1 GPU but this machine has none (millpond config set gpu-fallback cpu runs GPU requests on CPU)"
    )
    assert ledger.impossible(Request(cpu_millis=(cpus + 1) * 1000)) == (
        f"requests {cpus + 1} CPUs but this machine has {cpus}"
    )
    reason = ledger.impossible(Request(memory_bytes=2**60))
    assert reason is not None and reason.startswith("requests 1073741824.0 GiB of memory but this machine has ")
    assert "\n" not in reason
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")
    assert Ledger().impossible(Request(gpus=3)) == "requests 3 GPUs but this machine has only 2"
    assert Ledger().impossible(Request(gpus=2, cpu_millis=cpus * 1000)) is None


def test_a_bad_fake_gpu_count_is_one_error_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "two")
    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert result.code == 2
    assert result.err == "error: MILLPOND_FAKE_GPUS='two' is not a whole number of GPUs (a test-only setting)\n"


def test_gpu_fallback_cpu_runs_gpu_requests_without_gpus(cli, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "0")
    monkeypatch.delenv("MILLPOND_GPU_FALLBACK", raising=False)
    assert cli("config", "get", "gpu-fallback").out == "none\n"
    assert cli("config", "set", "gpu-fallback", "cpu").code == 0
    assert cli("config", "get", "gpu-fallback").out == "cpu\n"
    assert cli("config", "view").out.splitlines()[0] == "gpu-fallback: cpu"
    assert json.loads((home / "settings.json").read_text()) == {"gpu-fallback": "cpu"}
    ledger = Ledger(load_settings())
    assert ledger.impossible(Request(gpus=2)) is None
    grant = ledger.try_acquire(Request(gpus=2), _me())
    assert grant is not None and grant.gpus == ()
    assert ledger.fallback_warning(Request(gpus=2)) == (
        "requests 2 GPUs but this machine has none: running on CPU instead (gpu-fallback is cpu)"
    )
    ledger.release(grant.id)

    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED"
    log = (home / "logs" / data["run_id"]).rglob("*.log")
    assert any(
        "[millpond] warning: requests 1 GPU but this machine has none: running on CPU instead" in path.read_text()
        for path in log
    )

    assert cli("config", "unset", "gpu-fallback").code == 0
    refused = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert refused.code == 1 and "requests 1 nvidia.com/gpu but this machine has none" in refused.json()["error"]
    monkeypatch.setenv("MILLPOND_GPU_FALLBACK", "cpu")  # the variable does the same
    assert cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json").code == 0


def test_gpu_fallback_takes_only_its_values(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = cli("config", "set", "gpu-fallback", "tpu")
    assert (bad.code, bad.err) == (2, "error: gpu-fallback takes one of: cpu, none (not 'tpu')\n")
    unknown = cli("config", "set", "gpu-fallbak", "cpu")
    assert (unknown.code, unknown.err) == (2, "error: unknown setting 'gpu-fallbak'; settings: gpu-fallback, runtime\n")
    monkeypatch.setenv("MILLPOND_GPU_FALLBACK", "yes")
    wrong = cli("config", "get", "gpu-fallback")
    assert (wrong.code, wrong.err) == (2, "error: MILLPOND_GPU_FALLBACK is 'yes'; it takes one of: cpu, none\n")


def test_two_runs_at_once_never_share_a_gpu(home: Path, database: str) -> None:
    """Also with the metadata on PostgreSQL: the ledger stays this machine's file, and guards the GPU alike."""
    env = {"MILLPOND_FAKE_GPUS": "1"}
    runs = [spawn_cli(home, "run", RESOURCES, "--pipeline", "gpu-sleeper", "-o", "json", env=env) for _ in range(2)]
    try:
        results = [run.communicate(timeout=300) for run in runs]
    finally:
        for run in runs:
            run.kill()
    for run, (out, err) in zip(runs, results, strict=True):
        assert run.returncode == 0, out + err
        assert json.loads(out)["outputs"] == {"Output": "0"}  # each saw GPU 0 ...
    store = open_journal(load_settings().database_url)
    tasks = [task for out, _ in results for task in store.list_tasks(json.loads(out)["run_id"])]
    first, second = sorted(tasks, key=lambda t: t.started_at)  # type: ignore[arg-type, return-value]
    assert first.finished_at is not None and second.started_at is not None
    assert second.started_at >= first.finished_at  # ... but never at the same time
    waited = Path(second.log_path or "").read_text()
    assert "[millpond] waiting for resources: needs 1 GPU, 0 free (held by task gpu-sleeper-" in waited
    assert Ledger().grants() == []


def test_a_run_killed_with_kill_9_does_not_keep_its_gpu(cli, home: Path, database: str) -> None:
    env = {"MILLPOND_FAKE_GPUS": "1"}
    killed = spawn_cli(home, "run", RESOURCES, "--pipeline", "gpu-sleeper", "-p", "seconds=600", env=env)
    try:
        deadline = time.monotonic() + 120
        while not Ledger().grants():
            assert killed.poll() is None and time.monotonic() < deadline, "the run never got its GPU"
            time.sleep(0.05)
        [held] = Ledger().grants()
        assert (held.holder.pid, held.gpus) == (killed.pid, (0,))
        engine = [row for row in cli("ps", "-o", "json").json() if row["pid"] == killed.pid]
        assert [row["state"] for row in engine] == ["running, holds GPU 0"]
    finally:
        killed.kill()  # SIGKILL: the engine gives nothing back
        killed.communicate(timeout=60)
    second = spawn_cli(home, "run", RESOURCES, "--pipeline", "gpu-sleeper", "-p", "seconds=0", "-o", "json", env=env)
    try:
        out, err = second.communicate(timeout=300)  # without reclaiming, it would wait for GPU 0 forever
    finally:
        second.kill()
    assert second.returncode == 0, out + err
    assert json.loads(out)["outputs"] == {"Output": "0"}
    assert Ledger().grants() == []


def test_a_run_waiting_for_a_gpu_another_process_holds_can_be_stopped(home: Path) -> None:
    holder = _worker(home, "hold", 1, gpus=1)
    try:
        assert holder.stdout is not None and json.loads(holder.stdout.readline()) == [0]
        env = {"MILLPOND_FAKE_GPUS": "1"}
        waiting = spawn_cli(home, "run", RESOURCES, "--pipeline", "gpu-sleeper", "-o", "json", env=env)
        try:
            logs = home / "logs"
            deadline = time.monotonic() + 120
            note = f"waiting for resources: needs 1 GPU, 0 free (held by task holder-{holder.pid})"
            while not any(note in p.read_text() for p in logs.rglob("*.log")):
                assert waiting.poll() is None and time.monotonic() < deadline, "the task never said it waits"
                time.sleep(0.05)
            waiting.send_signal(signal.SIGTERM)
            out, err = waiting.communicate(timeout=60)  # the walk, with only a waiting task, still stops
        finally:
            waiting.kill()
        assert waiting.returncode == 130, out + err
        assert [g.holder.pid for g in Ledger().grants()] == [holder.pid]  # the run took nothing
        [(run, _)] = RunStore(load_settings().database_url).list_runs()
        assert run.state == "CANCELED"
    finally:
        holder.kill()
        holder.wait(timeout=60)


@pytest.mark.parametrize(
    ("visible", "gpus"),
    [("2,0", (2, 0)), ("", ()), ("-1", ()), ("1,oops,3", (1,)), ("0,0,1", (0, 1))],
)
def test_the_gpus_are_those_cuda_visible_devices_names(
    home: Path, monkeypatch: pytest.MonkeyPatch, visible: str, gpus: tuple[int, ...]
) -> None:
    monkeypatch.delenv("MILLPOND_FAKE_GPUS", raising=False)
    monkeypatch.delenv("MILLPOND_GPUS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    ledger = Ledger()
    assert ledger.capacity.gpus == gpus
    if gpus:  # handed out by those indices, as a child's CUDA_VISIBLE_DEVICES takes them
        grant = ledger.try_acquire(Request(gpus=1), _me())
        assert grant is not None and grant.gpus == (gpus[0],)


def test_a_damaged_ledger_is_one_error_line_naming_the_file(cli, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "ledger.db").write_bytes(b"not a database, " * 512)
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1")
    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert result.code == 1 and "Traceback" not in result.err
    assert result.err.endswith(
        f"error: the resource ledger {home / 'ledger.db'} cannot be used: file is not a database "
        "(if it is damaged, remove it while no millpond process runs)\n"
    )
    (home / "ledger.db").unlink()
    assert cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json").code == 0


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.integers(0, 3), st.integers(0, 2500), st.integers(0, 3)),
        st.tuples(st.just("release"), st.integers(0, 20), st.just(0), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(steps=_STEPS)
def test_the_ledger_grants_exactly_what_is_free(steps: list[tuple[str, int, int, int]]) -> None:
    """Any sequence of acquires and releases: a grant comes exactly when the request fits what the
    live grants leave, its GPUs are the lowest free ones, and no index is ever held twice."""
    with tempfile.TemporaryDirectory(prefix="millpond-ledger-") as folder:
        ledger = Ledger(Settings(home=Path(folder), max_parallel=1, fake_gpus=3))
        cpus = ledger.capacity.cpu_millis
        held: dict[str, tuple[Request, tuple[int, ...]]] = {}
        for op, gpus, millis, pick in steps:
            if op == "release":
                if held:
                    grant_id = sorted(held)[gpus % len(held)]
                    ledger.release(grant_id)
                    del held[grant_id]
                continue
            request = Request(gpus=gpus, cpu_millis=min(millis, cpus), memory_bytes=pick)
            taken = {i for _, indices in held.values() for i in indices}
            free = [i for i in range(3) if i not in taken]
            fits = gpus <= len(free) and request.cpu_millis <= cpus - sum(r.cpu_millis for r, _ in held.values())
            grant = ledger.try_acquire(request, _me())
            assert (grant is not None) == fits
            if grant is not None:
                assert grant.gpus == tuple(free[:gpus])
                held[grant.id] = (request, grant.gpus)
        assert {g.id: (g.request, g.gpus) for g in ledger.grants()} == held
