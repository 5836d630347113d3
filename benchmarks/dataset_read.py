"""Reading a dataset from S3 over a far link: millpond against s3fs, fsspec filecache and rclone, in one run.

    .venv/bin/python benchmarks/dataset_read.py                       # all of it (~10 min on 2 cores)
    .venv/bin/python benchmarks/dataset_read.py --small 200 --large-mb 64 --large-count 2   # a quick trial
    .venv/bin/python benchmarks/dataset_read.py --only local,rclone-copy --json out.json

SeaweedFS serves the dataset from a network namespace behind an emulated far link (a veth pair
with ``tc tbf rate 1gbit`` each way and 5 ms added each way by a relay: see ``far_link.py``),
set up and torn down here; where the machine allows none of that, loopback, and the output says
so. The dataset, random bytes from a fixed seed, is (a) ``small/``: 2,000 files of 100 KiB and
(b) ``large/``: 4 files of 256 MiB. Every pass reads every file of a set; the page cache is
dropped before each pass where this process may (root), and the output says whether it was.

Passes (each on both sets; a "reader" opens each file and reads it whole, ``f.read()``):
  local disk           the generated files, one sequential reader (page cache dropped, and warm)
  s3fs                 ``S3FileSystem.open(path).read()`` per file, sequentially
  fsspec filecache     ``filesystem("filecache", target_protocol="s3")``, open/read per file; cold, then warm
  rclone copy          ``rclone copy --transfers 16`` of the folder into a local folder
  rclone mount         ``rclone mount --vfs-cache-mode full``, one sequential reader walking the folder; cold, warm
  millpond DataLoad    ``millpond dataset load NAME`` (the whole command, as a user waits for it)
  millpond FUSE        ``millpond dataset mount NAME DIR``, one sequential reader; cold (after
                       ``millpond dataset clean``), warm (after a DataLoad)
  millpond://          ``fsspec.filesystem("millpond")``, open/read per file; warm, and cold

Small sets are read ``--repeat`` times (3) where a pass is cheap, large sets one time fewer;
the figures are medians. Cold passes that take a minute (s3fs, filecache cold, the mounts' cold
reads of the small set) run once. "Page cache kept" rows are the same reader run again at once.
A pass whose command or module millpond does not have (yet) is shown as not available, with why.
Needs root for the namespace, tc, dropping the page cache and FUSE (else: loopback, said so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import far_link

MILLPOND = Path(sys.executable).parent / "millpond"
SEED = 20240605
KIB, MIB = 1 << 10, 1 << 20
BUCKET = "bench"
GROUPS = ("local", "s3fs", "filecache", "rclone-copy", "rclone-mount", "millpond")
SETS = ("small", "large")


@dataclass
class Sample:
    files: int
    nbytes: int
    seconds: float


@dataclass
class Result:
    name: str
    group: str
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    missing: str = ""  # why the pass did not run

    def median(self, which: str) -> Sample | None:
        samples = self.samples.get(which)
        if not samples:
            return None
        seconds = statistics.median(s.seconds for s in samples)
        return Sample(samples[0].files, samples[0].nbytes, seconds)

    def files_s(self, which: str) -> float | None:
        m = self.median(which)
        return m.files / m.seconds if m else None

    def mb_s(self, which: str) -> float | None:
        m = self.median(which)
        return m.nbytes / m.seconds / 1e6 if m else None


# ----------------------------------------------------------------------------- the machine


def drop_caches() -> bool:
    """Write back and drop the page cache; False where this process may not."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def ensure_rclone() -> str:
    """Debian's rclone and fuse3, installed with apt-get when missing and this process is root."""
    if shutil.which("rclone") and shutil.which("fusermount3"):
        return ""
    if os.geteuid() != 0:
        return "rclone or fuse3 missing, and not root to apt-get install them"
    print("installing rclone and fuse3 with apt-get ...", file=sys.stderr, flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "fuse3", "rclone"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        proc = subprocess.run(install, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return "apt-get install fuse3 rclone failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    return "" if shutil.which("rclone") and shutil.which("fusermount3") else "rclone or fuse3 still missing"


# ----------------------------------------------------------------------------- the dataset


@dataclass
class DataSet:
    root: Path  # the local copy: root/small, root/large
    names: dict[str, list[str]]  # set -> file names, sorted
    sizes: dict[str, int]  # set -> bytes in all


def generate(root: Path, small: int, large_count: int, large_mb: int) -> DataSet:
    import numpy as np

    rng = np.random.default_rng(SEED)
    names = {"small": [f"f{i:05d}" for i in range(small)], "large": [f"f{i:05d}" for i in range(large_count)]}
    sizes = {"small": small * 100 * KIB, "large": large_count * large_mb * MIB}
    for which, size in (("small", 100 * KIB), ("large", large_mb * MIB)):
        folder = root / which
        folder.mkdir(parents=True)
        for name in names[which]:
            with open(folder / name, "wb") as out:
                left = size
                while left:
                    n = min(left, 64 * MIB)
                    out.write(rng.bytes(n))
                    left -= n
    return DataSet(root, names, sizes)


def upload(link: far_link.FarLink, data: DataSet) -> None:
    fs = link.filesystem(direct=True)  # not through the relay: upload time is not measured
    fs.mkdir(BUCKET)
    for which in SETS:
        fs.put(str(data.root / which) + "/", f"{BUCKET}/{which}/", recursive=True, batch_size=32)
        got = fs.find(f"{BUCKET}/{which}/", detail=True)
        if len(got) != len(data.names[which]) or sum(v["size"] for v in got.values()) != data.sizes[which]:
            raise RuntimeError(f"upload of {which}/ incomplete: {len(got)} objects")


# ----------------------------------------------------------------------------- readers


def read_folder(folder: Path) -> tuple[int, int]:
    """One sequential reader walking a folder in sorted order, reading each file whole, as a training
    loop would (and as ``fs.open(path).read()`` does in the fsspec passes): (files, bytes)."""
    files = nbytes = 0
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            nbytes += len(f.read())
        files += 1
    return files, nbytes


def read_fsspec(fs, paths: list[str]) -> tuple[int, int]:
    nbytes = 0
    for path in paths:
        with fs.open(path, "rb") as f:
            nbytes += len(f.read())
    return len(paths), nbytes


def timed(fn: Callable[[], tuple[int, int]], expect: tuple[int, int]) -> Sample:
    started = time.perf_counter()
    files, nbytes = fn()
    seconds = time.perf_counter() - started
    if (files, nbytes) != expect:
        raise RuntimeError(f"read {files} files / {nbytes} bytes, expected {expect[0]} / {expect[1]}")
    return Sample(files, nbytes, seconds)


def same_as_local(folder: Path, data: DataSet, which: str) -> None:
    """The first and last file read through ``folder`` are the generated ones (not timed)."""
    for name in {data.names[which][0], data.names[which][-1]}:
        with open(folder / name, "rb") as a, open(data.root / which / name, "rb") as b:
            while True:
                x, y = a.read(16 * MIB), b.read(16 * MIB)
                if x != y:
                    raise RuntimeError(f"{folder / name} differs from the generated file")
                if not x:
                    break


# ----------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, args: argparse.Namespace, link: far_link.FarLink, data: DataSet, work: Path,
                 can_drop: bool) -> None:
        self.args = args
        self.link = link
        self.data = data
        self.work = work
        self.can_drop = can_drop
        self.results: dict[str, Result] = {}
        self.relay_busy: tuple[float, str] = (0.0, "")  # the most of one core the relay used in a pass

    # --- bookkeeping

    def result(self, name: str, group: str) -> Result:
        return self.results.setdefault(name, Result(name, group))

    def runs(self, which: str) -> int:
        return self.args.repeat if which == "small" else max(1, self.args.repeat - 1)

    def expect(self, which: str) -> tuple[int, int]:
        return len(self.data.names[which]), self.data.sizes[which]

    def paths(self, which: str, prefix: str = BUCKET) -> list[str]:
        return [f"{prefix}/{which}/{name}" for name in self.data.names[which]]

    def sample(self, name: str, group: str, which: str, fn: Callable[[], tuple[int, int]], drop: bool = True) -> None:
        if drop:
            drop_caches()
        cpu = self.link.relay_cpu_s()
        s = timed(fn, self.expect(which))
        busy = (self.link.relay_cpu_s() - cpu) / s.seconds
        if busy > self.relay_busy[0]:
            self.relay_busy = (busy, f"{name}, {which}")
        self.result(name, group).samples.setdefault(which, []).append(s)
        log(f"  {name:<58} {which:<5} {s.files / s.seconds:>9.1f} files/s {s.nbytes / s.seconds / 1e6:>8.1f} MB/s "
            f"(relay {busy:.0%} of a core)")

    def warm_pair(self, name: str, group: str, which: str, fn: Callable[[], tuple[int, int]]) -> None:
        """A warm pass twice: page cache dropped first (where permitted), then at once again (kept)."""
        for _ in range(self.runs(which)):
            if self.can_drop:
                self.sample(f"{name} (page cache dropped)", group, which, fn)
            self.sample(f"{name} (page cache kept)", group, which, fn, drop=False)

    def missing(self, name: str, group: str, why: str) -> None:
        self.result(name, group).missing = why
        log(f"  {name}: not available ({why})")

    # --- peers

    def local(self) -> None:
        for which in SETS:
            folder = self.data.root / which
            if self.can_drop:
                for _ in range(self.runs(which)):
                    self.sample(
                        "local disk (page cache dropped)", "local", which, lambda folder=folder: read_folder(folder)
                    )
            read_folder(folder)
            for _ in range(self.runs(which)):
                self.sample(
                    "local disk (page cache warm)", "local", which,
                    lambda folder=folder: read_folder(folder), drop=False,
                )

    def s3fs(self) -> None:
        for which in SETS:
            paths = self.paths(which)
            self.sample(
                "s3fs open/read", "s3fs", which, lambda paths=paths: read_fsspec(self.link.filesystem(), paths)
            )

    def filecache(self) -> None:
        import fsspec

        cache = self.work / "fsspec-filecache"
        link = self.link

        def fs():
            return fsspec.filesystem(
                "filecache", target_protocol="s3", cache_storage=str(cache), skip_instance_cache=True,
                target_options=dict(key=link.access_key, secret=link.secret_key, endpoint_url=link.endpoint_url,
                                    client_kwargs={"region_name": link.region}, skip_instance_cache=True,
                                    use_listings_cache=False),
            )

        for which in SETS:
            paths = self.paths(which)
            self.sample("fsspec filecache cold", "filecache", which, lambda paths=paths: read_fsspec(fs(), paths))
        for which in SETS:
            paths = self.paths(which)
            self.warm_pair("fsspec filecache warm", "filecache", which, lambda paths=paths: read_fsspec(fs(), paths))
        shutil.rmtree(cache, ignore_errors=True)

    def rclone_env(self) -> dict[str, str]:
        config = self.work / "rclone.conf"
        config.touch()
        prefix = "RCLONE_CONFIG_BENCH_"
        # No AWS_* of this machine's (an AWS_CA_BUNDLE makes rclone's S3 client refuse to start).
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
        return {
            **inherited, "RCLONE_CONFIG": str(config),
            prefix + "TYPE": "s3", prefix + "PROVIDER": "Other", prefix + "ENV_AUTH": "false",
            prefix + "ACCESS_KEY_ID": self.link.access_key, prefix + "SECRET_ACCESS_KEY": self.link.secret_key,
            prefix + "ENDPOINT": self.link.endpoint_url, prefix + "REGION": self.link.region,
            prefix + "FORCE_PATH_STYLE": "true",
        }

    def rclone_copy(self, why_not: str) -> None:
        name = "rclone copy --transfers 16"
        if why_not:
            return self.missing(name, "rclone-copy", why_not)
        env = self.rclone_env()
        dest = self.work / "rclone-copy"

        def copy(which: str) -> tuple[int, int]:
            shutil.rmtree(dest, ignore_errors=True)
            proc = subprocess.run(["rclone", "copy", "--transfers", "16", f"bench:{BUCKET}/{which}", str(dest)],
                                  env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"rclone copy failed: {proc.stderr.strip()[-500:]}")
            files = sorted(dest.iterdir())
            return len(files), sum(f.stat().st_size for f in files)

        for which in SETS:
            for _ in range(self.runs(which)):
                self.sample(name, "rclone-copy", which, lambda which=which: copy(which))
            same_as_local(dest, self.data, which)
        shutil.rmtree(dest, ignore_errors=True)

    def rclone_mount(self, why_not: str) -> None:
        name = "rclone mount --vfs-cache-mode full"
        if why_not:
            self.missing(name + " cold", "rclone-mount", why_not)
            return self.missing(name + " warm", "rclone-mount", why_not)
        mnt, cache = self.work / "rclone-mnt", self.work / "rclone-cache"
        with rclone_mounted(self.rclone_env(), mnt, cache, self.work / "rclone-mount.log"):
            for which in SETS:
                self.sample(name + " cold", "rclone-mount", which, lambda which=which: read_folder(mnt / which))
                same_as_local(mnt / which, self.data, which)
            for which in SETS:
                self.warm_pair(name + " warm", "rclone-mount", which, lambda which=which: read_folder(mnt / which))
        shutil.rmtree(cache, ignore_errors=True)

    # --- millpond

    def millpond(self) -> None:
        names = {"load": "millpond DataLoad", "cold": "millpond FUSE cold", "warm": "millpond FUSE warm",
                 "fsspec": "millpond:// warm", "fsspec-cold": "millpond:// cold"}
        # This process reads millpond:// too, so the home is set here, not only for the commands.
        os.environ["MILLPOND_HOME"] = str(self.work / "millpond-home")
        env = dict(os.environ)
        top = mp_commands(env)
        datasets = {which: f"bench-{which}" for which in SETS}
        why = "" if "apply" in top else "millpond has no `apply` command yet"
        if not why:
            try:
                manifests = millpond_setup(env, self.link, datasets, self.work, self.args.medium)
            except RuntimeError as exc:
                why = str(exc)
        if why:
            for key in ("load", "cold", "warm", "fsspec"):
                self.missing(names[key], "millpond", why)
            return
        sub = mp_commands(env, "dataset") if "dataset" in top else set()
        lacking = {c: f"millpond has no `dataset {c}` command yet" for c in ("load", "mount", "clean") if c not in sub}
        if "load" in lacking:
            self.missing(names["load"], "millpond", lacking["load"])
        if "mount" in lacking:
            self.missing(names["cold"], "millpond", lacking["mount"])
            self.missing(names["warm"], "millpond", lacking["mount"])
        fsspec_why = millpond_fsspec_missing()
        if fsspec_why:
            self.missing(names["fsspec"], "millpond", fsspec_why)

        def clean(ds: str, which: str) -> None:
            """Drop the dataset's cache: ``dataset clean``, or else delete it and apply it again."""
            if "clean" in sub:
                mp(env, "dataset", "clean", ds)
            else:
                mp(env, "delete", "dataset", ds)
                mp(env, "apply", "-f", str(manifests[which]))

        def fsspec_read(ds: str, which: str) -> Callable[[], tuple[int, int]]:
            import fsspec

            paths = [f"{ds}/{n}" for n in self.data.names[which]]
            return lambda: read_fsspec(fsspec.filesystem("millpond", skip_instance_cache=True), paths)

        for which in SETS:
            ds = datasets[which]
            mnt = self.work / f"millpond-mnt-{which}"
            if "load" not in lacking:
                for _ in range(self.runs(which)):
                    clean(ds, which)
                    self.sample(
                        names["load"], "millpond", which,
                        lambda ds=ds, which=which: mp_timed_load(env, ds, self.expect(which)),
                    )
            elif not fsspec_why:  # no DataLoad to warm the cache: a cold read through millpond:// does
                clean(ds, which)
                self.sample(names["fsspec-cold"], "millpond", which, fsspec_read(ds, which))
            else:
                continue
            if "mount" not in lacking:
                with millpond_mounted(env, ds, mnt):
                    same_as_local(mnt, self.data, which)
                    self.warm_pair(names["warm"], "millpond", which, lambda mnt=mnt: read_folder(mnt))
            if not fsspec_why:
                self.warm_pair(names["fsspec"], "millpond", which, fsspec_read(ds, which))
                if "load" not in lacking:  # millpond:// cold too, beside fsspec filecache cold and s3fs
                    clean(ds, which)
                    self.sample(names["fsspec-cold"], "millpond", which, fsspec_read(ds, which))
            if "mount" not in lacking:
                clean(ds, which)
                with millpond_mounted(env, ds, mnt):
                    self.sample(names["cold"], "millpond", which, lambda mnt=mnt: read_folder(mnt))


_STARTED = time.monotonic()


def log(text: str) -> None:
    print(f"[{time.monotonic() - _STARTED:5.0f}s] {text}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- rclone mount


@contextlib.contextmanager
def rclone_mounted(env: dict[str, str], mnt: Path, cache: Path, log_path: Path) -> Iterator[None]:
    mnt.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            ["rclone", "mount", f"bench:{BUCKET}", str(mnt), "--vfs-cache-mode", "full", "--cache-dir", str(cache)],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=far_link._die_with_parent,
        )
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rclone mount did not come up:\n{far_link._log_tail(log_path)}")
            time.sleep(0.1)
        yield
    finally:
        unmount(mnt)
        far_link._stop(proc)
        unmount(mnt)


def unmount(mnt: Path) -> None:
    if os.path.ismount(mnt):
        if subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# ----------------------------------------------------------------------------- millpond


def mp(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(MILLPOND), *args], env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"millpond {' '.join(args)} failed ({proc.returncode}): "
                           f"{(proc.stderr.strip() or proc.stdout.strip())[-800:]}")
    return proc


def mp_commands(env: dict[str, str], *group: str) -> set[str]:
    """The commands ``millpond [GROUP] --help`` lists (none where millpond or the group is missing)."""
    if not MILLPOND.exists():
        return set()
    proc = mp(env, *group, "--help", check=False)
    if proc.returncode != 0:
        return set()
    lines = proc.stdout.split("Commands:", 1)[-1].splitlines() if "Commands:" in proc.stdout else []
    return {line.split()[0] for line in lines if line.startswith("  ") and line.split()}


def millpond_fsspec_missing() -> str:
    """Why ``fsspec.filesystem("millpond")`` cannot be had, or ""."""
    import fsspec

    try:
        fsspec.get_filesystem_class("millpond")
        return ""
    except (ImportError, ValueError) as exc:
        why = f"no millpond:// fsspec protocol ({exc})"
    try:  # not registered as an entry point (yet): the class itself, where it is
        from millpond.datasets.fsspec_fs import MillpondFileSystem

        fsspec.register_implementation("millpond", MillpondFileSystem)
        log("  millpond:// is not registered with fsspec: registered here from millpond.datasets.fsspec_fs")
        return ""
    except ImportError:
        return why


def millpond_setup(env: dict[str, str], link: far_link.FarLink, datasets: dict[str, str],
                   work: Path, medium: str) -> dict[str, Path]:
    """The secret with the S3 keys, and a Dataset with its AlluxioRuntime per set: their manifests.

    The cache tier is MEM on /dev/shm by default, as in Fluid's samples (Alluxio's default
    medium); ``--medium SSD`` puts it in the work folder on disk instead.
    """
    mp(env, "secret", "create", "bench-s3", "--replace",
       f"--from-literal=aws.accessKeyId={link.access_key}", f"--from-literal=aws.secretKey={link.secret_key}")
    manifests = {}
    for which, name in datasets.items():
        store = Path("/dev/shm") / f"millpond-bench-{which}" if medium == "MEM" else work / f"millpond-cache-{which}"
        store.mkdir(parents=True, exist_ok=True)
        manifests[which] = work / f"millpond-{name}.yaml"
        manifests[which].write_text(textwrap.dedent(f"""\
            apiVersion: data.fluid.io/v1alpha1
            kind: Dataset
            metadata:
              name: {name}
            spec:
              mounts:
                - mountPoint: s3://{BUCKET}/{which}/
                  name: {which}
                  path: /
                  options:
                    alluxio.underfs.s3.endpoint: {link.endpoint_url}
                    alluxio.underfs.s3.endpoint.region: {link.region}
                    alluxio.underfs.s3.disable.dns.buckets: "true"
                  encryptOptions:
                    - name: aws.accessKeyId
                      valueFrom:
                        secretKeyRef:
                          name: bench-s3
                          key: aws.accessKeyId
                    - name: aws.secretKey
                      valueFrom:
                        secretKeyRef:
                          name: bench-s3
                          key: aws.secretKey
            ---
            apiVersion: data.fluid.io/v1alpha1
            kind: AlluxioRuntime
            metadata:
              name: {name}
            spec:
              replicas: 1
              tieredstore:
                levels:
                  - mediumtype: {medium}
                    path: {store}
                    quota: 4Gi
                    high: "0.95"
                    low: "0.7"
            """))
    mp(env, "apply", *[a for m in manifests.values() for a in ("-f", str(m))])
    return manifests


def mp_timed_load(env: dict[str, str], dataset: str, expect: tuple[int, int]) -> tuple[int, int]:
    mp(env, "dataset", "load", dataset)
    return expect  # the command's own success is the check; the FUSE passes check the bytes


@contextlib.contextmanager
def millpond_mounted(env: dict[str, str], dataset: str, mnt: Path) -> Iterator[None]:
    mnt.mkdir(parents=True, exist_ok=True)
    try:
        mp(env, "dataset", "mount", dataset, str(mnt))
        if not os.path.ismount(mnt):
            raise RuntimeError(f"`millpond dataset mount {dataset} {mnt}` returned, but {mnt} is not a mount")
        yield
    finally:
        mp(env, "dataset", "unmount", str(mnt), check=False)
        unmount(mnt)


# ----------------------------------------------------------------------------- report


GOALS = [
    # (text, millpond pass, set, peer pass or None for the link, factor, unit)
    ("DataLoad, small files ≥ rclone copy --transfers 16", "millpond DataLoad", "small",
     "rclone copy --transfers 16", 1.0, "files"),
    ("DataLoad, large files ≥ rclone copy --transfers 16", "millpond DataLoad", "large",
     "rclone copy --transfers 16", 1.0, "mb"),
    ("DataLoad, large files ≥ 0.9 × the link's bandwidth", "millpond DataLoad", "large", None, 0.9, "mb"),
    ("millpond:// warm, small ≥ 3 × fsspec filecache warm", "millpond:// warm", "small",
     "fsspec filecache warm", 3.0, "files"),
    ("millpond:// warm, large ≥ 0.8 × local disk", "millpond:// warm", "large", "local disk", 0.8, "mb"),
    ("FUSE warm, small ≥ 10 × rclone mount warm", "millpond FUSE warm", "small",
     "rclone mount --vfs-cache-mode full warm", 10.0, "files"),
    ("FUSE warm, large ≥ 0.8 × local disk", "millpond FUSE warm", "large", "local disk", 0.8, "mb"),
    ("FUSE cold (one sequential reader), small ≥ 3 × rclone mount cold", "millpond FUSE cold", "small",
     "rclone mount --vfs-cache-mode full cold", 3.0, "files"),
]

# Which peer each millpond pass is set against in the ratio table.
PAIRS = [
    ("millpond DataLoad", ["rclone copy --transfers 16"]),
    ("millpond FUSE cold", ["rclone mount --vfs-cache-mode full cold", "s3fs open/read", "fsspec filecache cold"]),
    ("millpond FUSE warm", ["rclone mount --vfs-cache-mode full warm", "local disk"]),
    ("millpond:// warm", ["fsspec filecache warm", "local disk"]),
    ("millpond:// cold", ["fsspec filecache cold", "s3fs open/read"]),
]


def variants(results: dict[str, Result], name: str) -> list[Result]:
    """A pass and its page-cache variants, in a fixed order."""
    if name in results:
        return [results[name]]
    if name == "local disk":
        return [r for k in ("local disk (page cache dropped)", "local disk (page cache warm)") if (r := results.get(k))]
    return [r for k in (f"{name} (page cache dropped)", f"{name} (page cache kept)") if (r := results.get(k))]


def condition(name: str) -> str:
    return "dropped" if "dropped" in name else "kept" if ("kept" in name or "warm)" in name) else ""


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def report(bench: Bench, link: far_link.FarLink, dropped: bool, out_json: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 132)
    results = bench.results
    data = bench.data
    small_n, large_n = len(data.names["small"]), len(data.names["large"])
    large_mib = data.sizes["large"] // max(1, large_n) // MIB
    console.print(f"link: {link.describe()}")
    busy, where = bench.relay_busy
    console.print(f"relay: at most {busy:.0%} of one core in a pass ({where})"
                  + (" — it may have held that pass back" if busy > 0.8 else ": not the bottleneck"))
    console.print("millpond's cache tier: "
                  + ("MEM on /dev/shm (Fluid's default medium; tmpfs pages survive a page cache drop)"
                     if bench.args.medium == "MEM" else "SSD, a folder on local disk"))
    console.print("page cache: " + ("dropped before each pass (sync; echo 3 > /proc/sys/vm/drop_caches)" if dropped
                                     else "NOT dropped (not permitted here): every pass reads with what is cached"))
    table = Table(title=f"Reading every file: small = {small_n:,} × 100 KiB, large = {large_n} × {large_mib} MiB "
                        f"(medians; MB = 10^6 bytes)")
    for col in ("pass", "small files/s", "small MB/s", "large MB/s", "runs"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    for r in results.values():
        if r.missing:
            table.add_row(r.name, "not available", "", "", "", style="dim")
            continue
        runs = "/".join(str(len(r.samples.get(w, []))) for w in SETS)
        style = "bold" if r.group == "millpond" else None
        table.add_row(r.name, fmt(r.files_s("small")), fmt(r.mb_s("small"), 1), fmt(r.mb_s("large"), 1), runs,
                      style=style)
    console.print(table)
    for r in results.values():
        if r.missing:
            console.print(f"[dim]{escape(r.name)}: not available: {escape(r.missing)}[/dim]")

    ratios = Table(title="millpond ÷ peer (higher is better for millpond)")
    for col in ("millpond pass", "peer", "small files/s", "large MB/s"):
        ratios.add_column(col, justify="left" if col in ("millpond pass", "peer") else "right")
    for ours_name, peers in PAIRS:
        for ours in variants(results, ours_name):
            if ours.missing:
                continue
            for peer_name in peers:
                for peer in variants(results, peer_name):
                    if peer.missing or (condition(ours.name) and condition(peer.name)
                                        and condition(ours.name) != condition(peer.name)):
                        continue
                    cells = []
                    for which, value in (("small", Result.files_s), ("large", Result.mb_s)):
                        a, b = value(ours, which), value(peer, which)
                        cells.append(f"{a / b:.2f}×" if a and b else "—")
                    ratios.add_row(ours.name, peer.name, *cells)
    if ratios.row_count:
        console.print(ratios)
    else:
        console.print("millpond ÷ peer: no millpond pass and its peer were both measured")

    goals_out = []
    for text, ours_name, which, peer_name, factor, unit in GOALS:
        value = Result.files_s if unit == "files" else Result.mb_s
        unit_text = "files/s" if unit == "files" else "MB/s"
        ours_all = [r for r in variants(results, ours_name) if not r.missing]
        peers_all = [None] if peer_name is None else [r for r in variants(results, peer_name) if not r.missing]
        pairs = [(o, p) for o in ours_all for p in peers_all
                 if p is None or not condition(o.name) or not condition(p.name)
                 or condition(o.name) == condition(p.name)]
        if not pairs:
            gone = ours_name if not ours_all else peer_name
            console.print(f"[dim] n/a  {escape(text)}: {escape(gone)} not measured[/dim]")
            goals_out.append({"goal": text, "verdict": "n/a", "millpond": None, "peer": None, "factor": factor})
            continue
        for ours, peer in pairs:
            a = value(ours, which)
            b = link.bandwidth_mb_s if peer is None else value(peer, which)
            label = text
            if len(pairs) > 1 or ours.name != ours_name or (peer is not None and peer.name != peer_name):
                label += f" ({ours.name} vs {'the link' if peer is None else peer.name})"
            if a is None or b is None:
                verdict, detail = "n/a", "not measured"
            else:
                verdict = "PASS" if a >= factor * b else "MISS"
                detail = f"{a:,.1f} vs {factor:g} × {b:,.1f} {unit_text} = {a / b:.2f}×"
            colour = {"PASS": "green", "MISS": "red"}.get(verdict, "dim")
            console.print(f"[{colour}]{verdict:>4}[/{colour}]  {escape(label)}: {detail}")
            goals_out.append({"goal": label, "verdict": verdict, "millpond": a, "peer": b, "factor": factor})

    if out_json is not None:
        out_json.write_text(json.dumps({
            "link": {"mode": link.mode, "notes": link.notes, "bandwidth_mb_s": link.bandwidth_mb_s,
                     "rtt_ms": link.rtt_ms, "server_ms": link.server_ms, "description": link.describe()},
            "relay_busy": {"core_share": bench.relay_busy[0], "pass": bench.relay_busy[1]},
            "page_cache_dropped": dropped,
            "sets": {w: {"files": len(data.names[w]), "bytes": data.sizes[w]} for w in SETS},
            "passes": {
                r.name: {"group": r.group, "missing": r.missing or None, **{
                    w: {"files_s": r.files_s(w), "mb_s": r.mb_s(w),
                        "seconds": [s.seconds for s in r.samples.get(w, [])]} for w in SETS}}
                for r in results.values()},
            "goals": goals_out,
        }, indent=2))
        console.print(f"results written to {out_json}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=2000, help="number of 100 KiB files (2000)")
    parser.add_argument("--large-count", type=int, default=4, help="number of large files (4)")
    parser.add_argument("--large-mb", type=int, default=256, help="size of each large file in MiB (256)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each cheap pass on the small set (3)")
    parser.add_argument("--only", help=f"comma-separated passes to run, of: {','.join(GROUPS)}")
    parser.add_argument("--skip", help="comma-separated passes not to run")
    parser.add_argument("--loopback", action="store_true", help="no namespace, no tc: loopback and the relay only")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--medium", choices=("MEM", "SSD"), default="MEM",
                        help="millpond's cache tier: MEM on /dev/shm (Fluid's default) or SSD in the work folder")
    args = parser.parse_args()
    groups = [g for g in GROUPS if not args.only or g in args.only.split(",")]
    groups = [g for g in groups if not args.skip or g not in args.skip.split(",")]
    unknown = set((args.only or "").split(",") + (args.skip or "").split(",")) - set(GROUPS) - {""}
    if unknown:
        parser.error(f"unknown passes: {', '.join(sorted(unknown))}")

    rclone_why = ensure_rclone() if {"rclone-copy", "rclone-mount"} & set(groups) else ""
    if rclone_why:
        log(f"rclone passes skipped: {rclone_why}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mpbench-read-") as tmp:
        work = Path(tmp)
        log(f"generating {args.small} × 100 KiB and {args.large_count} × {args.large_mb} MiB ...")
        data = generate(work / "local", args.small, args.large_count, args.large_mb)
        with far_link.far_link(work / "s3", allow_netns=not args.loopback) as link:
            log(f"server up ({link.mode}); uploading ...")
            upload(link, data)
            link.measure(BUCKET, size_mb=min(256, max(16, args.large_mb)))
            log(link.describe())
            can_drop = drop_caches()
            bench = Bench(args, link, data, work, can_drop)
            steps: dict[str, Callable[[], None]] = {
                "local": bench.local, "s3fs": bench.s3fs, "filecache": bench.filecache,
                "rclone-copy": lambda: bench.rclone_copy(rclone_why),
                "rclone-mount": lambda: bench.rclone_mount(rclone_why), "millpond": bench.millpond,
            }
            for group in groups:
                log(f"{group} ...")
                try:
                    steps[group]()
                except Exception as exc:  # noqa: BLE001 - one failed pass must not lose the others
                    log(f"  {group} failed: {exc!r}\n" + "".join(traceback.format_exc(limit=-4)))
                    bench.result(f"{group} (failed)", group).missing = f"failed: {exc}"
        report(bench, link, can_drop, args.json)
    for which in SETS:
        shutil.rmtree(Path("/dev/shm") / f"millpond-bench-{which}", ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
