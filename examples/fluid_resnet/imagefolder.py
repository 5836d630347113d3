"""torchvision's ``ImageFolder`` for this example, in plain PyTorch and Pillow (no torchvision here).

A root holds one folder per class (``n00/``, ``n01/`` …, as ImageNet's ``train/`` holds one per
synset); classes are the sorted folder names and labels their indices, as torchvision assigns them.
Each item is decoded from its file on every read — the work a training loop over ImageNet does,
and the reads that Fluid's cache serves.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

EXTENSIONS = (".jpeg", ".jpg", ".png")
# The per-channel mean and standard deviation torchvision's ImageNet examples normalise with.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class ImageFolder(Dataset):
    """``(image, label)`` pairs from ``root/<class>/<file>``: a float CHW tensor, normalised, and the class index."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"{self.root}: no such folder")
        self.classes = sorted(entry.name for entry in self.root.iterdir() if entry.is_dir())
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}
        self.samples = [
            (path, self.class_to_idx[name])
            for name in self.classes
            for path in sorted((self.root / name).iterdir())
            if path.suffix.lower() in EXTENSIONS and path.is_file()
        ]
        if not self.samples:
            raise FileNotFoundError(f"{self.root}: no images ({', '.join(EXTENSIONS)}) in class folders")
        self.targets = [label for _, label in self.samples]
        self._mean = torch.tensor(MEAN).view(3, 1, 1)
        self._std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        path, label = self.samples[index]
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
        tensor = torch.from_numpy(pixels).permute(2, 0, 1)
        return (tensor - self._mean) / self._std, label
