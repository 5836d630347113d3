"""What each GPU is doing now: utilisation and memory per device index, and each process's GPU memory.

Arena reads these from Prometheus (the DCGM exporter); on one machine NVML is the source, through
nvidia-ml-py (``pynvml``), in process and without a subprocess: it also names the processes on
each device and their memory, which is how a job's or a task's GPU memory is counted. Where the
NVML library cannot be loaded or initialised (no driver), ``nvidia-smi`` is asked instead, once
per view, with a short timeout, because ``arena get``/``top`` must not hang on a wedged driver: a
missing, failing or hanging ``nvidia-smi``, or output that does not parse, gives no metrics
(shown as ``N/A``), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.scheduling.machine import nvidia_smi
from millpond.settings import load_settings

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
    # (pid, GPU memory in bytes) of each compute process on the device; NVML only (nvidia-smi: empty)
    processes: tuple[tuple[int, int], ...] = ()
    per_process: bool = False  # True where ``processes`` was read (NVML), so that an empty one means none

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
    """Every device's metrics now: from NVML, else nvidia-smi; empty where neither answers.

    With the test-only fake inventory (MILLPOND_FAKE_GPUS) NVML is not asked: the devices it would
    name are not the fake ones (tests put a scripted ``nvidia-smi`` on PATH instead)."""
    metrics = read_nvml() if load_settings().fake_gpus is None else None
    if metrics is not None:
        return metrics
    return parse(nvidia_smi(*QUERY, timeout=timeout))


def read_nvml() -> dict[int, GpuMetric] | None:
    """Every device's metrics from NVML, or None where NVML is not there (no driver, no library).

    A device whose query fails (a GPU fallen off the bus) is left out; a process list some
    drivers refuse (vGPU, MIG without permission) is left empty.
    """
    try:
        import pynvml  # noqa: PLC0415 - NVML only where GPUs are read
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        metrics: dict[int, GpuMetric] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                util = pynvml.nvmlDeviceGetUtilizationRates(handle)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except pynvml.NVMLError:
                continue
            try:
                running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except pynvml.NVMLError:
                metrics[index] = GpuMetric(index, float(util.gpu), float(memory.used), float(memory.total))
                continue
            processes = tuple((int(p.pid), int(p.usedGpuMemory or 0)) for p in running)
            # usedGpuMemory is None where the driver cannot tell (Windows WDDM): counted as 0
            metrics[index] = GpuMetric(index, float(util.gpu), float(memory.used), float(memory.total), processes, True)
        return metrics
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def process_memory(metrics: dict[int, GpuMetric], pids: frozenset[int]) -> int | None:
    """GPU memory the processes ``pids`` hold, over every device (NVML's per-process numbers); None
    (unknown) where no device's processes could be read (nvidia-smi's figures, or none at all)."""
    if not any(metric.per_process for metric in metrics.values()):
        return None
    return sum(used for metric in metrics.values() for pid, used in metric.processes if pid in pids)
