"""Seed 000, "使用Fluid构建自定义的机器学习训练流水线", as a script: the notebook's cells, run on this machine.

The notebook builds a Fluid dataflow with Fluid's Python SDK: migrate the raw MNIST files
from object storage into a ReadWrite dataset, decompress them with a bash script,
preload them, train a CNN whose checkpoint lands in the dataset, and migrate that
checkpoint back to object storage. Here the same calls run with ``from millpond import fluid``
against any S3-compatible bucket (SeaweedFS, MinIO, AWS). What differs from the notebook:

- Secrets: the notebook's ``jfs-secret`` and ``oss-access-creds`` were made with kubectl;
  here they are millpond secrets, made from ``--access-key``/``--secret-key`` (or AWS_*).
- The dataset is the notebook's ``juicefs:///`` mount with options ``bucket``/``storage``:
  millpond keeps the files as plain objects under ``BUCKET/juicefs/RUN_ID/`` and its metadata
  in its own index, so the notebook's ``metaurl`` (Redis) is not needed and not passed. The
  folder is per run id because the files persist and the seed's ``gzip -d --keep`` refuses to
  overwrite what an earlier run decompressed.
- The raw data comes from ``BUCKET/mnist/`` (``--make-data`` writes it with make_data.py:
  MNIST-format files made from scikit-learn's digits), named ``minio://HOST:PORT/BUCKET/…``
  for a plain-HTTP endpoint where the notebook had ``oss://BUCKET.ENDPOINT/…``.
- Training: step 4 is the notebook's cell 11 as written: its bash script runs ``arena submit
  pytorch --name=mnist-pytorch --gpus=1 --workers=1 --data=mydataset:/data ...`` (millpond's
  ``arena``, which the step's script finds first on its PATH) and polls ``arena get mnist-pytorch
  -o json | jq .status`` every 5 s. Only the training command differs: this folder's train.py
  run by this Python (``PYTHON train.py --epochs 2 --data /data --save-model --save-model-path
  /data/ckpt``) where the notebook ran /workspace/main.py inside the job's image. The job mounts
  the whole dataset at /data, so the checkpoint is ``/ckpt/mnist_cnn.pt`` in the dataset, as in
  the notebook. Two branches are added to the polling loop so the step always ends (the notebook's
  polls forever): a FAILED job fails the step with the job's message (the instance's last log
  lines before it), and a job not done within ``--job-timeout`` (600 s; one still QUEUING, or
  hung) is deleted and fails the step. DataProcess has no timeout of its own.
- ``--gpus=1``: on a machine without a GPU the job runs on the CPU: unless gpu-fallback is
  configured (``millpond config set gpu-fallback …`` or MILLPOND_GPU_FALLBACK), run_flow.py sets
  MILLPOND_GPU_FALLBACK=cpu for the flow and says so; on a machine with a GPU, the job gets one.
- The job stays after the flow (``arena get mnist-pytorch``, ``arena logs mnist-pytorch``), as
  a Kubernetes job does; a second run refuses to start until it is deleted (``arena delete
  mnist-pytorch``), since the notebook's job name is fixed.
- Images (``debian:buster`` …) are recorded in the manifests for Kubernetes and not pulled.

    python examples/fluid_mnist/run_flow.py --endpoint http://127.0.0.1:8333 --bucket BUCKET --make-data
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from millpond import fluid
from millpond.fluid import constants, models

HERE = Path(__file__).resolve().parent


def bucket_options(endpoint: str | None, bucket: str, folder: str) -> dict[str, str]:
    """The juicefs:// options naming where the dataset's files live (the notebook's ``bucket``/``storage``)."""
    if endpoint:
        return {"bucket": f"{endpoint.rstrip('/')}/{bucket}/{folder}", "storage": "minio"}
    return {"bucket": f"https://{bucket}.s3.amazonaws.com/{folder}", "storage": "s3"}


def external_uri(endpoint: str | None, bucket: str, path: str) -> str:
    """A DataMigrate URI for ``BUCKET/PATH``.

    minio://HOST:PORT/… (plain HTTP), s3://BUCKET.HOST/…, or s3://BUCKET/… (AWS).
    """
    path = path.lstrip("/")
    if not endpoint:
        return f"s3://{bucket}/{path}"
    parts = urlsplit(endpoint)
    if parts.scheme == "http":
        return f"minio://{parts.netloc}/{bucket}/{path}"
    return f"s3://{bucket}.{parts.netloc}/{path}"


def create_secrets(access_key: str, secret_key: str) -> None:
    """The notebook's two Kubernetes secrets, as millpond secrets (``millpond secret list`` shows them)."""
    from millpond.settings import load_settings
    from millpond.store.secrets import ConfigStore

    store = ConfigStore(load_settings().home)
    keys = {"access-key": access_key, "secret-key": secret_key}
    store.create("secret", "jfs-secret", keys, replace=True)
    store.create("secret", "oss-access-creds", keys, replace=True)


def get_oss_encrypt_options(secret_name: str) -> list[models.EncryptOption]:
    """As the notebook writes it (cell 8)."""
    # Replace the following with your own secret references
    encrypt_options = []
    encrypt_options.append(models.EncryptOption(
        name="access-key",
        value_from=models.EncryptOptionSource(
            secret_key_ref=models.SecretKeySelector(
                name=secret_name,
                key="access-key"
            )
        )
    ))
    encrypt_options.append(models.EncryptOption(
        name="secret-key",
        value_from=models.EncryptOptionSource(
            secret_key_ref=models.SecretKeySelector(
                name=secret_name,
                key="secret-key"
            )
        )
    ))
    return encrypt_options


decompress_mnist_script = """
#!/bin/bash
set -ex

cd /data/mnist

gzip -d --keep t10k-images-idx3-ubyte.gz
gzip -d --keep t10k-labels-idx1-ubyte.gz
gzip -d --keep train-images-idx3-ubyte.gz
gzip -d --keep train-labels-idx1-ubyte.gz
"""


JOB_NAME = "mnist-pytorch"  # the name cell 11 gives the Arena job
JOB_IMAGE = "cloudnative4ai/torch-samples:cuda-mnist"  # recorded with the job, not pulled
JOB_TIMEOUT_S = 600


def get_submit_job_script(dataset_name: str, job_image: str, command: str, timeout_s: int = JOB_TIMEOUT_S) -> str:
    """Cell 11's script: submit the Arena PyTorch job, then poll it every 5 s until it SUCCEEDED.

    As the notebook writes it, plus two exits from its loop so the step always ends: a FAILED job
    fails the step, the job's message on the last line (which the DataProcess's Failed condition
    quotes), and a job not done within ``timeout_s`` is deleted, so it cannot run after its step
    failed. ``set +x`` first, so the reason, not the trace of ``exit``, is the last line.
    """
    return f"""
    #!/bin/bash
    set -ex
    arena submit pytorch \
        --name=mnist-pytorch \
        --gpus=1 \
        --workers=1 \
        --image={job_image} \
        --data={dataset_name}:/data \
        {command}

    deadline=$((SECONDS + {timeout_s}))
    while true; do
        sleep 5
        status=$(arena get mnist-pytorch -o json | jq .status | tr -d '"')
        if [ "$status" == "SUCCEEDED" ]; then
            break
        fi
        if [ "$status" == "FAILED" ]; then
            set +x
            arena logs mnist-pytorch --tail 10
            echo "the arena job mnist-pytorch FAILED: $(arena get mnist-pytorch | sed -n 's/^Message: *//p')"
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            set +x
            arena delete mnist-pytorch
            echo "the arena job mnist-pytorch was still ${{status:-unknown}} after {timeout_s}s: deleted it"
            exit 1
        fi
    done
    """


def train_command(epochs: int) -> str:
    """Cell 11's training command, pointing at this folder's train.py run by this Python.

    The notebook: ``'python /workspace/main.py --epochs 2 --data /data --save-model --save-model-path /data/ckpt'``
    (one word, quoted, which arena joins and runs with ``sh -c``).
    """
    python, script = shlex.quote(sys.executable), shlex.quote(str(HERE / "train.py"))
    return shlex.quote(f"{python} {script} --epochs {epochs} --data /data --save-model --save-model-path /data/ckpt")


def train_step(flow: fluid.FluidDataset | fluid.FluidDataFlow, dataset_name: str, command: str,
               timeout_s: int = JOB_TIMEOUT_S) -> fluid.FluidDataFlow:
    """Cell 11's step: the submit-and-poll script, the dataset's MNIST/raw at /data/mnist as the notebook has it.

    The script does not read it; the step holds the dataset's shared mount, which the job's
    ``--data`` then uses (``$MILLPOND_HOME/mnt/NAMESPACE/NAME``), until the job is done.
    """
    return flow.process(dataset_mountpath="/data/mnist", sub_path="MNIST/raw", processor=models.Processor(
        service_account_name="fluid-demo",
        script=models.ScriptProcessor(
            command=["bash"],
            source=get_submit_job_script(dataset_name, JOB_IMAGE, command, timeout_s),
            image="registry.cn-beijing.aliyuncs.com/fluid-namespace/python-arena",
            image_tag="3.7-0.9.11-ce87d10-01101736")))


def build_flow(dataset: fluid.FluidDataset, endpoint: str | None, bucket: str, epochs: int,
               job_timeout_s: int = JOB_TIMEOUT_S) -> fluid.FluidDataFlow:
    """Cells 8-12: migrate in, decompress, preload, train (an Arena job), migrate the checkpoint out."""
    flow = dataset.migrate(path="/MNIST/raw/", migrate_direction=constants.DATA_MIGRATE_DIRECTION_FROM,
                           external_storage=models.ExternalStorage(
                               uri=external_uri(endpoint, bucket, "mnist/"),
                               encrypt_options=get_oss_encrypt_options("oss-access-creds")))

    flow = flow.process(dataset_mountpath="/data/mnist/", sub_path="MNIST/raw/", processor=models.Processor(
        script=models.ScriptProcessor(
            command=["bash"],
            source=decompress_mnist_script,
            image="debian",
            image_tag="buster")))

    flow = flow.preload(target_path="/MNIST/raw")

    flow = train_step(flow, dataset.name, train_command(epochs), job_timeout_s)

    flow = flow.migrate(path="/ckpt/mnist_cnn.pt", migrate_direction=constants.DATA_MIGRATE_DIRECTION_TO,
                        external_storage=models.ExternalStorage(
                            uri=external_uri(endpoint, bucket, "mnist_ckpt/mnist_cnn.pt"),
                            encrypt_options=get_oss_encrypt_options("oss-access-creds")))
    return flow


def gpu_fallback_note() -> str | None:
    """Set MILLPOND_GPU_FALLBACK=cpu for this flow when gpu-fallback is not configured and there is no GPU.

    Cell 11 asks ``--gpus=1``; without a GPU and without the fallback, ``arena submit`` refuses
    the job. Returns the line saying so, or None when nothing was changed.
    """
    from millpond.scheduling.machine import capacity
    from millpond.settings import CONFIGURABLE, load_settings, stored_settings

    variable = CONFIGURABLE["gpu-fallback"][0]
    settings = load_settings()
    if os.environ.get(variable) or "gpu-fallback" in stored_settings(settings.home):
        return None
    if capacity(settings.fake_gpus).gpus:
        return None
    os.environ[variable] = "cpu"  # the DataProcess runner, its script and arena inherit it
    return (f"no GPU here: the job's --gpus=1 runs on the CPU "
            f"({variable}=cpu, as `millpond config set gpu-fallback cpu`)")


def left_over_job() -> str | None:
    """The status of an Arena job named ``JOB_NAME`` left by an earlier run, or None."""
    from millpond.errors import NotFoundError
    from millpond.training import TrainingClient

    try:
        return TrainingClient().get(JOB_NAME).status
    except NotFoundError:
        return None


def step_table(run: fluid.FlowHandle) -> list[dict[str, Any]]:
    """One row per step: name, kind, phase, duration, and the first condition's message."""
    rows = []
    for step, entry in zip(run.flow_steps, run.get_current_status(), strict=False):
        name, status = next(iter(entry.items()))
        conditions = status.get("conditions") or [{}]
        rows.append({"name": name, "kind": step["kind"], "phase": status.get("phase", ""),
                     "duration": status.get("duration", ""), "message": conditions[0].get("message", ""),
                     "log": (status.get("infos") or {}).get("log", "")})
    return rows


def settled_steps(run: fluid.FlowHandle, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The step table once no step is Pending or Executing (after a failure the later steps turn Failed too)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = step_table(run)
        if all(row["phase"] in ("Complete", "Failed") for row in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def print_steps(rows: list[dict[str, Any]]) -> None:
    print(f"{'STEP':<32} {'KIND':<12} {'PHASE':<10} DURATION")
    for row in rows:
        print(f"{row['name']:<32} {row['kind']:<12} {row['phase']:<10} {row['duration']}")
        if row["phase"] == "Failed":
            print(f"  {row['message']}")


def print_log(path: str, lines: int = 20) -> None:
    if path and Path(path).is_file():
        print(f"--- {path} (last {lines} lines)")
        print("\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:]))


def print_job_log(lines: int = 6) -> None:
    """The end of the training job's log, as ``arena logs mnist-pytorch --tail 6`` prints it."""
    from millpond.training import TrainingClient

    print(f"--- arena logs {JOB_NAME} --tail {lines}")
    print(TrainingClient().logs(JOB_NAME, tail=lines), end="")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Seed 000's MNIST dataflow (Fluid SDK) against an S3 bucket.")
    parser.add_argument(
        "--bucket", required=True, help="the bucket (it must exist); raw data at mnist/, checkpoint to mnist_ckpt/"
    )
    parser.add_argument(
        "--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
        help="S3 endpoint URL (default: $AWS_ENDPOINT_URL; none: AWS)",
    )
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    parser.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    parser.add_argument(
        "--make-data", action="store_true", help="first upload the MNIST-format files (make_data.py) to mnist/"
    )
    parser.add_argument("--dataset", default="mydataset")
    parser.add_argument("--run-id", default="torch-mnist-training")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--job-timeout", type=int, default=JOB_TIMEOUT_S, metavar="SECONDS",
        help="the training step deletes its Arena job and fails when the job is not done by then",
    )
    parser.add_argument(
        "--cache-medium", default="MEM", choices=["MEM", "SSD", "HDD"],
        help="the runtime's cache tier (the notebook: MEM)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the dataset in place (the notebook's last cell cleans it up)"
    )
    args = parser.parse_args(argv)
    if not args.access_key or not args.secret_key:
        parser.error("S3 keys are needed: --access-key/--secret-key or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
    if args.job_timeout < 1:
        parser.error("--job-timeout is at least 1 second")
    left = left_over_job()
    if left is not None:
        print(f"error: the Arena job {JOB_NAME} exists ({left}, left by an earlier run): "
              f"arena delete {JOB_NAME}, then run again", file=sys.stderr)
        return 2
    started = time.monotonic()
    note = gpu_fallback_note()
    if note:
        print(note)

    if args.make_data:
        sys.path.insert(0, str(HERE))
        import make_data

        make_data.upload(make_data.mnist_files(), args.bucket, "mnist", args.endpoint, args.access_key, args.secret_key)
        print(f"uploaded MNIST-format files to s3://{args.bucket}/mnist/")
    create_secrets(args.access_key, args.secret_key)

    # In [3]: initialize the fluid client
    client_config = fluid.ClientConfig()
    fluid_client = fluid.FluidClient(client_config)

    # In [4]: the fluidsdk logger at DEBUG, to stdout
    logger = logging.getLogger("fluidsdk")
    stream_handler = logging.StreamHandler(sys.stdout)
    stream_handler.setFormatter(logging.Formatter('%(asctime)s - %(name)s - %(levelname)s - %(message)s'))
    logger.addHandler(stream_handler)
    logger.setLevel(logging.DEBUG)

    # In [5]: create the dataset (a juicefs:/// mount whose files live in the bucket)
    secret_name = "jfs-secret"
    options = bucket_options(args.endpoint, args.bucket, f"juicefs/{args.run_id}")
    cred_secret_options = {
        "access-key": "access-key",  # <encrypt_option_key>: <key_reference_in_secret>
        "secret-key": "secret-key",
    }
    try:
        fluid_client.create_dataset(
            dataset_name=args.dataset, mount_name="minio", mount_point="juicefs:///", mode="ReadWrite",
            options=options, cred_secret_name=secret_name, cred_secret_options=cred_secret_options,
        )
    except fluid.AlreadyExists as exc:
        print(
            f"error: {exc} (left by a --keep run?): millpond delete dataset {args.dataset}, or pass --dataset",
            file=sys.stderr,
        )
        return 2

    try:
        # In [6]: bind a runtime
        dataset = fluid_client.get_dataset(dataset_name=args.dataset)
        dataset.bind_runtime(runtime_type=constants.JUICEFS_RUNTIME_KIND, replicas=2, cache_capacity_GiB=10,
                             cache_medium=args.cache_medium, wait=True)
        # In [7]
        print(dataset.report_status("binding_status"))

        # In [8]-[12]: the dataflow, lazily built
        flow = build_flow(dataset, args.endpoint, args.bucket, args.epochs, args.job_timeout)

        # In [13]: run it and wait
        try:
            run = flow.run(run_id=args.run_id)
        except fluid.AlreadyExists as exc:
            print(f"error: {exc}: an earlier run used run id {args.run_id!r}; pass another --run-id", file=sys.stderr)
            return 2
        try:
            run.wait()
            failed = None
        except fluid.DataFlowFailed as exc:
            failed = exc
        rows = settled_steps(run)
        print_steps(rows)
        if failed is not None:
            print(f"error: {failed}", file=sys.stderr)
            if failed.step == rows[0]["name"] and not args.make_data:
                print(
                    f"hint: is there MNIST data at s3://{args.bucket}/mnist/? --make-data uploads some", file=sys.stderr
                )
            if "already exists" in str(failed):
                print(f"hint: the dataset's files persist in s3://{args.bucket}/juicefs/{args.run_id}/ "
                      "(a ReadWrite dataset, as with JuiceFS); remove them or pass another --run-id", file=sys.stderr)
            for row in rows:
                if row["phase"] == "Failed" and row["log"]:
                    print_log(row["log"])
            return 1
        for row in rows:
            if row["kind"] == constants.DATA_PROCESS_KIND:
                print_log(row["log"], lines=6)
        print_job_log()
        print(f"checkpoint: {external_uri(args.endpoint, args.bucket, 'mnist_ckpt/mnist_cnn.pt')}")
    finally:
        # The notebook's last cell: clean the dataset up (its files stay in the bucket)
        if not args.keep:
            fluid_client.cleanup_dataset(args.dataset)
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
