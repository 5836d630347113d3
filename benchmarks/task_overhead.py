"""Task overhead: millpond against kfp.local on the same compiled pipelines, in one invocation.

    .venv/bin/python benchmarks/task_overhead.py            # all of it (~3 min on 2 cores)
    .venv/bin/python benchmarks/task_overhead.py --quick    # millpond only, smaller loops
    .venv/bin/python benchmarks/task_overhead.py --lineage  # what recording lineage costs the 50-task chain

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
"""

import argparse
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="millpond only, with a 200-item top loop")
    parser.add_argument("--lineage", action="store_true", help="the 50-task chain with lineage recording off and on")
    parser.add_argument("--pairs", type=int, default=7, help="with --lineage: runs of each")
    args = parser.parse_args()
    if args.lineage:
        return lineage_cost(args.pairs)
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
