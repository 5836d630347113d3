"""Train a small ResNet on an ImageNet-style folder with DistributedDataParallel over gloo (CPU).

Seed 001 trains ResNet-50 with Horovod on 4 machines × 8 GPUs over ImageNet in Fluid's cache. This
is the same loop at the scale of one small CPU machine: a ResNet of BasicBlocks (4 stages, one
block each, 16 → 128 channels, about 0.3 M parameters) for 32×32 pictures, one process per arena
instance joined by ``torch.distributed`` with gloo, each rank reading its shard of
``DATA_DIR/train`` (a ``DistributedSampler``) through a DataLoader with 2 worker processes that
open and decode every JPEG — the reads the dataset's cache serves. After each epoch the ranks
sum their loss and their correct answers on ``DATA_DIR/val``; rank 0 prints them.

Under ``arena submit pytorch`` the rank and the rendezvous come from the variables the PyTorchJob
controller sets (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``); without them it
runs as a single process.

    python train.py --data /data/imagenet [--epochs 2] [--checkpoint ckpt/resnet.pt]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from imagefolder import ImageFolder  # noqa: E402 - this folder is not a package

STAGES = (16, 32, 64, 128)  # channels per stage; each stage after the first halves the resolution


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3×3 convolutions with batch norm, added to the (projected) input."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """A 3×3 stride-2 stem, one BasicBlock per stage in ``STAGES``, global average pooling, a linear classifier."""

    def __init__(self, classes: int, stages: tuple[int, ...] = STAGES) -> None:
        super().__init__()
        # A stride-2 stem, as ImageNet's ResNets halve (there: quarter) the picture before the first stage.
        self.stem = nn.Sequential(nn.Conv2d(3, stages[0], 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(stages[0]), nn.ReLU())
        blocks = []
        inputs = stages[0]
        for index, outputs in enumerate(stages):
            blocks.append(BasicBlock(inputs, outputs, stride=1 if index == 0 else 2))
            inputs = outputs
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(inputs, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _one_thread(_worker: int) -> None:
    """DataLoader workers decode; they need no intra-op threads of their own on a small machine."""
    torch.set_num_threads(1)


def _loader(folder: ImageFolder, batch: int, workers: int, shuffle: bool, seed: int, world: int,
            rank: int) -> tuple[DataLoader, DistributedSampler]:
    sampler = DistributedSampler(folder, num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                                 drop_last=False)
    loader = DataLoader(folder, batch_size=batch, sampler=sampler, num_workers=workers,
                        persistent_workers=workers > 0, worker_init_fn=_one_thread if workers else None)
    return loader, sampler


def _sum(values: list[float]) -> list[float]:
    """``values`` summed over every rank (gloo all-reduce), or as they are in a single process."""
    tensor = torch.tensor(values, dtype=torch.float64)
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor.tolist()


def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    """(correct answers, images) over this rank's shard of the loader."""
    model.eval()
    correct = seen = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
            seen += len(labels)
    return float(correct), float(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a small ResNet on an image folder (DDP over gloo, CPU).")
    parser.add_argument("--data", type=Path, default=os.environ.get("DATA_DIR"),
                        help="the folder with train/ and val/ (default: $DATA_DIR)")
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "2")))
    parser.add_argument("--batch-size", type=int, default=32, help="per rank (default: 32; 64 a step over 2 ranks)")
    parser.add_argument("--lr", type=float, default=0.1, help="the one-cycle schedule's peak")
    parser.add_argument("--loader-workers", type=int, default=2, help="DataLoader worker processes per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, help="rank 0 saves the model here after training")
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("give --data or set DATA_DIR")
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")

    try:  # before joining the others: every rank sees the same folder, so all of them stop the same way
        train_set, val_set = ImageFolder(args.data / "train"), ImageFolder(args.data / "val")
    except FileNotFoundError as exc:
        print(f"error: {exc} (DATA_DIR must hold train/ and val/ with a folder per class)", file=sys.stderr)
        return 2

    started = time.monotonic()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    train_loader, train_sampler = _loader(train_set, args.batch_size, args.loader_workers, True, args.seed, world, rank)
    # The val shard is a tenth of the train one: read in the rank's own process, no workers to start.
    val_loader, _ = _loader(val_set, args.batch_size, 0, False, args.seed, world, rank)
    print(f"rank {rank}/{world}: {len(train_sampler)} of {len(train_set)} train images, "
          f"{len(val_set)} val images, {len(train_set.classes)} classes from {args.data}", flush=True)

    model: nn.Module = ResNet(len(train_set.classes))
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        print(f"ResNet {'-'.join(map(str, STAGES))}: {params:,} parameters, {world} rank(s), gloo", flush=True)
    if dist.is_initialized():
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    steps = args.epochs * len(train_loader)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=steps)

    for epoch in range(1, args.epochs + 1):
        train_sampler.set_epoch(epoch)
        model.train()
        epoch_started = time.monotonic()
        loss_sum = correct = seen = 0.0
        for images, labels in train_loader:
            optimizer.zero_grad()
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            optimizer.step()
            schedule.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
        seconds = time.monotonic() - epoch_started
        val_correct, val_seen = evaluate(model, val_loader)
        loss_sum, correct, seen, val_correct, val_seen = _sum([loss_sum, correct, seen, val_correct, val_seen])
        print(f"rank {rank}: epoch {epoch} done", flush=True)
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}: train loss {loss_sum / seen:.4f}, "
                  f"train accuracy {correct / seen:.2%}, val accuracy {val_correct / val_seen:.2%} "
                  f"({seen / seconds:.0f} images/s over {world} rank(s), {seconds:.1f} s)", flush=True)

    if args.checkpoint and rank == 0:
        args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        state = (model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model).state_dict()
        torch.save({"model": state, "classes": train_set.classes, "epochs": args.epochs,
                    "val_accuracy": val_correct / val_seen}, args.checkpoint)
        print(f"saved {args.checkpoint} ({args.checkpoint.stat().st_size:,} bytes)", flush=True)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    print(f"rank {rank}: done in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
