"""Train a small CNN on MNIST-format IDX files and save its checkpoint (CPU, seconds).

The seed's training step runs PyTorch's MNIST example (``python main.py --epochs 2 --data
/data --save-model --save-model-path /data/ckpt``) as an Arena job. This is the same idea
with no torchvision: the decompressed IDX files (under ``DATA/MNIST/raw``, where torchvision's
``MNIST(root=DATA)`` looks, or in ``DATA`` itself) are parsed with numpy, a two-layer CNN is
trained for ``--epochs`` on the CPU, the t10k accuracy is printed after each epoch, and
the model's ``state_dict`` is written to ``SAVE_MODEL_PATH/mnist_cnn.pt``.

    python examples/fluid_mnist/train.py --data /data --save-model-path /data/ckpt
"""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

IDX_TYPES = {0x08: np.uint8}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (``NAME`` or, when only that exists, ``NAME.gz``) as a numpy array."""
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        data = gzip.decompress(path.with_name(path.name + ".gz").read_bytes())
    else:
        data = path.read_bytes()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code not in IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (magic {data[:4].hex()})")
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    array = np.frombuffer(data, dtype=IDX_TYPES[dtype_code], offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {array.size} values for shape {shape}")
    return array.reshape(shape)


def raw_folder(data: Path) -> Path:
    """Where the IDX files are: ``DATA/MNIST/raw`` when there is one (torchvision's ``MNIST(root=DATA)``
    layout, which the seed's ``--data /data`` relies on), else ``DATA`` itself."""
    nested = data / "MNIST" / "raw"
    return nested if nested.is_dir() else data


def load_split(folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images as float tensors (N, 1, 28, 28) normalised as PyTorch's MNIST example does, labels as int64."""
    folder = raw_folder(folder)
    images = read_idx(folder / f"{split}-images-idx3-ubyte")
    labels = read_idx(folder / f"{split}-labels-idx1-ubyte")
    if len(images) != len(labels):
        raise ValueError(f"{folder}: {len(images)} {split} images but {len(labels)} labels")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.1307) / 0.3081
    return x, torch.from_numpy(labels.astype(np.int64))


class Net(nn.Module):
    """conv 3×3 (16) → pool → conv 3×3 (32) → pool → 64 → 10."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.fc1 = nn.Linear(32 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 28 → 26 → 13
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 13 → 11 → 5
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a small CNN on MNIST-format IDX files (CPU).")
    parser.add_argument(
        "--data", type=Path, required=True,
        help="torchvision's MNIST root (files in DATA/MNIST/raw) or the folder of the decompressed *-idx?-ubyte files",
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--save-model", action="store_true", help="accepted as PyTorch's example takes it; the model is always saved"
    )
    parser.add_argument("--save-model-path", type=Path, required=True, help="folder for mnist_cnn.pt (created)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    torch.manual_seed(args.seed)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    x_train, y_train = load_split(args.data, "train")
    x_test, y_test = load_split(args.data, "t10k")
    print(
        f"data: {len(x_train)} train and {len(x_test)} test images of {tuple(x_train.shape[2:])} "
        f"from {raw_folder(args.data)}",
        flush=True,
    )

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(x_train))
        total = 0.0
        for start in range(0, len(order), args.batch_size):
            batch = order[start:start + args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        print(
            f"epoch {epoch}: train loss {total / len(order):.4f}, test accuracy {accuracy(model, x_test, y_test):.2%}",
            flush=True,
        )

    args.save_model_path.mkdir(parents=True, exist_ok=True)
    target = args.save_model_path / "mnist_cnn.pt"
    torch.save(model.state_dict(), target)
    print(f"saved {target} ({target.stat().st_size:,} bytes) in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
