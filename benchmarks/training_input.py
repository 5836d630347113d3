"""Feeding a training loop from an image folder in S3: direct s3fs, millpond's FUSE mount (cold, warm), a local copy.

    .venv/bin/python benchmarks/training_input.py           # 6,000 images (~5 min a run on 2 busy cores), needs root
    .venv/bin/python benchmarks/training_input.py --quick   # 1,200 images, a trial (~1.5 min)
    .venv/bin/python benchmarks/training_input.py --only local,millpond --json out.json

The image folder is the one ``examples/fluid_resnet`` trains on: ``make_images.write_image_folder``
writes ImageNet's layout (``train/<class>/*.JPEG``, ``val/<class>/*.JPEG``; small RGB JPEGs made
from scikit-learn's digits) locally; it is uploaded to SeaweedFS behind the emulated far link of
``far_link.py`` (a network namespace, 1 Gbit/s, +5 ms each way; loopback where the machine allows
none, said in the output). Every pass reads ``train/`` the way the example's training loop does:
a ``torch.utils.data.DataLoader`` over ``imagefolder.ImageFolder``, 2 worker processes, batches of
64, shuffled (a new order each epoch, the same orders in every pass), each image decoded with
Pillow and normalised into a tensor. An epoch is timed from the first batch asked to the last one
received, worker start included (as a training loop pays it each epoch); building the Dataset
(listing the classes and files) is timed apart.

Passes:
  s3fs direct            a user without millpond: the same Dataset over ``s3fs`` — the keys listed
                         with ``find``, each image one GET (``cat_file``; ``open`` would add a HEAD)
                         through the far link, an ``S3FileSystem`` per worker process
  millpond FUSE cold     ``millpond dataset mount`` of a Dataset + AlluxioRuntime over the bucket,
                         first epoch: nothing cached, page cache dropped
  millpond FUSE warm     the same mount, second epoch (what the first one cached)
  millpond FUSE warm, page cache dropped   a third epoch after dropping the kernel's caches (root)
  local copy             the generated folder on local disk: first epoch with the page cache
                         dropped, second epoch warm — the limit

For the mount's epochs it also notes the CPU time the mount's own process spent per image: a
warm epoch the kernel serves from its page cache costs it next to nothing (what is left is the
IOCTL the kernel forwards for Python's ``isatty`` check on every ``open()``, answered in libfuse's
C code); a cold one pays the fetches, the cache writes and their index rows.

Every epoch checks what it decoded (the sum of every pixel of every image, and of the labels)
against the local copy's, so a pass that served wrong bytes fails instead of looking fast.
With ``--repeat N`` the passes take turns, N rounds, and the figures are medians.
Goals (issue 13): warm ≥ 5 × s3fs direct and within 10 % of the local copy; cold ≥ 1.5 × s3fs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "examples" / "fluid_resnet"))

import far_link  # noqa: E402
from dataset_read import BUCKET, drop_caches, log, millpond_mounted, millpond_setup, mp  # noqa: E402

PREFIX = "imagenet"  # s3://bench/imagenet/{train,val}/<class>/*.JPEG, as seed 001's bucket holds ImageNet
DATASET = "imagenet"  # the Dataset's name, as in seed 001
PASSES = ("local", "s3fs", "millpond")
S3FS, COLD, WARM, WARM_DROPPED = "s3fs direct", "millpond FUSE cold", "millpond FUSE warm", \
    "millpond FUSE warm, page cache dropped"
LOCAL_DROPPED, LOCAL_WARM = "local copy, page cache dropped", "local copy, page cache warm"


@dataclass
class Epoch:
    images: int
    seconds: float
    pixel_sum: float
    label_sum: int

    @property
    def images_s(self) -> float:
        return self.images / self.seconds


@dataclass
class Result:
    name: str
    group: str
    epochs: list[Epoch] = field(default_factory=list)
    listing_s: float | None = None  # building the Dataset: classes and files listed
    daemon_us: list[float] = field(default_factory=list)  # the mount process's CPU per image, microseconds
    missing: str = ""

    @property
    def images_s(self) -> float | None:
        return statistics.median(e.images_s for e in self.epochs) if self.epochs else None


# ----------------------------------------------------------------------------- the Datasets


def s3_filesystem(options: dict[str, object]):
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)


def _s3_image_folder_class() -> type:
    """The example's ImageFolder, reading each image with one GET instead of from a file (made here: torch is heavy)."""
    import numpy as np
    import torch
    from imagefolder import EXTENSIONS, MEAN, STD, ImageFolder

    class S3ImageFolder(ImageFolder):
        """``ImageFolder`` over ``s3://bucket/root/<class>/<file>``, as a user without a cache writes it."""

        def __init__(self, options: dict[str, object], root: str) -> None:  # noqa: D107 - no super().__init__: no folder
            self.options = options
            self.root = root.strip("/")
            keys = sorted(k for k in s3_filesystem(options).find(self.root) if k.lower().endswith(EXTENSIONS))
            self.classes = sorted({k[len(self.root) + 1:].split("/", 1)[0] for k in keys})
            self.class_to_idx = {name: index for index, name in enumerate(self.classes)}
            self.samples = [(k, self.class_to_idx[k[len(self.root) + 1:].split("/", 1)[0]]) for k in keys]
            self.targets = [label for _, label in self.samples]
            self._mean = torch.tensor(MEAN).view(3, 1, 1)
            self._std = torch.tensor(STD).view(3, 1, 1)
            self._fs = None
            self._pid = 0

        def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
            from PIL import Image

            if self._fs is None or self._pid != os.getpid():  # one client per worker process (no shared event loop)
                self._fs, self._pid = s3_filesystem(self.options), os.getpid()
            key, label = self.samples[index]
            data = self._fs.cat_file(key)
            with Image.open(io.BytesIO(data)) as image:  # then exactly as ImageFolder.__getitem__
                pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
            tensor = torch.from_numpy(pixels).permute(2, 0, 1)
            return (tensor - self._mean) / self._std, label

    return S3ImageFolder


class Reader:
    """Epochs of one Dataset through one DataLoader, as the training loop iterates it."""

    def __init__(self, dataset, workers: int, batch: int, seed: int) -> None:
        import torch
        from torch.utils.data import DataLoader

        self.dataset = dataset
        self.loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                                 persistent_workers=workers > 0, generator=torch.Generator().manual_seed(seed))

    def epoch(self) -> Epoch:
        import torch

        images = label_sum = 0
        pixel_sum = 0.0
        started = time.perf_counter()
        for batch, labels in self.loader:
            images += len(labels)
            label_sum += int(labels.sum())
            pixel_sum += float(batch.to(torch.float64).sum())
        return Epoch(images, time.perf_counter() - started, pixel_sum, label_sum)


def mount_pid(mnt: Path) -> int | None:
    """The pid of the process serving the FUSE mount at ``mnt`` (``python -m millpond.datasets.fuse_mount``)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"millpond.datasets.fuse_mount" in argv and str(mnt).encode() in argv:
                return int(entry.name)
    return None


def listed(make: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    dataset = make()
    return dataset, time.perf_counter() - started


# ----------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, args: argparse.Namespace, link: far_link.FarLink, local: Path, work: Path,
                 can_drop: bool) -> None:
        self.args = args
        self.link = link
        self.local = local  # the generated folder (train/ and val/ inside)
        self.work = work
        self.can_drop = can_drop
        self.results: dict[str, Result] = {}
        self.expected: Epoch | None = None  # the local copy's sums: what every pass must decode
        self.relay_busy: tuple[float, str] = (0.0, "")
        self.datasets: dict[str, tuple[object, float]] = {}
        self.paired: list[float] = []  # FUSE warm ÷ local warm, epoch after epoch
        self.load = [os.getloadavg()[0]]

    def result(self, name: str, group: str) -> Result:
        return self.results.setdefault(name, Result(name, group))

    def reader(self, dataset, run: int) -> Reader:
        """A fresh DataLoader: in a run, every pass reads the same orders (epoch 1, epoch 2 ...)."""
        return Reader(dataset, self.args.workers, self.args.batch_size, self.args.seed + run)

    def sample(self, name: str, group: str, reader: Reader, drop: bool, daemon: int | None = None) -> Epoch:
        """One epoch, checked and recorded; ``daemon``: the mount's pid, whose CPU time the epoch cost is noted."""
        if drop:
            drop_caches()
        cpu = self.link.relay_cpu_s()
        daemon_cpu = far_link.cpu_seconds(daemon)
        epoch = reader.epoch()
        busy = (self.link.relay_cpu_s() - cpu) / epoch.seconds
        spent = ""
        if daemon is not None:
            per_image = (far_link.cpu_seconds(daemon) - daemon_cpu) / epoch.images * 1e6
            self.result(name, group).daemon_us.append(per_image)
            spent = f"; the mount's process {per_image:.0f} µs CPU an image"
        if busy > self.relay_busy[0]:
            self.relay_busy = (busy, name)
        self.check(name, epoch)
        self.load.append(os.getloadavg()[0])
        self.result(name, group).epochs.append(epoch)
        log(f"  {name:<40} {epoch.images_s:>9.1f} images/s  ({epoch.images} in {epoch.seconds:.2f} s; "
            f"relay {busy:.0%} of a core{spent}; load {os.getloadavg()[0]:.1f})")
        return epoch

    def check(self, name: str, epoch: Epoch) -> None:
        if self.expected is None:
            self.expected = epoch
            return
        want = self.expected
        if epoch.images != want.images or epoch.label_sum != want.label_sum or \
                abs(epoch.pixel_sum - want.pixel_sum) > 1e-6 * max(1.0, abs(want.pixel_sum)):
            raise RuntimeError(f"{name}: decoded {epoch.images} images (labels {epoch.label_sum}, pixels "
                               f"{epoch.pixel_sum:.3f}), the local copy {want.images} ({want.label_sum}, "
                               f"{want.pixel_sum:.3f})")

    def missing(self, name: str, group: str, why: str) -> None:
        self.result(name, group).missing = why
        log(f"  {name}: not available ({why})")

    # --- passes

    def local_copy(self, run: int) -> None:
        from imagefolder import ImageFolder

        dataset, seconds = self.dataset("local", lambda: ImageFolder(self.local / "train"))
        reader = self.reader(dataset, run)
        if self.can_drop:
            self.sample(LOCAL_DROPPED, "local", reader, drop=True)
        else:
            reader.epoch()  # the first epoch, not counted: the second one reads what it left in the page cache
        self.sample(LOCAL_WARM, "local", reader, drop=False)
        for name in (LOCAL_DROPPED, LOCAL_WARM):
            if name in self.results:
                self.results[name].listing_s = seconds

    def s3fs(self, run: int) -> None:
        link = self.link
        options = dict(key=link.access_key, secret=link.secret_key, endpoint_url=link.endpoint_url,
                       client_kwargs={"region_name": link.region})
        folder = _s3_image_folder_class()
        dataset, seconds = self.dataset("s3fs", lambda: folder(options, f"{BUCKET}/{PREFIX}/train"))
        self.sample(S3FS, "s3fs", self.reader(dataset, run), drop=False)
        self.results[S3FS].listing_s = seconds

    def millpond(self, run: int) -> None:
        from imagefolder import ImageFolder

        env = {**os.environ, "MILLPOND_HOME": str(self.work / "millpond-home")}
        if run == 0:
            millpond_setup(env, self.link, {PREFIX: DATASET}, self.work, self.args.medium)
        else:  # a cold epoch again: the cache dropped, the mount made afresh
            mp(env, "dataset", "clean", DATASET)
        mnt = self.work / "millpond-mnt"
        with millpond_mounted(env, DATASET, mnt):
            daemon = mount_pid(mnt)
            if self.can_drop:
                drop_caches()
            dataset, seconds = listed(lambda: ImageFolder(mnt / "train"))  # cold: through the fresh mount
            reader = self.reader(dataset, run)
            self.sample(COLD, "millpond", reader, drop=False, daemon=daemon)
            # Warm epochs and the local copy's take turns: a busy spell of this shared machine hits both.
            local = self.reader(self.dataset("local", lambda: ImageFolder(self.local / "train"))[0], run)
            local.epoch()  # its pages back in the page cache (dropped before the cold epoch); not counted
            for _ in range(self.args.pairs):
                ours = self.sample(WARM, "millpond", reader, drop=False, daemon=daemon)
                theirs = self.sample(LOCAL_WARM, "local", local, drop=False)
                self.paired.append(ours.images_s / theirs.images_s)
            if self.can_drop:
                self.sample(WARM_DROPPED, "millpond", reader, drop=True, daemon=daemon)
        self.results[COLD].listing_s = seconds

    def dataset(self, key: str, make: Callable[[], object]) -> tuple[object, float]:
        """A Dataset built once per pass (its listing timed), reused by later runs."""
        if key not in self.datasets:
            self.datasets[key] = listed(make)
        return self.datasets[key]


# ----------------------------------------------------------------------------- report


RATIOS = [
    # (ours, peer)
    (COLD, S3FS), (WARM, S3FS), (WARM_DROPPED, S3FS),
    (WARM, LOCAL_WARM), (WARM_DROPPED, LOCAL_DROPPED), (COLD, LOCAL_DROPPED),
]
GOALS = [
    # (text, ours, peer, factor)
    ("warm ≥ 5 × s3fs direct", WARM, S3FS, 5.0),
    ("warm within 10 % of the local copy (≥ 0.9 ×, both with the page cache warm; paired epochs)",
     WARM, LOCAL_WARM, 0.9),
    ("cold ≥ 1.5 × s3fs direct", COLD, S3FS, 1.5),
]


def report(bench: Bench, link: far_link.FarLink, images: int, out_json: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 132)
    args = bench.args
    results = bench.results
    console.print(f"link: {link.describe()}")
    busy, where = bench.relay_busy
    console.print(f"relay: at most {busy:.0%} of one core in an epoch ({where})"
                  + (" — it may have held that epoch back" if busy > 0.8 else ": not the bottleneck"))
    console.print("millpond's cache tier: " + ("MEM on /dev/shm (Fluid's default medium)" if args.medium == "MEM"
                                               else "SSD, a folder on local disk"))
    console.print("page cache: " + ("dropped where a row says so (sync; echo 3 > /proc/sys/vm/drop_caches)"
                                     if bench.can_drop else "NOT dropped (not permitted here)"))
    console.print(f"machine: {os.cpu_count()} cores seen, load average (1 min) {min(bench.load):.1f} to "
                  f"{max(bench.load):.1f} over the epochs; loader: {args.workers} persistent workers, batch "
                  f"{args.batch_size}, shuffled")
    table = Table(title=f"One epoch over train/: {images:,} JPEGs, DataLoader with {args.workers} workers, "
                        f"decode included (medians of {args.repeat})")
    for col in ("pass", "images/s", "epoch s", "× s3fs direct", "listing s", "mount CPU µs/image"):
        table.add_column(col, justify="left" if col == "pass" else "right")
    s3 = results.get(S3FS)
    base = s3.images_s if s3 is not None and not s3.missing else None
    for r in results.values():
        if r.missing:
            table.add_row(r.name, "not available", "", "", "", "", style="dim")
            continue
        rate = r.images_s
        seconds = statistics.median(e.seconds for e in r.epochs)
        table.add_row(r.name, f"{rate:,.0f}", f"{seconds:.2f}", f"{rate / base:.2f}×" if base else "—",
                      f"{r.listing_s:.2f}" if r.listing_s is not None else "",
                      f"{statistics.median(r.daemon_us):,.0f}" if r.daemon_us else "",
                      style="bold" if r.group == "millpond" else None)
    console.print(table)
    for r in results.values():
        if r.missing:
            console.print(f"[dim]{escape(r.name)}: not available: {escape(r.missing)}[/dim]")

    ratios = Table(title="millpond ÷ peer (images/s; higher is better for millpond)")
    for col in ("millpond pass", "peer", "millpond", "peer ", "ratio"):
        ratios.add_column(col, justify="left" if col in ("millpond pass", "peer") else "right")
    for ours_name, peer_name in RATIOS:
        ours, peer = results.get(ours_name), results.get(peer_name)
        if ours and peer and not ours.missing and not peer.missing:
            a, b = ours.images_s, peer.images_s
            ratios.add_row(ours_name, peer_name, f"{a:,.0f}", f"{b:,.0f}", f"{a / b:.2f}×")
    if ratios.row_count:
        console.print(ratios)

    goals_out = []
    for text, ours_name, peer_name, factor in GOALS:
        ours, peer = results.get(ours_name), results.get(peer_name)
        if not ours or not peer or ours.missing or peer.missing:
            console.print(f"[dim] n/a  {escape(text)}: not measured[/dim]")
            goals_out.append({"goal": text, "verdict": "n/a", "millpond": None, "peer": None, "factor": factor})
            continue
        a, b = ours.images_s, peer.images_s
        ratio = a / b
        detail = f"{a:,.0f} vs {factor:g} × {b:,.0f} images/s = {ratio:.2f}×"
        if (ours_name, peer_name) == (WARM, LOCAL_WARM) and bench.paired:  # back-to-back epochs: the fairer figure
            ratio = statistics.median(bench.paired)
            detail = (f"median of {len(bench.paired)} back-to-back epoch pairs {ratio:.2f}× "
                      f"({', '.join(f'{r:.2f}' for r in bench.paired)}); medians of all epochs {a:,.0f} vs {b:,.0f}")
        verdict = "PASS" if ratio >= factor else "MISS"
        colour = "green" if verdict == "PASS" else "red"
        console.print(f"[{colour}]{verdict:>4}[/{colour}]  {escape(text)}: {detail}")
        goals_out.append({"goal": text, "verdict": verdict, "millpond": a, "peer": b, "ratio": ratio,
                          "factor": factor})

    if out_json is not None:
        out_json.write_text(json.dumps({
            "link": {"mode": link.mode, "notes": link.notes, "bandwidth_mb_s": link.bandwidth_mb_s,
                     "rtt_ms": link.rtt_ms, "server_ms": link.server_ms, "description": link.describe()},
            "relay_busy": {"core_share": busy, "pass": where},
            "page_cache_dropped": bench.can_drop, "load_average": bench.load, "paired_warm_local": bench.paired,
            "images": images, "workers": args.workers, "batch_size": args.batch_size, "medium": args.medium,
            "passes": {r.name: {"group": r.group, "missing": r.missing or None, "images_s": r.images_s,
                                "listing_s": r.listing_s, "seconds": [e.seconds for e in r.epochs],
                                "mount_cpu_us_per_image": r.daemon_us or None}
                       for r in results.values()},
            "goals": goals_out,
        }, indent=2))
        console.print(f"results written to {out_json}")


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=6000, help="images written in all, train and val (6000)")
    parser.add_argument("--quick", action="store_true", help="a trial: 1,200 images, one run of each pass")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each pass (1; figures are medians)")
    parser.add_argument("--pairs", type=int, default=3,
                        help="warm epochs through the mount, each followed by one of the local copy, per run (3)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes (2)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch (64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the images and of the shuffles (0)")
    parser.add_argument("--only", help=f"comma-separated passes to run, of: {','.join(PASSES)}")
    parser.add_argument("--skip", help="comma-separated passes not to run")
    parser.add_argument("--loopback", action="store_true", help="no namespace, no tc: loopback and the relay only")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--medium", choices=("MEM", "SSD"), default="MEM",
                        help="millpond's cache tier: MEM on /dev/shm (Fluid's default) or SSD in the work folder")
    args = parser.parse_args()
    if args.quick:
        args.images, args.repeat = min(args.images, 1200), 1
    if args.images < 2 or args.repeat < 1 or args.pairs < 1 or args.workers < 0 or args.batch_size < 1:
        parser.error("--images must be ≥ 2, --repeat, --pairs and --batch-size ≥ 1, --workers ≥ 0")
    passes = [p for p in PASSES if not args.only or p in args.only.split(",")]
    passes = [p for p in passes if not args.skip or p not in args.skip.split(",")]
    unknown = set((args.only or "").split(",") + (args.skip or "").split(",")) - set(PASSES) - {""}
    if unknown:
        parser.error(f"unknown passes: {', '.join(sorted(unknown))}")
    if "local" not in passes:
        passes.insert(0, "local")  # the local copy's sums are what the other passes are checked against
        log("the local copy runs anyway: its decoded sums check the other passes")

    from make_images import upload, write_image_folder

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mpbench-train-") as tmp:
        work = Path(tmp)
        local = work / "local"
        log(f"writing {args.images} images ...")
        written = write_image_folder(local, args.images, args.seed)
        images = len(list((local / "train").rglob("*.JPEG")))
        size = sum(p.stat().st_size for p in written)
        log(f"  {len(written)} files, {size / 1e6:.1f} MB ({images} under train/)")
        with far_link.far_link(work / "s3", allow_netns=not args.loopback) as link:
            log(f"server up ({link.mode}); uploading ...")
            link.filesystem(direct=True).mkdir(BUCKET)
            upload(local, BUCKET, PREFIX, link.direct_url, link.access_key, link.secret_key)
            link.measure(BUCKET, size_mb=16)
            log(link.describe())
            bench = Bench(args, link, local, work, drop_caches())
            steps: dict[str, Callable[[int], None]] = {
                "local": bench.local_copy, "s3fs": bench.s3fs, "millpond": bench.millpond,
            }
            failed: set[str] = set()
            for run in range(args.repeat):  # passes in turn, run after run: a busy spell hits them all alike
                for name in passes:
                    if name in failed:
                        continue
                    log(f"{name} (run {run + 1} of {args.repeat}) ...")
                    try:
                        steps[name](run)
                    except Exception as exc:  # noqa: BLE001 - one failed pass must not lose the others
                        log(f"  {name} failed: {exc!r}\n" + "".join(traceback.format_exc(limit=-4)))
                        bench.result(f"{name} (failed)", name).missing = f"failed: {exc}"
                        failed.add(name)
        report(bench, link, images, args.json)
    shutil.rmtree(Path("/dev/shm") / f"millpond-bench-{PREFIX}", ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
