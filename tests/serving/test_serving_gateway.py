"""The model gateway on ``millpond server`` and an InferenceService's own port, in front of real model servers.

Three ``python -m millpond.serving.model_server`` processes serve the digits classifier; the
endpoints file that a supervisor would write is written here (this test process as the
supervisor), and requests go through the gateway (``serving_routes``) or ``front.start``'s own
port: answers must equal the replica's own, traffic must split as the file says (round-robin,
80/20 canary, counted on the replicas' ``/metrics``), a dead replica must be skipped, and every
bad request must be a 4xx (or 503 when nothing serves) in the protocol's shape, never a 500.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import MillpondError, UserError
from millpond.serving import endpoints, front
from tests.fuzz_support import fuzz_settings
from tests.server_support import Served as Server
from tests.server_support import module_home, serving
from tests.serving.test_model_server import Served, start
from tests.serving_support import end, publish, train_digits

MAX_BODY = 64 * 1024
SEED_NAMES = [f"pixel{i}" for i in range(64)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "gateway")


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    return train_digits(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="module")
def replicas(digits: tuple[Path, Any, Any]) -> Iterator[list[Served]]:
    """Three model servers of one model: two of revision 1, one of revision 2 (the canary)."""
    started = [start("digits", digits[0], "sklearn", "--max-body-bytes", str(MAX_BODY)) for _ in range(3)]
    yield started
    for served in started:
        end(served)


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Server]:
    yield from serving()


def url_of(served: Served) -> str:
    return f"http://{served.host}:{served.port}"


def call(base: str, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=sent)
        answer = conn.getresponse()
        text = answer.read().decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return answer.status, parsed, {k.lower(): v for k, v in answer.getheaders()}
    finally:
        conn.close()


def served_count(served: Served, protocol: str = "v1") -> int:
    """Requests the replica answered 200 in ``protocol``, from its own /metrics."""
    _, text, _ = call(url_of(served), "GET", "/metrics")
    found = re.search(rf'millpond_model_server_requests_total\{{code="200",protocol="{protocol}"\}} ([0-9.e+]+)', text)
    return int(float(found.group(1))) if found else 0


def test_gateway_answers_what_the_replica_answers_in_three_protocols(server: Server, replicas: list[Served],
                                                                    digits: Any) -> None:
    _, model, rows = digits
    publish("digits", (100, [url_of(replicas[0])]))
    direct = url_of(replicas[0])
    v1 = {"instances": rows.tolist()}
    tensor = {"name": "x", "shape": list(rows.shape), "datatype": "FP64", "data": rows.ravel().tolist()}
    seed = {"data": {"names": SEED_NAMES, "ndarray": rows.tolist()}}  # seed 003's query body
    cases = [
        ("GET", "/v1/models/digits", None, "/v1/models/digits"),
        ("POST", "/v1/models/digits:predict", v1, "/v1/models/digits:predict"),
        ("GET", "/v2/models/digits", None, "/v2/models/digits"),
        ("GET", "/v2/models/digits/ready", None, "/v2/models/digits/ready"),
        ("POST", "/v2/models/digits/infer", {"id": "r1", "inputs": [tensor]}, "/v2/models/digits/infer"),
        ("POST", "/seldon/digits/api/v0.1/predictions", seed, "/api/v0.1/predictions"),
        ("POST", "/seldon/default/digits/api/v0.1/predictions", seed, "/api/v0.1/predictions"),
        ("POST", "/serving/default/digits/v1/models/digits:predict", v1, "/v1/models/digits:predict"),
    ]
    for method, path, body, replica_path in cases:
        status, answer, headers = call(server.url, method, path, body)
        assert (status, answer) == call(direct, method, replica_path, body)[:2], path
        assert status == 200 and headers["content-type"] == "application/json"
        assert headers["content-security-policy"] == "sandbox"
    assert call(server.url, "POST", "/v1/models/digits:predict", v1)[1] == {"predictions": model.predict(rows).tolist()}
    # the seed's script: requests.post(uri, json=request), with only the address changed
    import requests

    answer = requests.post(f"{server.url}/seldon/digits/api/v0.1/predictions", json=seed, timeout=30)
    assert answer.status_code == 200 and answer.json()["data"]["ndarray"] == model.predict(rows).tolist()
    # the gateway's own OIP server routes
    assert call(server.url, "GET", "/v2/health/live")[:2] == (200, {"live": True})
    assert call(server.url, "GET", "/v2/health/ready")[:2] == (200, {"ready": True})
    status, meta, _ = call(server.url, "GET", "/v2")
    assert status == 200 and meta["name"] == "millpond" and meta["extensions"] == []
    # and the server's /metrics counts them per model
    _, text, _ = call(server.url, "GET", "/metrics")
    assert re.search(r'millpond_model_requests_total\{code="200",name="digits",namespace="default",'
                     r'revision="digits-predictor-00001"\} ([0-9.]+)', text)
    assert "millpond_model_request_duration_seconds_bucket" in text
    # the replica's own /metrics: KServe's predict histogram
    _, text, headers = call(direct, "GET", "/metrics")
    assert headers["content-type"].startswith("text/plain")
    assert re.search(r'request_predict_seconds_count\{model_name="digits"\} [1-9]', text)


def test_round_robin_over_two_replicas_and_an_80_20_canary(server: Server, replicas: list[Served]) -> None:
    a, b, canary = replicas
    before = [served_count(s) for s in replicas]
    publish("digits", (100, [url_of(a), url_of(b)]))
    body = {"instances": [[0.0] * 64]}
    for _ in range(10):
        assert call(server.url, "POST", "/v1/models/digits:predict", body)[0] == 200
    after = [served_count(s) for s in replicas]
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (5, 5, 0)

    publish("digits", (80, [url_of(a), url_of(b)]), (20, [url_of(canary)]))
    for _ in range(100):
        assert call(server.url, "POST", "/v1/models/digits:predict", body)[0] == 200
    final = [served_count(s) for s in replicas]
    stable = final[0] - after[0] + final[1] - after[1]
    assert abs(stable - 80) <= 5 and abs(final[2] - after[2] - 20) <= 5
    assert abs((final[0] - after[0]) - (final[1] - after[1])) <= 1  # round-robin inside the revision too


def _dead_url() -> str:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_dead_replica_is_skipped_and_none_ready_is_503(server: Server, replicas: list[Served]) -> None:
    publish("digits", (100, [_dead_url(), url_of(replicas[0])]))
    for _ in range(6):
        assert call(server.url, "POST", "/v1/models/digits:predict", {"instances": [[0.0] * 64]})[0] == 200

    publish("digits", (100, []))
    assert call(server.url, "POST", "/v1/models/digits:predict", {"instances": [[1.0] * 64]})[:2] == (
        503, {"error": "InferenceService default/digits has no ready replica"})
    status, answer, _ = call(server.url, "POST", "/seldon/digits/api/v0.1/predictions", {"data": {"ndarray": [[1]]}})
    assert status == 503 and answer["status"]["code"] == 503 and answer["status"]["status"] == "FAILURE"

    publish("digits", (100, [_dead_url()]))  # listed, but refuses: 503 as well, never a 500
    status, answer, _ = call(server.url, "POST", "/v2/models/digits/infer", {"inputs": []})
    assert status == 503 and "connection refused" in answer["error"]


def test_a_replica_killed_while_listed_is_skipped(server: Server, replicas: list[Served], digits: Any) -> None:
    doomed = start("digits", digits[0], "sklearn")
    publish("digits", (100, [url_of(doomed), url_of(replicas[0])]))
    body = {"instances": [[0.0] * 64]}
    for _ in range(4):  # both take turns: the gateway holds a kept-alive connection to each
        assert call(server.url, "POST", "/v1/models/digits:predict", body)[0] == 200
    assert served_count(doomed) == 2
    doomed.proc.kill()  # kill -9: still in the endpoints file, as until its supervisor rewrites it
    doomed.proc.wait()
    end(doomed)
    for _ in range(6):
        assert call(server.url, "POST", "/v1/models/digits:predict", body)[0] == 200


def test_unknown_model_is_404_in_each_protocols_shape(server: Server) -> None:
    for method, path in (("GET", "/v1/models/nope"), ("POST", "/v1/models/nope:predict"), ("GET", "/v2/models/nope"),
                         ("POST", "/v2/models/nope/versions/1/infer"), ("GET", "/v2/models/nope/ready")):
        status, answer, _ = call(server.url, method, path, {})
        assert status == 404 and answer == {"error": "Model with name nope does not exist (no InferenceService "
                                                     "nope in namespace default)."}, path
    for path in ("/seldon/nope/api/v0.1/predictions", "/seldon/team/nope/api/v0.1/predictions"):
        status, answer, _ = call(server.url, "POST", path, {})
        assert status == 404 and answer["status"]["code"] == 404 and "nope" in answer["status"]["info"]
    remembered = server.app.state.gateway._entries
    assert not [key for key in remembered if key[1] == "nope"]  # names that do not exist leave nothing behind


def test_hostile_paths_and_bodies(server: Server, replicas: list[Served]) -> None:
    publish("digits", (100, [url_of(replicas[0])]))
    assert call(server.url, "GET", "/serving/default/../v2/models/digits")[0] in (400, 404)
    status, answer, _ = call(server.url, "POST", "/seldon/%2e%2e/api/v0.1/predictions", {})
    assert status == 400 and "status" in answer
    # an encoded slash is a slash: default%2Fdigits is namespace default, InferenceService digits
    assert call(server.url, "GET", "/serving/default%2Fdigits/v2/models/digits")[0] == 200
    # the path goes to the replica re-quoted: a "?" inside a segment stays in the path, not a query
    status, answer, _ = call(server.url, "GET", "/serving/default/digits/v2/models/digits%3Fx=1")
    assert status == 404 and answer["error"] == "Model with name digits?x=1 does not exist."
    # over the replica's --max-body-bytes: its 413 comes back
    big = {"instances": [[0.0] * 64] * 400}
    status, answer, _ = call(server.url, "POST", "/v1/models/digits:predict", big)
    assert status == 413 and "over the limit of 65,536" in answer["error"]
    # over the gateway's own limit: refused before the body is read
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/models/digits:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 999999999\r\n\r\n")
        answer = b""
        while b"}" not in answer and (chunk := sock.recv(4096)):  # headers and body may come apart
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413") and b'{"error":"request body of 999,999,999 bytes' in answer


def test_cross_site_posts_are_refused_and_curl_posts_are_not(server: Server, replicas: list[Served]) -> None:
    publish("digits", (100, [url_of(replicas[0])]))
    body = {"instances": [[0.0] * 64]}
    status, answer, _ = call(server.url, "POST", "/v1/models/digits:predict", body,
                             headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in answer["error"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, _ = call(server.url, "POST", "/v1/models/digits:predict", body,
                        headers={**form, "Sec-Fetch-Site": "cross-site"})
    assert status == 415
    # curl -d @input.json: form-encoded, no Origin: a model query, answered
    assert call(server.url, "POST", "/v1/models/digits:predict", body, headers=form)[0] == 200
    # the same-origin UI may post JSON
    origin = {"Origin": server.url}
    assert call(server.url, "POST", "/v1/models/digits:predict", body, headers=origin)[0] == 200
    # DNS rebinding: another Host is refused on the gateway's routes too
    assert call(server.url, "GET", "/v1/models/digits", headers={"Host": "evil.example"})[0] == 400


def test_a_server_with_a_token_wants_it_for_model_queries(home: Path, replicas: list[Served]) -> None:
    publish("digits", (100, [url_of(replicas[0])]))
    body = {"instances": [[0.0] * 64]}
    for served in serving("s3cret"):
        assert call(served.url, "POST", "/v1/models/digits:predict", body)[0] == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert call(served.url, "POST", "/v1/models/digits:predict", body, headers=bearer)[0] == 200


def test_own_port_serves_the_inference_service_and_stops(home: Path, replicas: list[Served], digits: Any) -> None:
    _, model, rows = digits
    publish("digits", (100, [url_of(replicas[1])]), namespace="team")
    handle = front.start(0, "team", "digits")
    try:
        with pytest.raises(MillpondError, match=f"cannot listen on 127.0.0.1:{handle.port}"):
            front.start(handle.port, "team", "digits")  # taken: said in one line, nothing left running
        with pytest.raises(UserError):
            front.start(0, "team", "..")
        status, answer, _ = call(handle.url, "POST", "/v1/models/digits:predict", {"instances": rows.tolist()})
        assert (status, answer) == (200, {"predictions": model.predict(rows).tolist()})
        # a web page in the user's browser gets nothing: DNS rebinding (another Host), another site's Origin
        for headers in ({"Host": "evil.example:80"}, {"Origin": "http://evil.example"}, {"Origin": "null"}):
            status, answer, _ = call(handle.url, "POST", "/v1/models/digits:predict", {"instances": rows.tolist()},
                                     headers=headers)
            assert status == 403 and "predictions" not in answer, (headers, answer)
        local = {"Origin": f"http://localhost:{handle.port}"}
        assert call(handle.url, "POST", "/v1/models/digits:predict", {"instances": rows.tolist()},
                    headers=local)[0] == 200
        seed = {"data": {"names": SEED_NAMES, "ndarray": rows.tolist()}}
        status, answer, _ = call(handle.url, "POST", "/api/v0.1/predictions", seed)
        assert status == 200 and answer["data"]["ndarray"] == model.predict(rows).tolist()
        endpoints.clear("team", "digits")
        status, answer, _ = call(handle.url, "POST", "/seldon/digits/api/v0.1/predictions", seed)
        assert status == 503 and answer["status"]["info"] == "InferenceService team/digits has no ready replica"
    finally:
        handle.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", handle.port), timeout=5).close()
    handle.stop()  # twice: nothing left to stop


# A custom container's server: echoes what reached it (method, path, query, headers, body), and serves 1 MiB at /big.
ECHO = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        size = int(self.headers.get("content-length") or 0)
        if self.path == "/big":
            body, kind = bytes(range(256)) * 4096, "application/octet-stream"
        else:
            body = json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                               "body": self.rfile.read(size).decode()}).encode()
            kind = "text/html"
        self.send_response(201)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "session=stolen")
        self.send_header("X-Model", "echo")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def test_custom_container_paths_are_forwarded_as_they_came(server: Server) -> None:
    import subprocess
    import sys

    echo = subprocess.Popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None
        publish("custom", (100, [f"http://127.0.0.1:{int(echo.stdout.readline())}"]), namespace="team")
        status, seen, headers = call(server.url, "PUT", "/serving/team/custom/any/path%20x?q=1&r=%2F", raw=b"hello",
                                     headers={"X-Trace": "t1", "Cookie": "c=1", "X-Hop": "1",
                                              "Authorization": "Bearer s", "Connection": "keep-alive, X-Hop"})
        assert status == 201 and headers["x-model"] == "echo" and "set-cookie" not in headers
        assert headers["content-security-policy"] == "sandbox" and headers["x-content-type-options"] == "nosniff"
        assert (seen["method"], seen["path"], seen["body"]) == ("PUT", "/any/path%20x?q=1&r=%2F", "hello")
        sent = {k.lower(): v for k, v in seen["headers"].items()}
        assert sent["x-trace"] == "t1" and sent["content-type"] == "application/json"
        assert "cookie" not in sent and "authorization" not in sent and "x-hop" not in sent
        assert sent["host"].startswith("127.0.0.1:")
        # an answer larger than the buffered size streams back whole
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/serving/team/custom/big")
        answer = conn.getresponse()
        assert answer.status == 201 and answer.read() == bytes(range(256)) * 4096
        conn.close()
    finally:
        echo.kill()
        echo.wait()
        if echo.stdout is not None:
            echo.stdout.close()


SEGMENT = st.one_of(st.sampled_from(["digits", "nope", "..", "%2F", "%00", "default", "v1", "a" * 300, ""]),
                    st.text(alphabet=st.characters(codec="ascii", exclude_characters="/?#"), max_size=12))


@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
       prefix=st.sampled_from(["/v1/models/", "/v2/models/", "/seldon/", "/serving/", "/serving/default/",
                               "/serving/default/digits/", "/v2/"]),
       segments=st.lists(SEGMENT, max_size=4),
       body=st.one_of(st.none(), st.binary(max_size=200), st.just(b'{"instances": [[1, 2]]}')))
@fuzz_settings(60)
def test_fuzzed_gateway_requests_never_answer_500(server: Server, replicas: list[Served], method: str, prefix: str,
                                                  segments: list[str], body: bytes | None) -> None:
    publish("digits", (100, [url_of(replicas[0])]))
    path = prefix + "/".join(segments).replace(" ", "%20")
    path = "".join(c if 32 < ord(c) < 127 else f"%{ord(c):02X}" for c in path)
    status, _, _ = call(server.url, method, path, raw=body if method != "GET" else None)
    assert status < 500 or status == 503, (method, path, status)
