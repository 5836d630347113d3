"""serving.batching on a real estimator: requests awaiting together share one predict, each gets its own rows.

The model is the digits classifier behind a small ``Model`` that counts its predicts and, as a model
may, refuses some input (a row with a negative pixel) with ``InferenceInputError``: a bad request in
a batch must fail alone, the others still answered by a batch or one at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from millpond.serving.batching import Batcher
from millpond.serving.models import InferenceInputError, TensorSpec


class Digits:
    """The digits classifier as a served Model, counting the rows of each predict."""

    name = "digits"
    version: str | None = None
    platform = "sklearn"
    inputs: tuple[TensorSpec, ...] = (TensorSpec("input-0", "FP64", (-1, 64)),)
    outputs: tuple[TensorSpec, ...] = (TensorSpec("output-0", "INT64", (-1,)),)

    def __init__(self, estimator: Any, wrong_length: bool = False) -> None:
        self.estimator = estimator
        self.calls: list[int] = []
        self.wrong_length = wrong_length

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        (rows,) = inputs
        self.calls.append(len(rows))
        if (rows < 0).any():
            raise InferenceInputError("model 'digits' refused the input: negative pixels")
        answer = self.estimator.predict(rows)
        return [answer[:1] if self.wrong_length else answer]


@pytest.fixture(scope="module")
def digits() -> tuple[Any, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    return LogisticRegression(max_iter=300).fit(x[:1500], y[:1500]), x[1500:1540]


def gather(batcher: Batcher, requests: list[list[np.ndarray]]) -> list[Any]:
    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(batcher.predict(inputs) for inputs in requests), return_exceptions=True)

    return asyncio.run(all_at_once())


def test_requests_awaiting_together_share_one_predict(digits: Any) -> None:
    estimator, rows = digits
    model = Digits(estimator)
    requests = [[rows[i : i + 1 + i % 3]] for i in range(10)]  # 1, 2 or 3 rows each
    answers = gather(Batcher(model), requests)
    assert model.calls == [sum(len(r[0]) for r in requests)]
    for (inputs,), (answer,) in zip(requests, answers, strict=True):
        assert answer.tolist() == estimator.predict(inputs).tolist()


def test_a_refused_request_fails_alone(digits: Any) -> None:
    estimator, rows = digits
    model = Digits(estimator)
    bad = -rows[:1]
    requests = [[rows[i : i + 1]] for i in range(5)] + [[bad]] + [[rows[i : i + 1]] for i in range(5, 8)]
    answers = gather(Batcher(model), requests)
    assert model.calls == [9] + [1] * 9  # the batch failed, so each was predicted alone
    assert isinstance(answers[5], InferenceInputError) and "negative pixels" in str(answers[5])
    for i, answer in enumerate(answers):
        if i != 5:
            assert answer[0].tolist() == estimator.predict(requests[i][0]).tolist()


def test_batches_are_capped_and_group_by_dtype_and_shape(digits: Any) -> None:
    estimator, rows = digits
    model = Digits(estimator)
    answers = gather(Batcher(model, max_batch=16), [[rows[i : i + 1]] for i in range(40)])
    assert model.calls == [16, 16, 8]
    assert [a[0][0] for a in answers] == estimator.predict(rows).tolist()

    model.calls.clear()
    mixed = [[rows[:1]], [rows[1:2].astype(np.float32)], [rows[2:3]], [rows[3:4].astype(np.float32)]]
    answers = gather(Batcher(model), mixed)
    assert sorted(model.calls) == [2, 2]  # float64 with float64, float32 with float32
    assert [a[0][0] for a in answers] == estimator.predict(rows[:4]).tolist()


def test_one_at_a_time_when_off_or_when_the_answer_does_not_split(digits: Any) -> None:
    estimator, rows = digits
    model = Digits(estimator)
    gather(Batcher(model, max_batch=1), [[rows[i : i + 1]] for i in range(4)])
    assert model.calls == [1, 1, 1, 1]
    odd = Digits(estimator, wrong_length=True)  # answers one row whatever it is given: cannot be split back
    answers = gather(Batcher(odd), [[rows[i : i + 2]] for i in range(3)])
    assert odd.calls == [6, 2, 2, 2]
    assert [a[0].tolist() for a in answers] == [estimator.predict(rows[i : i + 1]).tolist() for i in range(3)]


def test_a_wait_gathers_requests_that_come_later(digits: Any) -> None:
    estimator, rows = digits
    model = Digits(estimator)
    batcher = Batcher(model, max_wait=0.05)

    async def staggered() -> list[Any]:
        first = asyncio.ensure_future(batcher.predict([rows[:1]]))
        await asyncio.sleep(0.001)  # a later turn of the loop: without a wait it would have gone alone
        second = asyncio.ensure_future(batcher.predict([rows[1:2]]))
        return [await first, await second]

    answers = asyncio.run(staggered())
    assert model.calls == [2]
    assert [a[0][0] for a in answers] == estimator.predict(rows[:2]).tolist()
