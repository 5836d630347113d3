"""The cooperative half of GPU sharing: a job's PyTorch caps its own memory at its share.

Without an MPS daemon nothing outside a process can cap its GPU memory, so the job does it:
the supervisor puts the share in ``MILLPOND_GPU_MEMORY_FRACTION`` (``scheduling.share_env``),
and the training script calls ``apply()`` once before it allocates on the GPU::

    from millpond.training.gpu_share import apply
    apply()  # torch.cuda.set_per_process_memory_fraction(<the share>) on each visible GPU

Why a call, not something millpond injects: ``set_per_process_memory_fraction`` works only in
the process that allocates, so an injected hook (a ``sitecustomize``, a ``.pth``) would run in
every Python process of the job — data loaders, shell helpers, non-torch tools — import torch
there (seconds) and create a CUDA context in processes that fork afterwards. An explicit call
is visible in the script, does nothing where there is no share, and is one line to copy for a
script that does not import millpond (read the variable, call torch). PyTorch's
``PYTORCH_CUDA_ALLOC_CONF`` has no cap on total memory, so it cannot do this either.

The cap is PyTorch's caching allocator's: memory allocated outside it (cuDNN workspaces, NCCL,
another library) is not counted. That is why it is called cooperative.
"""

from __future__ import annotations

import os

FRACTION_VAR = "MILLPOND_GPU_MEMORY_FRACTION"  # the same name scheduling.share_env sets


def fraction() -> float | None:
    """This process's share of its GPU's memory (0 < f <= 1), or None when it holds no share."""
    text = os.environ.get(FRACTION_VAR, "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value <= 1 else None


def apply() -> float | None:
    """Cap PyTorch's memory on every visible GPU at the share; the fraction applied, or None
    (no share, or no CUDA: nothing to cap)."""
    share = fraction()
    if share is None:
        return None
    import torch  # noqa: PLC0415 - torch is optional and heavy (GPU-share workers only)

    if not torch.cuda.is_available():
        return None
    for device in range(torch.cuda.device_count()):
        torch.cuda.set_per_process_memory_fraction(share, device)
    return share
