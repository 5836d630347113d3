"""Make MNIST-format files from scikit-learn's digits and upload them to ``s3://BUCKET/mnist/``.

The seed's flow starts from the four gzipped IDX files of MNIST in object storage. Nothing
can be downloaded here, so this writes files in exactly MNIST's format from a real
handwritten-digits data set that a package ships: scikit-learn's ``load_digits`` (1,797
scans, 8×8 pixels, 16 grey levels, from the UCI "Optical Recognition of Handwritten Digits"
set). Each 8×8 image is scaled up 3× (nearest neighbour) to 24×24 and padded by 2 pixels to
28×28, grey levels 0-16 mapped to 0-255 as uint8 — the shape and type of MNIST's images,
blockier than MNIST's. The first 1,497 digits (after a fixed shuffle) become the train
split, the other 300 the t10k split.

    python examples/fluid_mnist/make_data.py --bucket BUCKET [--endpoint URL] [--prefix mnist] [--out DIR]

Endpoint and keys come from the arguments or AWS_ENDPOINT_URL / AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY. ``--out DIR`` also keeps the files locally (no upload without --bucket).
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
from pathlib import Path

import numpy as np

FILES = (
    "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"
)
TEST_SIZE = 300
SEED = 0


def idx_bytes(array: np.ndarray) -> bytes:
    """``array`` (uint8) in the IDX format MNIST uses: 0x0000 08 NDIM, big-endian dimensions, the data."""
    if array.dtype != np.uint8:
        raise ValueError(f"IDX here is unsigned bytes only, got {array.dtype}")
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array).tobytes()


def digits_as_mnist() -> dict[str, np.ndarray]:
    """scikit-learn's digits as MNIST-shaped (N, 28, 28) uint8 images and (N,) uint8 labels, split train/t10k."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images  # (1797, 8, 8), values 0..16
    scaled = np.kron(images, np.ones((3, 3)))  # (N, 24, 24), nearest-neighbour upscale
    padded = np.pad(scaled, ((0, 0), (2, 2), (2, 2)))  # (N, 28, 28): MNIST's size, a border like MNIST's
    pixels = np.clip(np.rint(padded * (255 / 16)), 0, 255).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    order = np.random.default_rng(SEED).permutation(len(labels))
    train, test = order[:-TEST_SIZE], order[-TEST_SIZE:]
    return {
        "train-images": pixels[train], "train-labels": labels[train],
        "t10k-images": pixels[test], "t10k-labels": labels[test],
    }


def mnist_files() -> dict[str, bytes]:
    """The four gzipped IDX files by MNIST's names (deterministic bytes: gzip's mtime is 0)."""
    arrays = digits_as_mnist()
    out = {}
    for name in FILES:
        key = name.split("-idx", 1)[0]  # train-images-idx3-ubyte.gz → train-images
        out[name] = gzip.compress(idx_bytes(arrays[key]), mtime=0)
    return out


def s3_store(bucket: str, endpoint: str | None, access_key: str | None, secret_key: str | None, region: str) -> object:
    """An obstore S3 store (obstore is a millpond dependency); a custom endpoint is addressed path-style."""
    from obstore.store import S3Store

    config: dict[str, object] = {"region": region, "virtual_hosted_style_request": endpoint is None}
    if endpoint:
        config["endpoint"] = endpoint
    if access_key:
        config.update(access_key_id=access_key, secret_access_key=secret_key or "")
    return S3Store(bucket, client_options={"allow_http": True}, **config)


def upload(files: dict[str, bytes], bucket: str, prefix: str, endpoint: str | None, access_key: str | None,
           secret_key: str | None, region: str = "us-east-1") -> list[str]:
    """Put each file at ``s3://BUCKET/PREFIX/NAME``; the keys written."""
    import obstore

    store = s3_store(bucket, endpoint, access_key, secret_key, region)
    keys = []
    for name, data in files.items():
        key = f"{prefix.strip('/')}/{name}" if prefix.strip("/") else name
        obstore.put(store, key, data)
        keys.append(key)
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", help="upload to this bucket (it must exist)")
    parser.add_argument("--prefix", default="mnist", help="key prefix in the bucket (default: mnist)")
    parser.add_argument(
        "--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
        help="S3 endpoint URL (default: $AWS_ENDPOINT_URL; none: AWS)",
    )
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    parser.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    parser.add_argument(
        "--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    )
    parser.add_argument("--out", type=Path, help="also write the files into this folder")
    args = parser.parse_args(argv)
    if not args.bucket and not args.out:
        parser.error("give --bucket, --out, or both")
    files = mnist_files()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (args.out / name).write_bytes(data)
        print(f"wrote {len(files)} files to {args.out}")
    if args.bucket:
        keys = upload(files, args.bucket, args.prefix, args.endpoint, args.access_key, args.secret_key, args.region)
        where = args.endpoint or "AWS S3"
        for key in keys:
            print(f"uploaded s3://{args.bucket}/{key} ({len(files[key.rsplit('/', 1)[-1]]):,} bytes) to {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
