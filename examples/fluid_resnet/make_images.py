"""Make an ImageNet-style folder of small JPEGs from scikit-learn's digits, and upload it to a bucket.

Seed 001 trains ResNet-50 over ImageNet (143.7 GiB in object storage, read through Fluid's cache).
Nothing can be downloaded here, so this writes a folder of the same layout — ``train/<class>/*.JPEG``
and ``val/<class>/*.JPEG``, classes named like ImageNet's synsets (``n00`` … ``n09``) — from a real
data set a package ships: scikit-learn's ``load_digits`` (1,797 handwritten digits, 8×8 pixels).
Each file is one digit made into a 32×32 RGB picture by augmentation: scaled to a random size,
shifted, slightly rotated, drawn in a random ink colour on a random background tint, with noise,
then JPEG-encoded. So every file is a distinct image, and the training loop pays for decoding as
ImageNet's does. The val images come from digits the train images never use (the last tenth of a
fixed shuffle), so val accuracy says whether the model learnt the digits.

    python examples/fluid_resnet/make_images.py --out DIR [--count 6000] [--seed 0]
        [--bucket B --prefix imagenet --endpoint URL --access-key K --secret-key S]

Endpoint and keys default to AWS_ENDPOINT_URL / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
The same seed and count write the same bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

CLASSES = tuple(f"n{digit:02d}" for digit in range(10))
SIZE = 32
VAL_FRACTION = 0.1
JPEG_QUALITY = 90
UPLOAD_THREADS = 16


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits: (1797, 8, 8) floats in 0..1 and their labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images / 16.0, digits.target.astype(np.int64)


def _augment(digit: np.ndarray, rng: np.random.Generator) -> bytes:
    """One 8×8 digit as a 32×32 RGB JPEG: random scale, rotation, shift, colours and noise."""
    from PIL import Image

    side = int(rng.integers(16, 29))  # the digit's drawn size in pixels
    glyph = Image.fromarray(np.uint8(np.rint(digit * 255)), mode="L").resize((side, side), Image.BILINEAR)
    glyph = glyph.rotate(float(rng.uniform(-15, 15)), resample=Image.BILINEAR)
    mask = np.zeros((SIZE, SIZE), dtype=np.float32)
    top, left = (int(v) for v in rng.integers(0, SIZE - side + 1, size=2))
    mask[top:top + side, left:left + side] = np.asarray(glyph, dtype=np.float32) / 255.0

    background = rng.uniform(0, 0.5, size=3)  # dark-ish tint
    ink = rng.uniform(0.5, 1.0, size=3)  # light-ish colour, so the digit stays visible
    if rng.random() < 0.5:  # half the pictures are dark ink on a light background
        background, ink = 1.0 - background, 1.0 - ink
    pixels = background + mask[..., None] * (ink - background)
    pixels += rng.normal(0, 0.04, size=pixels.shape)
    rgb = np.uint8(np.clip(np.rint(pixels * 255), 0, 255))
    out = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def write_image_folder(out: Path, count: int = 6000, seed: int = 0) -> list[Path]:
    """Write ``count`` JPEGs under ``out/train/<class>/`` and ``out/val/<class>/`` (about 90/10); the paths written.

    Train images are made from the first nine tenths of the digits (after a shuffle by ``seed``),
    val images from the rest; each source digit is used again, augmented differently, until
    ``count`` is reached. Deterministic for a seed.
    """
    if count < 2:
        raise ValueError(f"count must be at least 2 (one train and one val image), got {count}")
    images, labels = _digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    cut = int(len(order) * (1 - VAL_FRACTION))
    sources = {"train": order[:cut], "val": order[cut:]}
    n_val = max(1, round(count * VAL_FRACTION))
    plan = [("train", i) for i in range(count - n_val)] + [("val", i) for i in range(n_val)]
    written = []
    for split, i in plan:
        index = sources[split][i % len(sources[split])]
        folder = out / split / CLASSES[labels[index]]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{split}_{i:06d}.JPEG"
        path.write_bytes(_augment(images[index], rng))
        written.append(path)
    kept = set(written)
    for split in sources:  # an earlier, larger run's images would otherwise stay (and be uploaded)
        for stale in (out / split).glob("n*/*.JPEG"):
            if stale not in kept:
                stale.unlink()
    return written


def _s3_store(bucket: str, endpoint: str | None, access_key: str | None, secret_key: str | None) -> object:
    """An obstore S3 store (obstore is a millpond dependency); a custom endpoint is addressed path-style."""
    from obstore.store import S3Store

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config: dict[str, object] = {"region": region, "virtual_hosted_style_request": not endpoint}
    if endpoint:
        config["endpoint"] = endpoint
    if access_key:
        config.update(access_key_id=access_key, secret_access_key=secret_key or "")
    return S3Store(bucket, client_options={"allow_http": True}, **config)


def upload(folder: Path, bucket: str, prefix: str, endpoint: str, access_key: str, secret_key: str) -> int:
    """Put every file under ``folder`` at ``s3://bucket/prefix/<relative path>``, 16 at a time; how many."""
    import obstore

    store = _s3_store(bucket, endpoint, access_key, secret_key)
    base = prefix.strip("/")
    files = sorted(path for path in folder.rglob("*") if path.is_file())

    def put(path: Path) -> None:
        relative = path.relative_to(folder).as_posix()
        obstore.put(store, f"{base}/{relative}" if base else relative, path.read_bytes())

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        for _ in pool.map(put, files):  # re-raises the first failure
            pass
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (train/ and val/ inside)")
    parser.add_argument("--count", type=int, default=6000, help="how many images in all (default: 6000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucket", help="also upload the folder to this bucket (it must exist)")
    parser.add_argument("--prefix", default="imagenet", help="key prefix in the bucket (default: imagenet)")
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                        help="S3 endpoint URL (default: $AWS_ENDPOINT_URL; none: AWS)")
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    parser.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    args = parser.parse_args(argv)
    if args.count < 2:
        parser.error(f"--count must be at least 2, got {args.count}")
    paths = write_image_folder(args.out, args.count, args.seed)
    size = sum(path.stat().st_size for path in paths)
    print(f"wrote {len(paths)} images ({size / 1024:,.0f} KiB) to {args.out}")
    if args.bucket:
        try:
            uploaded = upload(args.out, args.bucket, args.prefix, args.endpoint, args.access_key, args.secret_key)
        except Exception as exc:  # obstore's errors (no such bucket, refused keys, no server) and OSError
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"error: upload to s3://{args.bucket}/ failed: {first}", file=sys.stderr)
            return 1
        print(f"uploaded {uploaded} files to s3://{args.bucket}/{args.prefix.strip('/')}/ "
              f"at {args.endpoint or 'AWS S3'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
