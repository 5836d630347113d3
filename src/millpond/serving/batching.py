"""Adaptive batching: requests that reach a model together share one ``predict``.

Why: a small model's ``predict`` costs about the same for 1 and 32 rows (the digits classifier:
~160 µs of scikit-learn's input checks either way), so under concurrent clients most of a
model server's time went to calling ``predict`` once per row. The model server runs ``predict`` on
its event loop; while it runs, requests pile up in the sockets, and the next turn of the loop
parses them all. The first one to reach the batcher schedules a flush for the turn after (or
``max_wait`` seconds later); everything that arrives until then, up to ``max_batch`` requests, is
joined along the first axis, predicted once and split back by row counts. A lone request (one
client, sequential requests) is flushed alone at the next turn: it waits for no one.

Only requests with the same number of inputs, dtypes and trailing shapes are joined; a batch whose
``predict`` fails, or answers arrays whose first axis is not the batch's rows, is predicted again one
request at a time, so a request the model refuses fails only itself (and each gets its own error,
as it would alone). What is joined has already passed the protocol's checks (shape, datatype).
KServe batches the same way outside its model server (the agent's ``batcher``: ``maxBatchSize`` 32,
``maxLatency``); here it is inside. Row-wise models (scikit-learn, PyTorch) answer each row as they
would alone; floating-point outputs may differ in the last bits, as the matrix products of a batch
are summed in another order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from millpond.serving.models import Model

MAX_BATCH = 32  # KServe's batcher's default maxBatchSize


@dataclass
class _Waiting:
    """One request's inputs and the future its answer (or error) is set on."""

    inputs: list[np.ndarray]
    answer: asyncio.Future[list[np.ndarray]]

    @property
    def key(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return tuple((array.dtype.str, array.shape[1:]) for array in self.inputs)

    @property
    def rows(self) -> int:
        return int(self.inputs[0].shape[0])


@dataclass
class Batcher:
    """One model's ``predict`` for concurrent requests: ``await batcher.predict(inputs)`` from the event loop."""

    model: Model
    max_batch: int = MAX_BATCH
    max_wait: float = 0.0  # seconds the first request of a batch waits for others; 0: the next turn of the loop
    _waiting: list[_Waiting] = field(default_factory=list)
    _flush: asyncio.Handle | None = None

    async def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self.max_batch <= 1 or not inputs or any(array.ndim == 0 for array in inputs):
            return self.model.predict(inputs)
        loop = asyncio.get_running_loop()
        waiting = _Waiting(inputs, loop.create_future())
        self._waiting.append(waiting)
        if len(self._waiting) >= self.max_batch:
            self._run()
        elif self._flush is None:
            self._flush = (loop.call_later(self.max_wait, self._run) if self.max_wait > 0
                           else loop.call_soon(self._run))
        return await waiting.answer

    def _run(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        batch, self._waiting = self._waiting, []
        groups: dict[tuple[tuple[str, tuple[int, ...]], ...], list[_Waiting]] = {}
        for waiting in batch:
            groups.setdefault(waiting.key, []).append(waiting)
        for group in groups.values():
            self._predict(group)

    def _predict(self, group: list[_Waiting]) -> None:
        if len(group) == 1:
            self._alone(group[0])
            return
        rows = [waiting.rows for waiting in group]
        total = sum(rows)
        try:
            joined = [np.concatenate([w.inputs[i] for w in group]) for i in range(len(group[0].inputs))]
            outputs = [np.asarray(output) for output in self.model.predict(joined)]
        except Exception:  # noqa: BLE001 - one request of the batch may be what the model refuses: each alone
            outputs = []
        if not outputs or any(output.ndim == 0 or output.shape[0] != total for output in outputs):
            for waiting in group:
                self._alone(waiting)
            return
        start = 0
        for waiting, count in zip(group, rows, strict=True):
            if not waiting.answer.done():  # a client that went away cancelled its wait
                waiting.answer.set_result([output[start : start + count] for output in outputs])
            start += count

    def _alone(self, waiting: _Waiting) -> None:
        try:
            answer = self.model.predict(waiting.inputs)
        except Exception as exc:  # noqa: BLE001 - the request's own error, raised where it awaits
            if not waiting.answer.done():
                waiting.answer.set_exception(exc)
            return
        if not waiting.answer.done():
            waiting.answer.set_result(answer)
