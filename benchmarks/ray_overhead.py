"""Ray overhead: millpond on a Ray cluster against millpond's local fork server and kfp.local, in one run.

    .venv/bin/python benchmarks/ray_overhead.py            # 200-task fan-out, 50-task chain (~7 min on 2 cores)
    .venv/bin/python benchmarks/ray_overhead.py --quick    # 40-item fan-out, 10-task chain
    .venv/bin/python benchmarks/ray_overhead.py --json     # the measures as JSON on stdout
    .venv/bin/python benchmarks/ray_overhead.py --only fan-out --backends local,ray-1,ray-3 --no-peer  # issue 36 (b)

The same compiled pipelines as benchmarks/task_overhead.py (kfp SDK, default settings): a
ParallelFor of ``x * x`` over N items with a Collected fan-in, and a chain of ``x + 1``.
Each runs as a whole ``millpond run FILE --no-cache -o json`` command (a fresh home) with the
following; each millpond measure is the median of ``--repeat`` runs (3), kfp.local's one run:

  local      the default local runner (lightweight tasks fork from a warm server), local root;
  local-s3   the same runner with the root on S3 (what the S3 root costs without Ray);
  ray-1      ``--ray`` on a one-node Ray cluster (a head with the machine's CPUs), root on S3;
  ray-3      ``--ray`` on a three-node cluster (tests/ray_cluster.py: a head with no CPUs for
             tasks, workers b and c with one CPU each), root on S3;

and with kfp.local (``SubprocessRunner(use_venv=False)``, the peer) on the same YAML. The
S3 root is a SeaweedFS server on loopback started as tests/s3_server.py does; the clusters are
real ``ray start`` processes started with tests/ray_cluster.py's code, one after the other, and
ended by pid (never ``ray stop``). Both clusters offer two CPUs for tasks and the local runner
runs two tasks at once (``MILLPOND_MAX_PARALLEL=2``), so the figures compare the cost of a
task, not the parallelism.

``s/task`` is the whole command's wall seconds per task (what a user waits for, with the
driver's ``ray.init``); ``run s/task`` is first task start to last task end, per task (no
start-up). ``x local`` is the ratio of run s/task to local's (the issue's goal for ray on the
fan-out is at most 2), ``x local-s3`` to local-s3's. ``bare-ray`` is Ray's own floor on each
cluster: N streaming tasks that only yield a log chunk and 10 KiB, submitted at once.
"""

# No `from __future__ import annotations`: kfp reads the pipelines' annotations as types.
import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from kfp import compiler, dsl
from task_overhead import MILLPOND, _watch, add_one, fan_out, run_kfp_local

from tests import ray_cluster as rc
from tests.s3_server import S3Server, _remove_sockets, _start, _stop, weed_binary

TIMEOUT_NOTE = "a run that fails prints its last error line under the table"


def chain(n: int) -> dsl.graph_component.GraphComponent:
    @dsl.pipeline(name=f"chain-{n}")
    def pipeline(start: int = 0) -> int:
        task = add_one(x=start)
        for _ in range(n - 1):
            task = add_one(x=task.output)
        return task.output

    return pipeline


@dataclass
class Measure:
    backend: str
    pipeline: str
    seconds: float
    tasks: int
    task_s: float | None = None  # first task start to last task end, per task
    output: object = None
    error: str = ""

    @property
    def per_task(self) -> float | None:
        return self.seconds / self.tasks if self.tasks else None


BACKENDS = ("local", "local-s3", "ray-1", "ray-3")
REPEAT = 3  # each millpond measure is the median of this many runs (--repeat): a 2-core machine is noisy


def median_of(backend: str, name: str, package: Path, home: Path, extra: list[str],
              env: dict[str, str], bucket: Callable[[], str] | None = None, repeat: int = REPEAT) -> Measure:
    """``run_millpond`` ``repeat`` times (a fresh home, and a fresh bucket root when ``bucket`` is given, each
    time); the run with the median ``run s/task``, or the first failure."""
    runs = []
    for attempt in range(max(1, repeat)):
        root = ["--pipeline-root", f"s3://{bucket()}/runs"] if bucket else []
        measure = run_millpond(backend, name, package, home.with_name(f"{home.name}-{attempt}"), extra + root, env)
        if measure.error or measure.task_s is None:
            return measure
        runs.append(measure)
    return sorted(runs, key=lambda m: m.task_s or 0.0)[len(runs) // 2]


def run_millpond(backend: str, name: str, package: Path, home: Path, extra: list[str],
                 env: dict[str, str]) -> Measure:
    env = {**env, "MILLPOND_HOME": str(home)}
    _watch([str(MILLPOND), "runs", "list"], env)  # the home's database is made once, outside the measure
    proc, seconds, _peak = _watch([str(MILLPOND), "run", str(package), "--no-cache", "-o", "json", *extra], env)
    if proc.returncode != 0:
        return Measure(backend, name, seconds, 0, error=(proc.stderr.strip().splitlines() or ["?"])[-1])
    result = json.loads(proc.stdout)
    tasks = [t for t in result["tasks"] if t["kind"] == "container"]
    first = min(dt.datetime.fromisoformat(t["started_at"]) for t in tasks)
    last = max(dt.datetime.fromisoformat(t["finished_at"]) for t in tasks)
    error = "" if result["state"] == "SUCCEEDED" else f"run {result['state']}"
    return Measure(backend, name, seconds, len(tasks), (last - first).total_seconds() / len(tasks),
                   result["outputs"].get("Output"), error)


BARE_RAY = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
n = int(sys.argv[2])

@ray.remote(max_retries=0, num_returns="streaming")
def task(payload):
    yield b"log"
    yield payload

for ref in task.remote(b"x"):  # workers warm, as a run's first tasks find them
    ray.get(ref)
began = time.monotonic()
generators = [task.remote(bytes(10240)) for _ in range(n)]
for generator in generators:
    for ref in generator:
        ray.get(ref)
print(f"{(time.monotonic() - began) / n:.4f}")
"""


def bare_ray(address: str, n: int, env: dict[str, str]) -> Measure:
    """Ray's own floor: n streaming tasks that yield a log chunk and a 10 KiB "workspace", all submitted at once."""
    proc, seconds, _peak = _watch([sys.executable, "-c", BARE_RAY, address, str(n)], env)
    if proc.returncode != 0:
        return Measure("", f"bare-{n}", seconds, 0, error=(proc.stderr.strip().splitlines() or ["?"])[-1])
    per_task = float(proc.stdout.strip().splitlines()[-1])
    return Measure("", f"bare-{n}", seconds, n, per_task)


def one_node_cluster(root: Path, cpus: int) -> rc.RayCluster:
    """A head that runs tasks itself (``cpus`` of them at once): Ray on a single machine."""
    root.mkdir(parents=True)
    (root / "logs").mkdir()
    short = Path(tempfile.mkdtemp(prefix="mpray-"))
    nodes = {
        name: rc.RayNode(name=name, resource=f"node_{name}", node_dir=root / "nodes" / name,
                         temp_dir=short / name, cpus=cpus if name == "head" else 0)
        for name in rc.NODE_NAMES  # b and c are never started: close() finds nothing of theirs
    }
    (port,) = rc.free_ports(1)
    binary = rc.ray_binary()
    assert binary is not None
    cluster = rc.RayCluster(address=f"127.0.0.1:{port}", token_path=rc.TOKEN_PATH, nodes=nodes,
                            log_dir=root / "logs", _ray=binary)
    try:
        cluster.start_node("head")
    except BaseException:
        cluster.close()
        raise
    return cluster


def three_node_cluster(root: Path) -> rc.RayCluster:
    root.mkdir(parents=True)
    return rc.start_cluster(root)


def close_cluster(cluster: rc.RayCluster) -> None:
    cluster.close()
    shutil.rmtree(cluster.nodes["head"].temp_dir.parent, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 40-item fan-out and a 10-task chain")
    parser.add_argument("--json", action="store_true", help="print the measures as JSON")
    parser.add_argument("--no-peer", action="store_true", help="leave kfp.local out")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="runs per millpond measure (the median is kept)")
    parser.add_argument("--only", choices=("fan-out", "chain"), help="one pipeline instead of both")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help=f"which millpond backends, comma-separated (default: {','.join(BACKENDS)})")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        print(f"error: --backends: unknown {', '.join(unknown)} (known: {', '.join(BACKENDS)})", file=sys.stderr)
        return 2
    if rc.ray_binary() is None or weed_binary() is None:
        print("error: this benchmark needs ray and weed: bash scripts/setup.sh test", file=sys.stderr)
        return 2
    fan, length = (40, 10) if args.quick else (200, 50)
    cpus = 2  # what the three-node cluster offers (b and c, one CPU each); the one-node head gets as many
    measures: list[Measure] = []
    with tempfile.TemporaryDirectory(prefix="millpond-raybench-") as tmp:
        work = Path(tmp)
        packages = {f"fan-out-{fan}": work / "fan.yaml", f"chain-{length}": work / "chain.yaml"}
        compiler.Compiler().compile(fan_out(fan), str(packages[f"fan-out-{fan}"]))
        compiler.Compiler().compile(chain(length), str(packages[f"chain-{length}"]))
        if args.only:
            packages = {name: path for name, path in packages.items() if name.startswith(args.only)}
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MILLPOND_"))}
        base_env["MILLPOND_MAX_PARALLEL"] = str(cpus)  # the local runner's parallelism: the clusters' CPUs

        def note(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

        for name, package in packages.items():
            if "local" not in backends:
                continue
            note(f"running {name} with millpond, local ...")
            measures.append(median_of("local", name, package, work / f"home-local-{name}", [], base_env,
                                      repeat=args.repeat))
            if not args.no_peer:
                note(f"running {name} with kfp.local ...")
                peer = run_kfp_local(package, measures[-1].tasks or 1)
                measures.append(Measure("kfp.local", name, peer.seconds, peer.tasks, None, peer.output, peer.error))
        weed = weed_binary()
        assert weed is not None
        proc, server, grpc_ports = _start(weed, work / "seaweedfs")
        try:
            s3_env = {**base_env, **server.env()}
            for name, package in packages.items() if "local-s3" in backends else ():  # the S3 root alone
                note(f"running {name} with millpond, local with the S3 root ...")
                measures.append(median_of("local-s3", name, package, work / f"home-local-s3-{name}", [], s3_env,
                                          server.create_bucket, args.repeat))
            for backend, start in (("ray-1", lambda: one_node_cluster(work / "ray-1", cpus)),
                                   ("ray-3", lambda: three_node_cluster(work / "ray-3"))):
                if backend not in backends:
                    continue
                note(f"starting the {backend[-1]}-node Ray cluster ...")
                began = time.monotonic()
                cluster = start()
                note(f"  joined in {time.monotonic() - began:.1f} s")
                try:
                    env = {**s3_env, **cluster.env()}
                    note(f"running {fan} bare Ray tasks, {backend} ...")
                    bare = bare_ray(cluster.address, fan, env)
                    measures.append(
                        Measure(backend, "bare-ray", bare.seconds, bare.tasks, bare.task_s, None, bare.error))
                    for name, package in packages.items():
                        note(f"running {name} with millpond, {backend} ...")
                        measures.append(median_of(backend, name, package, work / f"home-{backend}-{name}",
                                                  ["--ray", cluster.address], env, server.create_bucket,
                                                  args.repeat))
                finally:
                    close_cluster(cluster)
        finally:
            _stop(proc)
            _remove_sockets(grpc_ports)
    if args.json:
        print(json.dumps([{**asdict(m), "per_task": m.per_task} for m in measures], indent=2))
    else:
        print_table(measures, server)
    return 0


def print_table(measures: list[Measure], server: S3Server) -> None:
    del server
    local = {m.pipeline: m for m in measures if m.backend == "local"}
    same_root = {m.pipeline: m for m in measures if m.backend == "local-s3"}
    header = (f"{'pipeline':<14}{'backend':<11}{'tasks':>6}{'wall s':>9}{'s/task':>9}{'run s/task':>12}"
              f"{'x local':>9}{'x local wall':>14}{'x local-s3':>12}")
    print(header)
    print("-" * len(header))
    for m in measures:
        base = local.get(m.pipeline)
        run = f"{m.task_s:.3f}" if m.task_s is not None else "-"
        ratio = f"{m.task_s / base.task_s:.1f}x" if m.task_s and base and base.task_s else "-"
        wall = (f"{m.per_task / base.per_task:.1f}x" if m.per_task and base and base.per_task else "-")
        per_task = f"{m.per_task:.3f}" if m.per_task is not None else "-"
        s3 = same_root.get(m.pipeline)
        to_s3 = f"{m.task_s / s3.task_s:.1f}x" if m.task_s and s3 and s3.task_s else "-"
        print(f"{m.pipeline:<14}{m.backend:<11}{m.tasks:>6}{m.seconds:>9.2f}{per_task:>9}{run:>12}{ratio:>9}{wall:>14}"
              f"{to_s3:>12}")
    for m in measures:
        if m.error:
            print(f"  {m.pipeline} with {m.backend} failed: {m.error}")
    print("s/task = whole command / tasks; run s/task = first task start to last task end, per task (kfp.local")
    print("reports no task times); x local = run s/task / local's; x local wall = s/task / local's s/task;")
    print("x local-s3 = run s/task / local-s3's (the same S3 root without Ray).")
    print("local-s3: the local runner with the S3 root; bare-ray: Ray's own floor, tasks that only stream back a")
    print("log chunk and 10 KiB (run s/task = their wall time / N, submitted all at once, workers warm)")
    print("local: fork server, local root; ray-1: one node with 2 CPUs; ray-3: head + 2 one-CPU workers; ray: S3 root")


if __name__ == "__main__":
    sys.exit(main())
