"""Katib's TensorFlowEvent collector: scalars in the TensorBoard event files under a directory.

As Katib's ``tfevent_loader.py``: every file under the directory (recursively) is read with
TensorBoard's own ``EventAccumulator`` (a file that is not an event file is skipped); a tag is
taken for the metric ``m`` when it starts with ``m``'s last path segment and, when ``m`` has a
directory part (``train/accuracy``), the event file's directory ends with it. Both TF2 summaries
(``tensor`` values, as ``tf.summary.scalar`` and PyTorch's ``SummaryWriter(new_style=True)``
write them) and the old ``simple_value`` scalars are read; the value is written as Katib writes it
(``str`` of the tensor's numpy value, ``str`` of the float). Times are the events' wall times in
UTC with their fraction (Katib: local time, whole seconds).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.katib.metrics import timestamps
from millpond.katib.metrics.records import ZERO_TIME, MetricLog
from millpond.katib.metrics.text import unavailable_unless_reported, wanted_names


def _considered(tag: str, metric: str, event_file: str) -> bool:
    """Katib's ``_should_consider``."""
    parent = os.path.dirname(metric) if len(metric.split("/")) >= 2 else os.path.dirname(event_file)
    return tag.startswith(metric.split("/")[-1]) and os.path.dirname(event_file).endswith(parent)


def _value(tensor_proto: Any) -> str | None:
    from tensorboard.util import tensor_util  # noqa: PLC0415 - tensorboard (the katib extra) only for TF events

    try:
        return str(tensor_util.make_ndarray(tensor_proto))
    except (ValueError, TypeError):  # a string or malformed tensor: not a number Katib could read
        return None


def _file_logs(event_file: str, names: Sequence[str]) -> list[MetricLog]:
    from tensorboard.backend.event_processing import event_accumulator  # noqa: PLC0415 - the katib extra

    accumulator = event_accumulator.EventAccumulator(
        event_file, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    logs: list[MetricLog] = []
    for tag in tags[event_accumulator.TENSORS]:
        for name in names:
            if _considered(tag, name, event_file):
                for event in accumulator.Tensors(tag):
                    value = _value(event.tensor_proto)
                    if value is not None:
                        logs.append(MetricLog(timestamps.from_unix(event.wall_time) or ZERO_TIME, name, value))
    for tag in tags[event_accumulator.SCALARS]:
        for name in names:
            if _considered(tag, name, event_file):
                logs.extend(MetricLog(timestamps.from_unix(event.wall_time) or ZERO_TIME, name, str(event.value))
                            for event in accumulator.Scalars(tag))
    return logs


def collect_tfevents(directory: Path, metric_names: Sequence[str]) -> list[MetricLog]:
    """Every wanted scalar in the event files under ``directory``; "unavailable" when the objective is in none."""
    wanted = wanted_names(metric_names)
    if not Path(directory).is_dir():
        raise UserError(f"spec.metricsCollectorSpec.source.fileSystemPath.path: {directory} is not a directory")
    logs: list[MetricLog] = []
    for root, _dirs, files in sorted(os.walk(directory)):
        for file_name in sorted(files):
            try:
                logs.extend(_file_logs(os.path.join(root, file_name), wanted))
            except Exception:  # noqa: BLE001 - as Katib: a file that is not an event file is skipped
                continue
    return unavailable_unless_reported(logs, wanted[0])
