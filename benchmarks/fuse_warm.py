"""FUSE warm reads of small files with the page cache dropped: millpond's mount and rclone's, taking turns.

    .venv/bin/python benchmarks/fuse_warm.py            # 2,000 x 100 KiB, 4 pairs (~2 min); root
    .venv/bin/python benchmarks/fuse_warm.py --files 500 --runs 2 --src /path/to/other/src   # A/B a tree

The warm rows of ``dataset_read.py`` measure every rclone pass before every millpond pass; on a
shared machine whose load changes by the minute the ratio then compares two loads. Here a
local:// Dataset (MEM tier on /dev/shm, loaded) and ``rclone mount --vfs-cache-mode full`` of
the same folder (its cache filled by one read) are read in turns, one sequential reader each,
the page cache dropped before every pass, and each pair's ratio is printed. Each millpond pass
also counts the kernel's FUSE requests by opcode with their mean latency (the ``fuse``
tracepoints, kernel 6.13+, in a trace instance of its own) and the mount process's CPU: the
per-open breakdown.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--files", type=int, default=2000, help="number of 100 KiB files (2000)")
parser.add_argument("--runs", type=int, default=4, help="pairs of passes (4)")
parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"), help="millpond's source tree")
args = parser.parse_args()
src, n, runs = args.src, args.files, args.runs
if os.geteuid() != 0:
    raise SystemExit("error: needs root (dropping the page cache, FUSE, tracefs)")
work = Path(tempfile.mkdtemp(prefix="mpbench-fuse-warm-"))
TR = work / "tracefs"
TR.mkdir()
subprocess.run(["mount", "-t", "tracefs", "nodev", str(TR)], check=True)
TR = TR / "instances" / "mpbench-fuse-warm"
TR.mkdir()
data = work / "data"
data.mkdir()
for i in range(n):
    (data / f"f{i:05d}").write_bytes(os.urandom(100 * 1024))
env = {**os.environ, "PYTHONPATH": src, "MILLPOND_HOME": str(work / "home")}
py = sys.executable


def mp(*args: str) -> str:
    p = subprocess.run([py, "-m", "millpond.cli.main", *args], env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{args}: {p.stderr}")
    return p.stdout


store = Path("/dev/shm") / f"mpbench-fuse-warm-{os.getpid()}"
store.mkdir()
(work / "ds.yaml").write_text(textwrap.dedent(f"""\
    apiVersion: data.fluid.io/v1alpha1
    kind: Dataset
    metadata: {{name: hb}}
    spec:
      mounts: [{{mountPoint: "local://{data}", name: d, path: /}}]
    ---
    apiVersion: data.fluid.io/v1alpha1
    kind: AlluxioRuntime
    metadata: {{name: hb}}
    spec:
      replicas: 1
      tieredstore: {{levels: [{{mediumtype: MEM, path: "{store}", quota: 4Gi}}]}}
    """))
mp("apply", "-f", str(work / "ds.yaml"))
mp("dataset", "load", "hb")
mnt = work / "mnt"
mnt.mkdir()
mp("dataset", "mount", "hb", str(mnt))
pid = int(subprocess.run(["pgrep", "-f", f"fuse_mount hb {mnt}"], capture_output=True, text=True).stdout.split()[0])
conn = os.stat(mnt).st_dev


def cpu() -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def read_folder() -> int:
    nb = 0
    for name in sorted(os.listdir(mnt)):
        with open(os.path.join(mnt, name), "rb") as f:
            nb += len(f.read())
    return nb


def tr(path: str, text: str) -> None:
    (TR / path).write_text(text)


read_folder()
rmnt = work / "rmnt"
rmnt.mkdir()
rproc = subprocess.Popen(["rclone", "mount", str(data), str(rmnt), "--vfs-cache-mode", "full", "--cache-dir",
                          str(work / "rcache")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.ismount(rmnt):
    time.sleep(0.1)


def read_rclone() -> float:
    t = time.perf_counter()
    for name in sorted(os.listdir(rmnt)):
        with open(rmnt / name, "rb") as f:
            f.read()
    return n / (time.perf_counter() - t)


read_rclone()
rrates = []
rates = []
for r in range(runs):
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    time.sleep(0.3)
    tr("trace", "")
    tr("buffer_size_kb", "16384")
    tr("events/fuse/fuse_request_end/enable", "1")
    tr("events/fuse/fuse_request_send/enable", "1")
    tr("tracing_on", "1")
    c0 = cpu()
    t0 = time.perf_counter()
    nb = read_folder()
    dt = time.perf_counter() - t0
    c1 = cpu()
    tr("tracing_on", "0")
    assert nb == n * 100 * 1024
    rates.append(n / dt)
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    time.sleep(0.3)
    rrates.append(read_rclone())
    print(f"  rclone right after: {rrates[-1]:,.0f} files/s; pair ratio {rates[-1] / rrates[-1]:.2f}x", flush=True)
    sends, lat, count = {}, collections.defaultdict(list), collections.Counter()
    for line in (TR / "trace").read_text().splitlines():
        m = re.search(r"\s(\d+\.\d+): fuse_request_(send|end): connection (\d+) req (\d+)"
                      r"(?: opcode \d+ \((\w+)\))?", line)
        if not m or int(m.group(3)) != conn:
            continue
        ts, kind, req = float(m.group(1)), m.group(2), m.group(4)
        if kind == "send":
            sends[req] = (ts, m.group(5))
            count[m.group(5)] += 1
        elif req in sends:
            t, op = sends.pop(req)
            lat[op].append((ts - t) * 1e6)
    ops = ", ".join(f"{op[5:]} {c / n:.2f}/file {statistics.mean(lat[op]) if lat[op] else 0:.0f}us"
                    for op, c in count.most_common())
    print(f"run {r}: {n / dt:,.0f} files/s ({dt * 1e6 / n:.0f} us/file), "
          f"mount CPU {(c1 - c0) * 1e6 / n:.0f} us/file; {ops}", flush=True)
tr("tracing_on", "0")
load = Path("/proc/loadavg").read_text().split()[:3]
print(f"millpond median {statistics.median(rates):,.0f} files/s, "
      f"spread {min(rates):,.0f}-{max(rates):,.0f}; load {load}")
pairs = [a / b for a, b in zip(rates, rrates, strict=True)]
print(f"rclone median {statistics.median(rrates):,.0f} files/s; pair ratios {min(pairs):.2f}-{max(pairs):.2f}x, "
      f"median {statistics.median(pairs):.2f}x")
subprocess.run(["fusermount3", "-u", str(rmnt)])
rproc.wait()
mp("dataset", "unmount", str(mnt))
TR.rmdir()
subprocess.run(["umount", str(TR.parent.parent)])
subprocess.run(["rm", "-rf", str(work), str(store)])
