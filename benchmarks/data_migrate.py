"""DataMigrate of many small files from S3 over a far link: what ``parallelism`` buys, beside rclone.

    .venv/bin/python benchmarks/data_migrate.py             # 2,000 × 100 KiB, parallelism 1, 4, 16, 32
    .venv/bin/python benchmarks/data_migrate.py --files 300 # a quick trial

SeaweedFS sits behind the emulated far link of ``far_link.py`` (a namespace, 1 Gbit/s, +5 ms
each way; loopback where the machine allows none, said in the output). Each pass migrates
every object of ``s3://bench/small/`` into a ReadWrite dataset over a local folder with
``millpond apply --wait`` (the whole command, as a user waits for it), and the peer copies the
same objects with ``rclone copy --transfers N`` into a local folder. It prints files/s, the
speed-up over parallelism 1, and millpond's ratio to rclone at the same concurrency.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import far_link  # noqa: E402
from dataset_read import BUCKET, ensure_rclone, generate, mp, upload  # noqa: E402

LEVELS = (1, 4, 16, 32)


def migrate_manifest(name: str, link: far_link.FarLink, parallelism: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: data.fluid.io/v1alpha1
        kind: DataMigrate
        metadata: {{name: {name}}}
        spec:
          from:
            externalStorage:
              uri: s3://{BUCKET}/small/
              encryptOptions:
                - {{name: alluxio.underfs.s3.endpoint, valueFrom: {{secretKeyRef: {{name: bench-s3, key: endpoint}}}}}}
                - {{name: aws.accessKeyId, valueFrom: {{secretKeyRef: {{name: bench-s3, key: aws.accessKeyId}}}}}}
                - {{name: aws.secretKey, valueFrom: {{secretKeyRef: {{name: bench-s3, key: aws.secretKey}}}}}}
          to:
            dataset: {{name: target, namespace: default, path: /p{parallelism}/}}
          parallelism: {parallelism}
        """)


def dataset_manifest(store: Path, cache: Path) -> str:
    return textwrap.dedent(f"""\
        apiVersion: data.fluid.io/v1alpha1
        kind: Dataset
        metadata: {{name: target}}
        spec:
          accessModes: [ReadWriteMany]
          mounts: [{{mountPoint: "local://{store}", name: store, path: /}}]
        ---
        apiVersion: data.fluid.io/v1alpha1
        kind: AlluxioRuntime
        metadata: {{name: target}}
        spec:
          tieredstore: {{levels: [{{mediumtype: SSD, path: "{cache}", quota: 8Gi}}]}}
        """)


def rclone_copy(link: far_link.FarLink, work: Path, transfers: int) -> float:
    dest = work / f"rclone-{transfers}"
    shutil.rmtree(dest, ignore_errors=True)
    prefix = "RCLONE_CONFIG_BENCH_"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
    env.update({"RCLONE_CONFIG": str(work / "rclone.conf"), prefix + "TYPE": "s3", prefix + "PROVIDER": "Other",
                prefix + "ENV_AUTH": "false", prefix + "ACCESS_KEY_ID": link.access_key,
                prefix + "SECRET_ACCESS_KEY": link.secret_key, prefix + "ENDPOINT": link.endpoint_url,
                prefix + "REGION": link.region, prefix + "FORCE_PATH_STYLE": "true"})
    (work / "rclone.conf").touch()
    started = time.perf_counter()
    subprocess.run(["rclone", "copy", "--transfers", str(transfers), f"bench:{BUCKET}/small", str(dest)],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="100 KiB objects to migrate (2000)")
    parser.add_argument("--loopback", action="store_true", help="no namespace, no tc: loopback and the relay only")
    args = parser.parse_args()
    rclone_why = ensure_rclone()
    with tempfile.TemporaryDirectory(prefix="mpbench-migrate-") as tmp:
        work = Path(tmp)
        data = generate(work / "local", args.files, 0, 1)
        with far_link.far_link(work / "s3", allow_netns=not args.loopback) as link:
            upload(link, data)
            env = {**os.environ, "MILLPOND_HOME": str(work / "home")}
            mp(env, "secret", "create", "bench-s3", f"--from-literal=endpoint={link.endpoint_url}",
               f"--from-literal=aws.accessKeyId={link.access_key}", f"--from-literal=aws.secretKey={link.secret_key}")
            store = work / "store"
            store.mkdir()
            (work / "dataset.yaml").write_text(dataset_manifest(store, work / "cache"))
            mp(env, "apply", "-f", str(work / "dataset.yaml"))
            print(link.describe(), flush=True)
            rows = []
            for parallelism in LEVELS:
                manifest = work / f"migrate-{parallelism}.yaml"
                manifest.write_text(migrate_manifest(f"migrate-p{parallelism}", link, parallelism))
                started = time.perf_counter()
                mp(env, "apply", "--wait", "-f", str(manifest))
                seconds = time.perf_counter() - started
                copied = list((store / f"p{parallelism}").iterdir())
                if len(copied) != args.files:
                    raise RuntimeError(
                        f"parallelism {parallelism}: {len(copied)} files migrated, expected {args.files}"
                    )
                peer = None if rclone_why else rclone_copy(link, work, parallelism)
                rows.append((parallelism, seconds, peer))
                print(f"parallelism {parallelism:>2}: millpond {args.files / seconds:7.0f} files/s"
                      + (f"   rclone --transfers {parallelism}: {args.files / peer:7.0f} files/s" if peer else ""),
                      flush=True)
    base = rows[0][1]
    print(f"\nDataMigrate of {args.files} × 100 KiB (files/s; whole commands)")
    print(f"{'parallelism':>11}  {'millpond':>9}  {'speed-up':>8}  {'rclone':>8}  {'millpond ÷ rclone':>17}")
    for parallelism, seconds, peer in rows:
        ratio = f"{peer / seconds:.2f}×" if peer else "-"
        rclone = f"{args.files / peer:8.0f}" if peer else f"{'-':>8}"
        print(f"{parallelism:>11}  {args.files / seconds:9.0f}  {base / seconds:7.2f}×  {rclone}  {ratio:>17}")
    if rclone_why:
        print(f"rclone: not measured ({rclone_why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
