"""One place for configuration: the MILLPOND_* environment variables, the home folder, and the
settings ``millpond config set`` keeps in the home (``settings.json``; the environment wins)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.quantities import parse_bytes

SETTINGS_FILE = "settings.json"
MULTI_USER_ENV = "MILLPOND_MULTI_USER"
# Each setting ``millpond config set`` knows: its environment variable and the values it takes.
CONFIGURABLE: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpu-fallback": ("MILLPOND_GPU_FALLBACK", ("cpu", "none")),
    # where tasks run: in their images (a container runtime) or on this machine (runners.containers.policy)
    "runtime": ("MILLPOND_RUNTIME", ("auto", "host", "container", "podman", "docker")),
}


@dataclass(frozen=True)
class Settings:
    """Where millpond keeps its state, and how much of the machine it may use."""

    home: Path
    max_parallel: int
    fork_server: bool = True  # lightweight tasks fork from a warm process (MILLPOND_FORK_SERVER=0: never)
    # "cpu": a GPU request this machine can never meet runs on CPU, with a warning, instead of being refused
    gpu_fallback: str | None = None
    # Where a process with an image runs (MILLPOND_RUNTIME, ``millpond config set runtime``, ``--runtime``):
    # auto | host | container | podman | docker (runners.containers.policy says how auto decides)
    runtime: str = "auto"
    # MILLPOND_FAKE_GPUS=N or NxSIZE, for tests only: the scheduler hands out N GPUs (0..N-1), each of SIZE
    # memory for --gpumemory shares, with no device behind them
    fake_gpus: int | None = None
    fake_gpu_memory: int | None = None  # bytes per fake GPU (NxSIZE); None: unknown, so no shares fit
    # Cluster mode: the Ray cluster's head (HOST:PORT) tasks run on (MILLPOND_RAY_ADDRESS, or --ray)
    ray_address: str | None = None
    # Local folders every Ray node sees at the same path (MILLPOND_SHARED_ROOTS, separated by ':'):
    # a pipeline root under one of them is allowed in cluster mode, as s3:// is
    shared_roots: tuple[str, ...] = ()
    # What a downloaded model archive may unpack to (serving.archives): a share of the free disk, or at most
    # a byte quantity (MILLPOND_UNPACK_BUDGET: "90%" or "20Gi"), and the compression ratio it may have
    # (MILLPOND_UNPACK_MAX_RATIO)
    unpack_free_share: float = 0.9
    unpack_max_bytes: int | None = None
    unpack_max_ratio: int = 100
    # A team's server (``millpond server --multi-user`` exports MILLPOND_MULTI_USER=1 to all it starts): every
    # process of a namespace runs confined to its own folders (runners.isolation), or is refused
    multi_user: bool = False
    # Whether runs record their lineage (executions, artifacts, events: store.lineage). On by default;
    # MILLPOND_LINEAGE=0 turns it off, for benchmarks/task_overhead.py to measure what it costs
    lineage: bool = True

    def is_shared(self, folder: Path) -> bool:
        """Whether ``folder`` is under one of ``shared_roots``: the same folder on every Ray node."""
        return under_shared_roots(folder, self.shared_roots)

    @property
    def database_url(self) -> str:
        url = os.environ.get("MILLPOND_DATABASE_URL")
        return url or f"sqlite:///{self.home / 'millpond.db'}"

    @property
    def default_pipeline_root(self) -> Path:
        return self.home / "artifacts"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def staging_dir(self) -> Path:
        return self.home / "staging"

    @property
    def venvs_dir(self) -> Path:
        return self.home / "venvs"

    @property
    def volumes_dir(self) -> Path:
        """Named local volumes: what a PVC is on one machine."""
        return self.home / "volumes"


def under_shared_roots(folder: Path, roots: tuple[str, ...]) -> bool:
    """Whether ``folder`` is one of ``roots`` (MILLPOND_SHARED_ROOTS) or inside one."""
    resolved = folder.resolve()
    for root in roots:
        base = Path(root).resolve()
        if resolved == base or base in resolved.parents:
            return True
    return False


def stored_settings(home: Path) -> dict[str, str]:
    """What ``millpond config set`` stored in ``home`` (nothing when the file is missing or unreadable)."""
    try:
        data = json.loads((home / SETTINGS_FILE).read_text(encoding="utf-8")[:65536])
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if k in CONFIGURABLE and isinstance(v, str)} if isinstance(data, dict) else {}


def configured(home: Path, key: str) -> str | None:
    """The value of setting ``key``: its environment variable, else the home's settings file; checked."""
    variable, allowed = CONFIGURABLE[key]
    value = os.environ.get(variable) or stored_settings(home).get(key)
    if value is None:
        return None
    if value not in allowed:
        source = variable if os.environ.get(variable) else f"{key} in {home / SETTINGS_FILE}"
        raise UserError(f"{source} is {value!r}; it takes one of: {', '.join(allowed)}")
    return None if value == "none" else value


def _fake_gpus() -> tuple[int | None, int | None]:
    """MILLPOND_FAKE_GPUS (test-only; MILLPOND_GPUS is its older name, still read), checked: ``N`` GPUs,
    or ``NxSIZE`` (``2x16Gi``: two GPUs of 16 GiB each, a Kubernetes quantity) for GPU sharing tests."""
    text = os.environ.get("MILLPOND_FAKE_GPUS", os.environ.get("MILLPOND_GPUS"))
    if text is None:
        return None, None
    count, sep, size = text.strip().partition("x")
    if not (count.isascii() and count.isdigit()):  # int() refuses '²', which isdigit() takes
        form = "N x SIZE, like 2x16Gi" if sep else "a whole number of GPUs"
        raise UserError(f"MILLPOND_FAKE_GPUS={text!r} is not {form} (a test-only setting)")
    if not sep:
        return int(count), None
    memory = parse_bytes(size, f"MILLPOND_FAKE_GPUS={text!r}: the memory of each GPU")
    if memory <= 0:
        raise UserError(f"MILLPOND_FAKE_GPUS={text!r}: the memory of each GPU must be more than 0")
    return int(count), memory


def _unpack_limits() -> tuple[float, int | None, int]:
    """MILLPOND_UNPACK_BUDGET (``N%`` of the free disk, or a byte quantity) and MILLPOND_UNPACK_MAX_RATIO, checked."""
    text = os.environ.get("MILLPOND_UNPACK_BUDGET", "").strip() or "90%"
    share, most = 1.0, None
    if text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            share = -1.0
        if not 0 < share <= 1:
            raise UserError(f"MILLPOND_UNPACK_BUDGET={text!r}: a share of the free disk is more than 0% and at most "
                            "100%")
    else:
        most = parse_bytes(text, f"MILLPOND_UNPACK_BUDGET={text!r} (a byte quantity such as 20Gi, or a share such "
                                 "as 90%)")
        if most < 0:
            raise UserError(f"MILLPOND_UNPACK_BUDGET={text!r}: cannot be less than 0")
    ratio = os.environ.get("MILLPOND_UNPACK_MAX_RATIO", "").strip() or "100"
    if not (ratio.isascii() and ratio.isdigit()) or not 1 <= int(ratio) <= 10**6:
        raise UserError(f"MILLPOND_UNPACK_MAX_RATIO={ratio!r}: a whole number from 1 to 1000000")
    return share, most, int(ratio)


def multi_user_setting() -> bool:
    """MILLPOND_MULTI_USER, checked: 1/true/on/yes or 0/false/off/no (unset: single-user)."""
    text = os.environ.get(MULTI_USER_ENV, "").strip().lower()
    if text in ("", "0", "false", "off", "no"):
        return False
    if text in ("1", "true", "on", "yes"):
        return True
    raise UserError(f"{MULTI_USER_ENV}={os.environ[MULTI_USER_ENV]!r}: expected 1 or 0 (true/false, on/off, yes/no)")


def load_settings() -> Settings:
    """Read settings from the environment each call, so tests can point MILLPOND_HOME anywhere."""
    home = Path(os.environ.get("MILLPOND_HOME") or Path.home() / ".millpond").expanduser().resolve()
    parallel = os.environ.get("MILLPOND_MAX_PARALLEL")
    fake_gpus, fake_gpu_memory = _fake_gpus()
    unpack_share, unpack_bytes, unpack_ratio = _unpack_limits()
    multi_user = multi_user_setting()
    return Settings(
        home=home,
        max_parallel=int(parallel) if parallel else (os.cpu_count() or 1),
        # a forked task shares the fork server's PID namespace and sees the home: never in multi-user mode
        fork_server=not multi_user and os.environ.get("MILLPOND_FORK_SERVER", "1").lower() not in ("0", "false", "no"),
        gpu_fallback=configured(home, "gpu-fallback"),
        runtime=configured(home, "runtime") or "auto",
        fake_gpus=fake_gpus,
        fake_gpu_memory=fake_gpu_memory,
        ray_address=os.environ.get("MILLPOND_RAY_ADDRESS") or None,
        shared_roots=tuple(p for p in os.environ.get("MILLPOND_SHARED_ROOTS", "").split(os.pathsep) if p),
        unpack_free_share=unpack_share, unpack_max_bytes=unpack_bytes, unpack_max_ratio=unpack_ratio,
        multi_user=multi_user,
        lineage=os.environ.get("MILLPOND_LINEAGE", "1").strip().lower() not in ("0", "false", "off", "no"),
    )
