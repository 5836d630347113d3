"""What each GPU is doing now, read from ``nvidia-smi``: utilisation and memory per device index.

Arena reads these from Prometheus (the DCGM exporter); on one machine ``nvidia-smi`` is the
source. It is asked once per view, with a short timeout, because ``arena get``/``top`` must
not hang on a wedged driver: a missing, failing or hanging ``nvidia-smi``, or output that does
not parse, gives no metrics (shown as ``N/A``), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.scheduling.machine import nvidia_smi

QUERY = ("--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits")
TIMEOUT_S = 2.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuMetric:
    """One device now: utilisation in percent, memory in bytes (Arena keeps bytes, prints MiB)."""

    index: int
    duty_cycle: float
    memory_used: float
    memory_total: float

    def as_arena(self) -> dict[str, float]:
        """Arena's ``GpuMetric`` JSON: gpuDutyCycle, usedGPUMemory, totalGPUMemory."""
        return {"gpuDutyCycle": self.duty_cycle, "usedGPUMemory": self.memory_used,
                "totalGPUMemory": self.memory_total}


def parse(text: str) -> dict[int, GpuMetric]:
    """Rows of ``index, util %, used MiB, total MiB``; a row that does not parse is left out
    (nvidia-smi prints ``[N/A]`` or ``[Not Supported]`` for a field some devices lack)."""
    metrics: dict[int, GpuMetric] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        try:
            util, used, total = (float(cell) for cell in cells[1:])
        except ValueError:
            continue
        index = int(cells[0])
        metrics[index] = GpuMetric(index, util, used * MIB, total * MIB)
    return metrics


def read(timeout: float = TIMEOUT_S) -> dict[int, GpuMetric]:
    """Every device's metrics now; empty where nvidia-smi is absent, fails or hangs."""
    return parse(nvidia_smi(*QUERY, timeout=timeout))
