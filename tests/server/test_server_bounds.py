"""Every number a caller controls on the REST API is bounded: past a bound, a 4xx naming it, never a 500.

Over real HTTP to a real server (uvicorn in a thread over a home of its own): the list calls'
``page_size``, ``page_token`` (an offset), ``filter`` (its length, nesting, predicates, ``IN``
values, integers of any size) and ``sort_by``; a request body's size (``Content-Length`` or a
chunked stream) and nesting; a periodic schedule's ``interval_second``. The explicit tests are
the cases that once answered 500 (or 503, or waited for a body that never came); the property
tests drive the same numbers to extremes.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from millpond.server.listing import MAX_FILTER_CHARS, MAX_IN_VALUES, MAX_PAGE_SIZE, MAX_PREDICATES
from millpond.server.security import MAX_REQUEST_BYTES
from tests.fuzz_support import deep
from tests.server_support import Served, module_home, serving

API = "/apis/v2beta1"
LISTS = (f"{API}/runs", f"{API}/experiments", f"{API}/pipelines", f"{API}/recurringruns", "/apis/millpond/v1/jobs")
PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "bounds"):
        yield from serving()


def call(served: Served, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    try:
        sent = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body, {**sent, **(headers or {})})
        response = connection.getresponse()
        text = response.read().decode()
        return response.status, json.loads(text) if text.startswith(("{", "[")) else {"text": text}
    finally:
        connection.close()


def listed(served: Served, path: str, **query: Any) -> tuple[int, dict[str, Any]]:
    return call(served, "GET", f"{path}?{urllib.parse.urlencode({k: str(v) for k, v in query.items()})}")


def token(offset: Any) -> str:
    return base64.urlsafe_b64encode(str(offset).encode()).decode()


def refused_clearly(status: int, answer: dict[str, Any], what: str) -> None:
    """A 4xx in KFP's error shape whose message names ``what``."""
    assert 400 <= status < 500, (status, answer)
    assert what in answer["message"] and answer["error"] == answer["message"], answer


# --- what once answered 500 (or 503) ----------------------------------------------------------

def test_a_page_token_past_int64_is_a_400(served: Served) -> None:
    for path in LISTS:
        status, answer = listed(served, path, page_token=token(2**63))
        refused_clearly(status, answer, "page_token")
        assert listed(served, path, page_token=token(2**63 - 1))[0] == 200  # an empty page far away


def test_a_deeply_nested_filter_is_a_400(served: Served) -> None:
    status, answer = listed(served, f"{API}/runs", filter="[" * 5000 + "]" * 5000)
    refused_clearly(status, answer, "nested deeper")
    status, answer = listed(served, f"{API}/runs", filter=json.dumps({"predicates": deep(200)}))
    refused_clearly(status, answer, "filter")


def test_too_many_predicates_or_in_values_are_a_400_not_a_database_failure(served: Served) -> None:
    one = {"key": "display_name", "operation": "EQUALS", "string_value": "x"}
    status, answer = listed(served, f"{API}/runs", filter=json.dumps({"predicates": [one] * (MAX_PREDICATES + 1)}))
    refused_clearly(status, answer, f"maximum of {MAX_PREDICATES}")
    assert listed(served, f"{API}/runs", filter=json.dumps({"predicates": [one] * MAX_PREDICATES}))[0] == 200
    values = {"key": "display_name", "operation": "IN", "string_values": {"values": ["v"] * (MAX_IN_VALUES + 1)}}
    status, answer = listed(served, f"{API}/runs", filter=json.dumps({"predicates": [values]}))
    refused_clearly(status, answer, f"maximum of {MAX_IN_VALUES}")
    status, answer = listed(served, f"{API}/runs", filter=json.dumps({"x": "y" * MAX_FILTER_CHARS}))
    refused_clearly(status, answer, "characters")


def test_an_interval_past_100_years_is_a_400(served: Served) -> None:
    spec = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}}, "schemaVersion": "2.1.0",
            "sdkVersion": "kfp-2.0.0"}
    for interval in (2**63, 10**30, str(2**64)):
        body = {"display_name": "far", "pipeline_spec": spec, "max_concurrency": 1,
                "trigger": {"periodic_schedule": {"interval_second": interval}}}
        status, answer = call(served, "POST", f"{API}/recurringruns", json.dumps(body).encode())
        refused_clearly(status, answer, "interval_second")


def test_a_body_over_the_bound_is_a_413_before_it_is_read(served: Served) -> None:
    """A Content-Length past the bound is refused at once (the server never waits for those bytes)."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(f"POST {API}/experiments HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {10**12}\r\n\r\n{{".encode())
        answer = b""
        while b"request body over" not in answer and (part := sock.recv(65536)):
            answer += part
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"request body over" in answer


def test_a_chunked_body_over_the_bound_is_a_413(served: Served) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=120)
    chunk = b" " * (1024 * 1024)

    def body() -> Iterator[bytes]:
        yield b'{"display_name": "big"'
        for _ in range(MAX_REQUEST_BYTES // len(chunk) + 2):
            yield chunk
        yield b"}"

    try:
        connection.request("POST", f"{API}/experiments", body(), {"Content-Type": "application/json"},
                           encode_chunked=True)
        response = connection.getresponse()
        answer = json.loads(response.read())
    except (BrokenPipeError, ConnectionResetError):  # refused before the stream ended: the server closed it
        answer, response = None, None
    finally:
        connection.close()
    if response is not None:
        assert response.status == 413, answer
    # and a chunked body within the bound still gets through
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    try:
        connection.request("POST", f"{API}/experiments", iter([b'{"display_name": ', b'"chunked"}']),
                           {"Content-Type": "application/json"}, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200, response.read()
    finally:
        connection.close()
    status, found = listed(served, f"{API}/experiments", page_size=MAX_PAGE_SIZE)
    assert [e["display_name"] for e in found["experiments"] if e["display_name"] == "big"] == []


# --- properties: the numbers at their extremes ------------------------------------------------

huge_ints = st.one_of(st.integers(), st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**400]))
scalars = st.one_of(st.none(), st.booleans(), huge_ints, st.floats(allow_nan=False), st.text(max_size=30))
predicates = st.fixed_dictionaries(
    {"key": st.sampled_from(["display_name", "created_at", "id", "state", "nosuch", ""]),
     "operation": st.one_of(st.sampled_from(["EQUALS", "IN", "GREATER_THAN", "IS_SUBSTRING"]), huge_ints)},
    optional={"string_value": scalars, "int_value": huge_ints, "long_value": st.one_of(huge_ints, st.text()),
              "timestamp_value": scalars,
              "string_values": st.fixed_dictionaries({"values": st.lists(scalars, max_size=5)})},
)


@st.composite
def filters(draw: st.DrawFn) -> str:
    """A filter: well-formed predicates (a few, or past the bound), nested deep, huge, or not JSON at all."""
    shape = draw(st.sampled_from(["predicates", "many", "deep", "long", "text"]))
    if shape == "predicates":
        return json.dumps({"predicates": draw(st.lists(predicates, max_size=4))})
    if shape == "many":
        count = draw(st.integers(MAX_PREDICATES - 2, 3 * MAX_PREDICATES))
        return json.dumps({"predicates": [draw(predicates)] * count})
    if shape == "deep":
        levels = draw(st.integers(1, 3000))
        if draw(st.booleans()):
            return "[" * levels + "]" * levels
        return json.dumps({"predicates": deep(min(levels, 900))})
    if shape == "long":
        length = draw(st.integers(MAX_FILTER_CHARS - 100, 2 * MAX_FILTER_CHARS))
        return json.dumps({"predicates": [], "pad": "x" * length})
    return draw(st.text(max_size=50))


@st.composite
def list_queries(draw: st.DrawFn) -> dict[str, str]:
    """One list parameter at its extremes, the others valid or absent (so that the extreme one is what is read)."""
    query: dict[str, str] = {}
    pushed = draw(st.sampled_from(["page_size", "page_token", "filter", "sort_by", "all"]))
    if pushed in ("page_size", "all"):
        query["page_size"] = str(draw(st.one_of(huge_ints, st.integers(-5, MAX_PAGE_SIZE + 5))))
    if pushed in ("page_token", "all"):
        query["page_token"] = token(draw(st.one_of(huge_ints, st.text(max_size=12))))
    if pushed in ("filter", "all"):
        query["filter"] = draw(filters())
    if pushed in ("sort_by", "all"):
        query["sort_by"] = draw(st.one_of(st.text(max_size=40), st.sampled_from(["created_at desc", "id asc x"])))
    return query


@given(path=st.sampled_from(LISTS), query=list_queries())
@example(path=LISTS[0], query={"page_token": token(2**63)})
@example(path=LISTS[3], query={"filter": "[" * 3000 + "]" * 3000})
@PROPERTY
def test_list_parameters_at_extremes_never_answer_a_server_error(served: Served, path: str,
                                                                 query: dict[str, str]) -> None:
    try:
        status, answer = listed(served, path, **query)
    except (ConnectionResetError, http.client.RemoteDisconnected):
        return  # a request line past the HTTP server's own limit: refused before the application (never a 500)
    assert status < 500, (status, answer)
    if status >= 400:
        assert answer.get("message"), answer


@given(depth=st.integers(0, 3000), width=st.integers(0, 3), number=huge_ints,
       field=st.sampled_from(["description", "display_name", "namespace", "storage_state"]))
@PROPERTY
def test_bodies_nested_deep_or_carrying_huge_numbers_never_answer_a_server_error(
        served: Served, depth: int, width: int, number: int, field: str) -> None:
    nested = "[" * depth + ", ".join([str(number)] * width) + "]" * depth
    body = f'{{"display_name": "deep", "{field}": {nested or "0"}}}'.encode()
    status, answer = call(served, "POST", f"{API}/experiments", body)
    assert status < 500, (status, answer)
    spec = f'{{"display_name": "r", "pipeline_spec": {{"root": {nested or "0"}}}, ' \
           f'"runtime_config": {{"parameters": {{"p": {nested or str(number)}}}}}}}'
    status, answer = call(served, "POST", f"{API}/runs", spec.encode())
    assert status < 500 and status != 200, (status, answer)

