"""Task overhead: millpond against kfp.local on the same compiled pipelines, in one invocation.

    .venv/bin/python benchmarks/task_overhead.py            # all of it (~3 min on 2 cores)
    .venv/bin/python benchmarks/task_overhead.py --quick    # millpond only, smaller loops
    .venv/bin/python benchmarks/task_overhead.py --lineage  # what recording lineage costs the 50-task chain
    .venv/bin/python benchmarks/task_overhead.py --scale    # ms/task of chains of 50, 1,000 and 10,000 tasks
    .venv/bin/python benchmarks/task_overhead.py --scale --sizes 50,1000 --runs 3 --quick  # a shorter one

Pipelines, built with the kfp SDK and compiled with default settings (so both backends pay
for the same ``pip install kfp`` prelude in the IR):
  1. a chain of 50 ``x + 1`` lightweight components;
  2. a ParallelFor over 200 items with a Collected fan-in;
  3. a ParallelFor over 100 and over 1,000 items (millpond only).

millpond runs as its CLI (``millpond run FILE.yaml --no-cache -o json``), in a fresh home;
kfp.local runs as ``kfp.local.SubprocessRunner(use_venv=False)`` on the same YAML. Wall
seconds are whole commands, as a user waits for them. The engine's peak memory is the
engine process's own high-water mark (VmHWM), read while it runs.

``--lineage`` runs the chain with lineage recording off (``MILLPOND_LINEAGE=0``) and on, alternately in the
same home, and prints the medians and their ratio (the issue's bound: at most 1.05).

``--scale`` asks whether the cost of a task stays flat as the chain grows: chains of 50, 1,000 and
10,000 ``x + 1`` tasks (``--sizes``), each run ``--runs`` times by millpond in a fresh home, and the
50-task chain by kfp.local (unless ``--quick``). For each it prints the median milliseconds per task,
whole command (wall / tasks) and run only (first task start to last task end / tasks), with their
spread, and the ratio to kfp.local's seconds per task at 50. The long chains' IR is the compiler's
own 2-task chain with its second task repeated (what compiling the 10,000-task pipeline with the SDK
makes, in seconds instead of many minutes), written as JSON.
"""

import argparse
import copy
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List

import yaml
from kfp import compiler, dsl

MILLPOND = Path(sys.executable).parent / "millpond"


@dsl.component(base_image="python:3.11")
def add_one(x: int) -> int:
    return x + 1


@dsl.component(base_image="python:3.11")
def square(x: int) -> int:
    return x * x


@dsl.component(base_image="python:3.11")
def total(xs: List[int]) -> int:
    return int(sum(xs))  # int(): kfp.local hands Collected ints over as floats


@dsl.pipeline(name="chain-50")
def chain_50(start: int = 0) -> int:
    task = add_one(x=start)
    for _ in range(49):
        task = add_one(x=task.output)
    return task.output


@dsl.pipeline(name="chain-2")
def chain_2(start: int = 0) -> int:
    return add_one(x=add_one(x=start).output).output


def chain_package(tasks: int, path: Path) -> None:
    """A compiled chain of ``tasks`` add_one tasks, as ``compiler.Compiler`` writes ``chain_50`` for 50 (same
    components, executors and task records, named as it names them), without the SDK's cost per task."""
    compiler.Compiler().compile(chain_2, str(path))
    ir = yaml.safe_load(path.read_text())
    ir["pipelineInfo"]["name"] = f"chain-{tasks}"
    components, executors = ir["components"], ir["deploymentSpec"]["executors"]
    dag = ir["root"]["dag"]
    component, executor, second = (components.pop("comp-add-one-2"), executors.pop("exec-add-one-2"),
                                   dag["tasks"].pop("add-one-2"))
    previous = "add-one"
    for index in range(2, tasks + 1):
        name = f"add-one-{index}"
        components[f"comp-{name}"] = {**copy.deepcopy(component), "executorLabel": f"exec-{name}"}
        executors[f"exec-{name}"] = copy.deepcopy(executor)
        task = copy.deepcopy(second)
        task["componentRef"]["name"], task["taskInfo"]["name"] = f"comp-{name}", name
        task["dependentTasks"] = [previous]
        task["inputs"]["parameters"]["x"]["taskOutputParameter"]["producerTask"] = previous
        dag["tasks"][name] = task
        previous = name
    dag["outputs"]["parameters"]["Output"]["valueFromParameter"]["producerSubtask"] = previous
    path.write_text(json.dumps(ir))


def fan_out(n: int) -> dsl.graph_component.GraphComponent:
    @dsl.pipeline(name=f"fan-out-{n}")
    def pipeline() -> int:
        with dsl.ParallelFor(list(range(n))) as item:
            squared = square(x=item)
        return total(xs=dsl.Collected(squared.output)).output

    return pipeline


@dataclass
class Measure:
    seconds: float
    tasks: int
    peak_mb: float
    cores_busy: float
    output: object = None
    step_ms: float | None = None  # chain: median time from one task's end to the next one's
    task_s: float | None = None  # first task start to last task end, per task (no start-up)
    error: str = ""


def _watch(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run a command; return it, its wall seconds and its own peak RSS in MB (VmHWM, sampled)."""
    started = time.monotonic()
    out_file, err_file = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # pipes would fill and block it
    proc = subprocess.Popen(command, env=env, stdout=out_file, stderr=err_file, text=True)
    peak_kb = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kb = max(peak_kb, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
    seconds = time.monotonic() - started
    out_file.seek(0)
    err_file.seek(0)
    out, err = out_file.read(), err_file.read()
    return subprocess.CompletedProcess(command, proc.returncode, out, err), seconds, peak_kb / 1024


def run_millpond(package: Path, workdir: Path, lineage: bool = True) -> Measure:
    home = workdir / f"home-{package.stem}"
    env = {**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_LINEAGE": "1" if lineage else "0"}
    # A home is created once (its database and migrations, ~1 s); runs are measured in an existing one.
    subprocess.run([str(MILLPOND), "runs", "list"], env=env, capture_output=True, check=True)
    cpu_before = os.times()
    proc, seconds, peak = _watch([str(MILLPOND), "run", str(package), "--no-cache", "-o", "json"], env)
    cpu_after = os.times()
    cpu = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    if proc.returncode != 0:
        return Measure(seconds, 0, peak, 0.0, error=(proc.stderr.strip().splitlines() or ["?"])[-1])
    result = json.loads(proc.stdout)
    tasks = [t for t in result["tasks"] if t["kind"] == "container"]
    ends = sorted(dt.datetime.fromisoformat(t["finished_at"]) for t in tasks)
    first = min(dt.datetime.fromisoformat(t["started_at"]) for t in tasks)
    steps = [(b - a).total_seconds() * 1000 for a, b in zip(ends, ends[1:], strict=False)]
    return Measure(seconds, len(tasks), peak, cpu / seconds, result["outputs"].get("Output"),
                   statistics.median(steps) if steps else None, (ends[-1] - first).total_seconds() / len(tasks))


KFP_LOCAL_DRIVER = textwrap.dedent(
    """
    import sys, tempfile
    from kfp import components, local
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=tempfile.mkdtemp())
    task = components.load_component_from_file(sys.argv[1])()
    print("OUTPUT", task.output)
    """
)


def run_kfp_local(package: Path, tasks: int) -> Measure:
    cpu_before = os.times()
    proc, seconds, peak = _watch([sys.executable, "-c", KFP_LOCAL_DRIVER, str(package)], dict(os.environ))
    cpu_after = os.times()
    cpu = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    output = next((line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("OUTPUT ")), None)
    error = "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]
    return Measure(seconds, tasks, peak, cpu / seconds, output, error=error)


def cold_start(package: Path, workdir: Path, tries: int = 5) -> tuple[float, float]:
    """(median seconds from process start to the first task's start, median bare Python start-up)."""
    env = {**os.environ, "MILLPOND_HOME": str(workdir / "home-cold")}
    subprocess.run([str(MILLPOND), "runs", "list"], env=env, capture_output=True, check=True)
    to_first, bare = [], []
    for _ in range(tries):
        started = time.time()
        proc = subprocess.run([str(MILLPOND), "run", str(package), "--no-cache", "-o", "json"], env=env,
                              capture_output=True, text=True)
        first = min(dt.datetime.fromisoformat(t["started_at"]) for t in json.loads(proc.stdout)["tasks"])
        to_first.append(first.timestamp() - started)
        began = time.time()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.time() - began)
    return statistics.median(to_first), statistics.median(bare)


def lineage_cost(pairs: int) -> int:
    """The 50-task chain with lineage off and on, alternately (so both see the same machine), ``pairs`` times each."""
    with tempfile.TemporaryDirectory(prefix="millpond-bench-") as tmp:
        workdir = Path(tmp)
        package = workdir / "chain-50.yaml"
        compiler.Compiler().compile(chain_50, str(package))
        measured: dict[bool, list[Measure]] = {False: [], True: []}
        run_millpond(package, workdir)  # a first run warms the home, the venv and the page cache
        for index in range(pairs):
            for lineage in (False, True) if index % 2 == 0 else (True, False):
                print(f"chain-50, lineage {'on' if lineage else 'off'} ({index + 1}/{pairs}) ...", file=sys.stderr,
                      flush=True)
                measure = run_millpond(package, workdir, lineage)
                if measure.error:
                    print(f"failed: {measure.error}", file=sys.stderr)
                    return 1
                measured[lineage].append(measure)
    print(f"{'chain-50':<22}{'wall s':>9}{'run s/task':>12}{'step ms':>9}")
    medians = {}
    for lineage, label in ((False, "lineage off"), (True, "lineage on")):
        runs = measured[lineage]
        medians[lineage] = (statistics.median(m.seconds for m in runs), statistics.median(m.task_s or 0 for m in runs),
                            statistics.median(m.step_ms or 0 for m in runs))
        wall, per_task, step = medians[lineage]
        print(f"{label:<22}{wall:>9.3f}{per_task:>12.4f}{step:>9.1f}")
    print(f"ratio on/off: wall {medians[True][0] / medians[False][0]:.3f}, "
          f"run s/task {medians[True][1] / medians[False][1]:.3f}, step {medians[True][2] / medians[False][2]:.3f} "
          f"(medians of {pairs} runs each; bound: 1.05)")
    return 0


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def scale(sizes: list[int], runs: int, with_peer: bool) -> int:
    """Milliseconds per task of chains of ``sizes`` tasks, ``runs`` times each (a fresh home per size)."""
    rows = []
    peer_per_task: list[float] = []
    with tempfile.TemporaryDirectory(prefix="millpond-bench-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            package = workdir / f"chain-{size}.json"
            chain_package(size, package)
            walls, run_only = [], []
            for index in range(runs):
                print(f"chain-{size} with millpond ({index + 1}/{runs}) ...", file=sys.stderr, flush=True)
                measure = run_millpond(package, workdir)
                if measure.error or measure.tasks != size:
                    print(f"chain-{size} failed: {measure.error or f'{measure.tasks} tasks'}", file=sys.stderr)
                    return 1
                walls.append(measure.seconds * 1000 / size)
                run_only.append((measure.task_s or 0) * 1000)
            rows.append((size, walls, run_only))
            if with_peer and size == 50:
                for index in range(runs):
                    print(f"chain-50 with kfp.local ({index + 1}/{runs}) ...", file=sys.stderr, flush=True)
                    peer = run_kfp_local(package, 50)
                    if peer.error:
                        print(f"kfp.local failed: {peer.error}", file=sys.stderr)
                        return 1
                    peer_per_task.append(peer.seconds * 1000 / 50)
    print(f"{'chain':<13}{'runs':>5}{'ms/task (wall)':>24}{'ms/task (run only)':>24}{'kfp.local ms/task':>22}"
          f"{'ratio':>8}")
    peer_ms = statistics.median(peer_per_task) if peer_per_task else None
    for size, walls, run_only in rows:
        peer_cell = _spread(peer_per_task) if peer_ms is not None and size == 50 else "-"
        ratio = f"{peer_ms / statistics.median(walls):.1f}x" if peer_ms is not None and size == 50 else "-"
        print(f"{f'chain-{size}':<13}{len(walls):>5}{_spread(walls):>24}{_spread(run_only):>24}{peer_cell:>22}"
              f"{ratio:>8}")
    print("median (min-max) of the runs; wall = the whole `millpond run` command / tasks (start-up, the IR's")
    print("loading and the run's end included); run only = first task start to last task end / tasks;")
    print("ratio = kfp.local's wall ms/task at 50 / millpond's (each whole command, as a user waits)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="millpond only, with a 200-item top loop")
    parser.add_argument("--lineage", action="store_true", help="the 50-task chain with lineage recording off and on")
    parser.add_argument("--pairs", type=int, default=7, help="with --lineage: runs of each")
    parser.add_argument("--scale", action="store_true", help="ms/task of chains of 50, 1,000 and 10,000 tasks")
    parser.add_argument("--sizes", default="50,1000,10000", help="with --scale: the chains' lengths")
    parser.add_argument("--runs", type=int, default=3, help="with --scale: runs of each chain")
    args = parser.parse_args()
    if args.lineage:
        return lineage_cost(args.pairs)
    if args.scale:
        return scale([int(size) for size in args.sizes.split(",")], args.runs, with_peer=not args.quick)
    rows: list[tuple[str, Measure, Measure | None]] = []
    with tempfile.TemporaryDirectory(prefix="millpond-bench-") as tmp:
        workdir = Path(tmp)
        packages = {}
        for name, pipeline in [("chain-50", chain_50), ("fan-out-200", fan_out(200)), ("fan-out-100", fan_out(100)),
                               ("fan-out-1000", fan_out(200 if args.quick else 1000))]:
            packages[name] = workdir / f"{name}.yaml"
            compiler.Compiler().compile(pipeline, str(packages[name]))
        for name in ("chain-50", "fan-out-200", "fan-out-100", "fan-out-1000"):
            print(f"running {name} with millpond ...", file=sys.stderr, flush=True)
            ours = run_millpond(packages[name], workdir)
            peer = None
            if not args.quick and name in ("chain-50", "fan-out-200"):
                print(f"running {name} with kfp.local ...", file=sys.stderr, flush=True)
                peer = run_kfp_local(packages[name], ours.tasks or (50 if name == "chain-50" else 201))
            rows.append((name, ours, peer))
        first_task, python = cold_start(packages["chain-50"], workdir)
    print_table(rows)
    print(f"cold start: `millpond run chain-50.yaml` reaches its first task {first_task:.3f} s after it starts; "
          f"bare Python start-up {python:.3f} s; beyond Python {first_task - python:.3f} s")
    return 0


def print_table(rows: list[tuple[str, Measure, Measure | None]]) -> None:
    header = f"{'pipeline':<14}{'tasks':>6}{'millpond s':>12}{'s/task':>9}{'run s/task':>11}{'step ms':>9}" \
             f"{'peak MB':>9}{'cores':>7}{'kfp.local s':>13}{'s/task':>9}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    for name, ours, peer in rows:
        per_task = ours.seconds / ours.tasks if ours.tasks else float("nan")
        step = f"{ours.step_ms:.1f}" if ours.step_ms is not None and name == "chain-50" else "-"
        run_per_task = f"{ours.task_s:.4f}" if ours.task_s is not None else "-"
        line = (f"{name:<14}{ours.tasks:>6}{ours.seconds:>12.2f}{per_task:>9.3f}{run_per_task:>11}{step:>9}"
                f"{ours.peak_mb:>9.0f}{ours.cores_busy:>7.2f}")
        if peer is not None:
            peer_per_task = peer.seconds / peer.tasks if peer.tasks else float("nan")
            line += f"{peer.seconds:>13.2f}{peer_per_task:>9.3f}{peer.seconds / ours.seconds:>7.1f}x"
        else:
            line += f"{'-':>13}{'-':>9}{'-':>8}"
        print(line)
        for measure, who in ((ours, "millpond"), (peer, "kfp.local")):
            if measure is not None and measure.error:
                print(f"  {name} with {who} failed: {measure.error}")
    print("ratio = kfp.local seconds / millpond seconds (whole commands); run s/task = first task start to last")
    print("task end, per task (no start-up); step ms = median time between consecutive task ends (chain);")
    print("peak MB = the engine process's own peak RSS; cores = CPU seconds of everything / wall seconds")


if __name__ == "__main__":
    sys.exit(main())
