"""Schemathesis over ``millpond server``'s OpenAPI document: no generated request makes it answer 500.

A live server (uvicorn, real HTTP) in a home of its own; a few derandomized examples per
operation keep the whole module well under a minute and the same from one run to the next.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("kfp")
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.server_support import Served, module_home, serving

EXAMPLES_PER_OPERATION = int(os.environ.get("MILLPOND_FUZZ_EXAMPLES", "6"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "fuzz"):
        yield from serving()


@pytest.fixture(scope="module")
def api_schema(served: Served) -> Any:
    return schemathesis.openapi.from_url(f"{served.url}/openapi.json")


def test_no_request_gets_a_server_error(api_schema: Any) -> None:
    """Valid and invalid requests for every operation of the document; every 500 is collected and shown."""
    from hypothesis import given
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 30, [op.label for op in operations]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def check(case: Any) -> None:
                case.call_and_validate(checks=[not_a_server_error], timeout=30)

            try:
                check()
            except Unsatisfiable:  # nothing invalid to send (a path of one free string): nothing to try
                continue
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - try every operation, report all failures
                failures.append(f"{operation.label} ({mode.value}): {str(exc).strip()[:2000]}")
    assert not failures, "\n\n".join(failures)
