"""Seed 001 on one machine: an image folder in a bucket, Fluid's cache over it, a ResNet trained by arena.

The seed ("用Fluid加速机器学习训练") puts ImageNet in object storage, declares a Dataset and an
AlluxioRuntime over it, and runs ``arena submit mpi --workers=4 --gpus=8 --data imagenet:/data
-e DATA_DIR=/data/imagenet ... ./launch-example.sh 4 8`` (ResNet-50, Horovod). This script does
each step with millpond's commands, at the scale of a small CPU machine:

1. make an ImageNet-style folder of small JPEGs (make_images.py) and upload it to
   ``s3://BUCKET/imagenet/``;
2. ``millpond secret create imagenet-s3 …`` and ``millpond apply -f dataset.yaml`` (the Dataset and
   its AlluxioRuntime, with the bucket, endpoint and region filled in);
3. with ``--preload``, ``millpond dataset load imagenet`` (a DataLoad) warms the cache first;
4. ``arena submit pytorch --workers 2 --working-dir THIS_FOLDER --data imagenet:/data
   -e DATA_DIR=/data/imagenet ./train.sh``: two instances, a small ResNet with DDP over gloo;
5. polls the job (as ``arena get NAME -o json`` shows it) until it ends, then prints ``arena get``
   and the logs.

    python examples/fluid_resnet/run_example.py --bucket BUCKET --endpoint http://127.0.0.1:8333 \\
        --access-key KEY --secret-key SECRET [--count 6000] [--epochs 2] [--preload]

The dataset and the job are left in place (``millpond get dataset imagenet`` shows what is cached;
``arena delete NAME`` and ``millpond delete dataset imagenet`` remove them).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_images  # noqa: E402 - this folder is not a package

DATASET = "imagenet"
SECRET = "imagenet-s3"
FINISHED = ("SUCCEEDED", "FAILED")


def tool(name: str) -> str:
    """The ``millpond``/``arena`` installed beside this Python, else the one on the PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


def run(*words: str, shown: tuple[str, ...] | None = None, check: bool = True,
        quiet: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a millpond command as a user types it (printed with ``$``; ``shown`` hides secrets)."""
    if not quiet:
        print("$ " + shlex.join(shown or words), flush=True)
    result = subprocess.run([tool(words[0]), *words[1:]], capture_output=True, text=True, check=False)
    if not quiet:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        sys.stdout.flush()
    if check and result.returncode != 0:
        raise SystemExit(f"error: {shlex.join(shown or words)} exited with {result.returncode}")
    return result


def manifests(bucket: str, endpoint: str | None, region: str, cache_path: Path | None) -> str:
    """dataset.yaml with the bucket, endpoint and region filled in; each tier under ``cache_path`` if given."""
    text = string.Template((HERE / "dataset.yaml").read_text()).substitute(
        BUCKET=bucket, S3_ENDPOINT=endpoint or "", S3_REGION=region)
    documents: list[dict[str, Any]] = list(yaml.safe_load_all(text))
    for document in documents:
        if document["kind"] == "Dataset":
            for mount in document["spec"]["mounts"]:
                if not endpoint:  # AWS: the default endpoint, virtual-hosted buckets
                    for key in ("alluxio.underfs.s3.endpoint", "alluxio.underfs.s3.disable.dns.buckets"):
                        mount["options"].pop(key, None)
        elif cache_path is not None:
            for level in document["spec"]["tieredstore"]["levels"]:
                level["path"] = str(cache_path / level["mediumtype"].lower())
    return yaml.safe_dump_all(documents, sort_keys=False)


def wait(name: str, timeout: float) -> dict[str, Any]:
    """Poll the job until it ends, printing each new status; its ``arena get -o json``.

    Through millpond's Python client (shaped like Arena's SDK), in this process: each ``arena get``
    would start a Python (0.7 s of CPU), a real cost next to training on 2 cores.
    """
    from millpond.training import TrainingClient

    client = TrainingClient()
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        info = client.get(name)
        if info.status != last:
            last = info.status
            print(f"{time.strftime('%H:%M:%S')} {name}: {last}", flush=True)
        if info.finished:
            return info.as_dict()
        if time.monotonic() > deadline:
            raise SystemExit(f"error: {name} is still {last} after {timeout:.0f} s (arena logs {name} -f follows it)")
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True, help="the bucket (it must exist); the images go to imagenet/")
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                        help="S3 endpoint URL (default: $AWS_ENDPOINT_URL; none: AWS)")
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    parser.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    parser.add_argument("--region",
                        default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    parser.add_argument("--count", type=int, default=6000, help="images to make (default: 6000, 90%% train)")
    parser.add_argument("--skip-upload", action="store_true", help="the images are in the bucket already")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--name", default="resnet-fluid", help="the job's name (default: resnet-fluid)")
    parser.add_argument("--preload", action="store_true", help="load the dataset into the cache before training")
    parser.add_argument("--cache-path", type=Path, help="put the runtime's tiers here (default: /dev/shm, the home)")
    parser.add_argument("--checkpoint", type=Path, help="a file the job's rank 0 saves the model to")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the job (default: 900)")
    args = parser.parse_args(argv)
    if not args.access_key or not args.secret_key:
        parser.error("S3 keys are needed: --access-key/--secret-key or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
    if args.count < 20 or args.epochs < 1:
        parser.error("--count must be at least 20 and --epochs at least 1")
    if args.checkpoint is not None and not args.checkpoint.is_absolute():
        args.checkpoint = args.checkpoint.resolve()
    if run("arena", "get", args.name, quiet=True, check=False).returncode == 0:
        print(f"error: a job named {args.name!r} exists: arena delete {args.name}, or pass --name", file=sys.stderr)
        return 2
    started = time.monotonic()

    if not args.skip_upload:
        with tempfile.TemporaryDirectory(prefix="imagenet-") as folder:
            made = make_images.write_image_folder(Path(folder), args.count)
            print(f"made {len(made)} images ({sum(p.stat().st_size for p in made) / 1024:,.0f} KiB) "
                  f"in {time.monotonic() - started:.1f} s", flush=True)
            moment = time.monotonic()
            try:
                uploaded = make_images.upload(Path(folder), args.bucket, "imagenet", args.endpoint, args.access_key,
                                              args.secret_key)
            except Exception as exc:  # obstore's errors (no such bucket, refused keys, no server)
                print(f"error: upload to s3://{args.bucket}/imagenet/ failed: {str(exc).strip().splitlines()[0]}",
                      file=sys.stderr)
                return 1
            print(f"uploaded {uploaded} files to s3://{args.bucket}/imagenet/ in {time.monotonic() - moment:.1f} s",
                  flush=True)

    with tempfile.TemporaryDirectory(prefix="imagenet-keys-") as keys:  # files, so no key shows in ps
        (Path(keys) / "id").write_text(args.access_key)
        (Path(keys) / "secret").write_text(args.secret_key)
        run("millpond", "secret", "create", SECRET, "--replace", "--from-file", f"aws.accessKeyId={keys}/id",
            "--from-file", f"aws.secretKey={keys}/secret",
            shown=("millpond", "secret", "create", SECRET, "--replace", "--from-literal", "aws.accessKeyId=…",
                   "--from-literal", "aws.secretKey=…"))
    with tempfile.NamedTemporaryFile("w", prefix="dataset-", suffix=".yaml") as filled:
        filled.write(manifests(args.bucket, args.endpoint, args.region, args.cache_path))
        filled.flush()
        run("millpond", "apply", "-f", filled.name, shown=("millpond", "apply", "-f", "dataset.yaml"))
    run("millpond", "get", "dataset", DATASET)
    if args.preload:
        run("millpond", "dataset", "load", DATASET)

    env = {"DATA_DIR": f"/data/{DATASET}", "EPOCHS": str(args.epochs), "PYTHON": sys.executable}
    if args.checkpoint is not None:
        env["CHECKPOINT"] = str(args.checkpoint)
    submitted = time.monotonic()
    run("arena", "submit", "pytorch", "--name", args.name, "--workers", "2", "--working-dir", str(HERE),
        "--data", f"{DATASET}:/data", *[word for key, value in env.items() for word in ("-e", f"{key}={value}")],
        "./train.sh")
    try:
        info = wait(args.name, args.timeout)
    except KeyboardInterrupt:  # the job is supervised in the background: it goes on, as with Arena
        print(f"\ninterrupted: {args.name} goes on; arena logs {args.name} -f follows it, "
              f"arena delete {args.name} stops it", file=sys.stderr)
        return 130
    print(f"the job took {time.monotonic() - submitted:.1f} s", flush=True)
    run("arena", "get", args.name, check=False)
    run("arena", "logs", args.name, check=False)
    run("arena", "logs", args.name, "-i", f"{args.name}-worker-0", "--tail", "4", check=False)
    run("millpond", "get", "dataset", DATASET, check=False)
    print(f"done in {time.monotonic() - started:.1f} s: {info['status']}")
    if info["status"] != "SUCCEEDED" and args.skip_upload:
        print(f"hint: is the image folder in s3://{args.bucket}/imagenet/? Without --skip-upload it is made and "
              "uploaded first", file=sys.stderr)
    return 0 if info["status"] == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
