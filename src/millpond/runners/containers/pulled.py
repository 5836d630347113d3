"""The images millpond itself pulled, kept in the home (``images.json``), so ``millpond images prune``
removes only those and never an image the user pulled or built."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from filelock import FileLock

LEDGER = "images.json"


def _path(home: Path) -> Path:
    return home / LEDGER


def read(home: Path) -> dict[str, dict[str, object]]:
    """{image reference: {"runtime": name, "pulled_at": epoch seconds}}; empty when none or unreadable."""
    try:
        data = json.loads(_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write(home: Path, data: dict[str, dict[str, object]]) -> None:
    temporary = _path(home).with_name(f".{LEDGER}.{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, _path(home))


def add(home: Path, image: str, runtime: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(_path(home)) + ".lock", timeout=60):
        data = read(home)
        data[image] = {"runtime": runtime, "pulled_at": round(time.time(), 3)}
        _write(home, data)


def forget(home: Path, images: list[str]) -> None:
    with FileLock(str(_path(home)) + ".lock", timeout=60):
        data = read(home)
        for image in images:
            data.pop(image, None)
        _write(home, data)
