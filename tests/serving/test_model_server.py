"""The model server as a real process: KServe v1, OIP v2 and Seldon v0.1 against the model called directly.

A digits classifier is trained here, saved the way KServe's sklearnserver finds it
(``model.joblib``), and served by ``python -m millpond.serving.model_server`` on a free port; a
TorchScript model and a state dict with its module are served the same way. Bad requests (wrong
shape, wrong datatype, unknown model, malformed JSON, oversize, and hypothesis' fuzzed bodies)
must be 4xx in each protocol's error shape, never a 500.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.serving import model_server
from tests.fuzz_support import fuzz_settings

torch = pytest.importorskip("torch")
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

MAX_BODY = 64 * 1024


@dataclass
class Served:
    proc: subprocess.Popen[str]
    host: str
    port: int

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
        finally:
            conn.close()


def start(name: str, model_dir: Path, fmt: str, *extra: str, **options: str) -> Served:
    argv = model_server.command(name, model_dir, fmt, **options) + list(extra)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ready = model_server.parse_ready_line(line)
    if ready is None:
        proc.kill()
        raise AssertionError(f"no ready line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    assert ready.name == name
    host, port = ready.url.removeprefix("http://").rsplit(":", 1)
    return Served(proc, host, int(port))


def stop(served: Served) -> int:
    served.proc.send_signal(signal.SIGTERM)
    try:
        return served.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        served.proc.kill()  # no server outlives the test, even one that ignores SIGTERM
        served.proc.wait()
        raise


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x[:1500], y[:1500])
    model_dir = tmp_path_factory.mktemp("digits")
    joblib.dump(model, model_dir / "model.joblib")
    return model_dir, model, x[1500:1520]


@pytest.fixture(scope="module")
def sklearn_server(digits: tuple[Path, Any, np.ndarray]) -> Iterator[Served]:
    served = start("digits", digits[0], "sklearn", "--max-body-bytes", str(MAX_BODY), version="3")
    yield served
    if served.proc.poll() is None:
        stop(served)


def test_three_protocols_answer_what_the_model_predicts(sklearn_server: Served, digits: Any) -> None:
    _, model, rows = digits
    expected = model.predict(rows).tolist()

    assert sklearn_server.request("GET", "/v1/models/digits") == (200, {"name": "digits", "ready": True})
    status, body = sklearn_server.request("POST", "/v1/models/digits:predict", {"instances": rows.tolist()})
    assert (status, body) == (200, {"predictions": expected})

    tensor = {"name": "x", "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}
    status, body = sklearn_server.request("POST", "/v2/models/digits/infer", {"id": "r1", "inputs": [tensor]})
    assert status == 200
    assert body == {
        "model_name": "digits",
        "model_version": "3",
        "id": "r1",
        "outputs": [{"name": "output-0", "shape": [20], "datatype": "INT64", "data": expected}],
    }
    nested = dict(tensor, data=rows.tolist(), datatype="FP64")  # nested data reads row-major too
    status, body = sklearn_server.request("POST", "/v2/models/digits/versions/3/infer", {"inputs": [nested]})
    assert status == 200 and body["outputs"][0]["data"] == expected

    names = [f"pixel{i}" for i in range(64)]
    for path in (
        "/seldon/digits/api/v0.1/predictions",
        "/seldon/default/digits/api/v0.1/predictions",
        "/api/v0.1/predictions",
    ):
        status, body = sklearn_server.request("POST", path, {"data": {"names": names, "ndarray": rows.tolist()}})
        assert (status, body) == (200, {"data": {"names": ["t:0"], "ndarray": expected}, "meta": {}})
    status, body = sklearn_server.request(
        "POST", "/api/v0.1/predictions", {"data": {"tensor": {"shape": [20, 64], "values": rows.ravel().tolist()}}}
    )
    assert (status, body) == (
        200,
        {"data": {"names": ["t:0"], "tensor": {"shape": [20], "values": expected}}, "meta": {}},
    )


def test_health_and_metadata(sklearn_server: Served) -> None:
    assert sklearn_server.request("GET", "/v2/health/live") == (200, {"live": True})
    assert sklearn_server.request("GET", "/v2/health/ready") == (200, {"ready": True})
    status, body = sklearn_server.request("GET", "/v2")
    assert status == 200 and body["name"] == "millpond" and body["extensions"] == []
    meta = {
        "name": "digits",
        "versions": ["3"],
        "platform": "sklearn",
        "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [-1, 64]}],
        "outputs": [{"name": "output-0", "datatype": "INT64", "shape": [-1]}],
    }
    assert sklearn_server.request("GET", "/v2/models/digits") == (200, meta)
    assert sklearn_server.request("GET", "/v2/models/digits/versions/3") == (200, meta)
    assert sklearn_server.request("GET", "/v2/models/digits/ready") == (200, {"name": "digits", "ready": True})
    assert sklearn_server.request("GET", "/v1/models") == (200, {"models": ["digits"]})


def test_keep_alive_requests_do_not_wait_for_delayed_acks(sklearn_server: Served) -> None:
    """Without TCP_NODELAY every request on a kept-alive connection took 44 ms (headers and body written apart)."""
    conn = http.client.HTTPConnection(sklearn_server.host, sklearn_server.port, timeout=10)
    body = json.dumps({"instances": [ROW]}).encode()
    times = []
    for _ in range(15):
        started = time.perf_counter()
        conn.request("POST", "/v1/models/digits:predict", body=body, headers={"Content-Type": "application/json"})
        assert conn.getresponse().read()
        times.append(time.perf_counter() - started)
    conn.close()
    assert sorted(times)[7] < 0.030, times


ROW = [0.0] * 64


def test_a_body_without_content_type_is_read_as_json_and_bad_ones_are_4xx(sklearn_server: Served) -> None:
    """KServe's ModelServer answers 500 when Content-Type is missing; curl -d sends a form type, others none."""
    tensor = {"name": "x", "shape": [1, 64], "datatype": "FP32", "data": ROW}
    for path, body, header, status in [
        ("/v1/models/digits:predict", json.dumps({"instances": [ROW]}), None, 200),
        ("/v2/models/digits/infer", json.dumps({"inputs": [tensor]}), None, 200),
        ("/v1/models/digits:predict", json.dumps({"instances": [ROW]}), "application/x-www-form-urlencoded", 200),
        ("/v1/models/digits:predict", '{"instances": [[1, 2', None, 400),
        ("/v2/models/digits/infer", "", None, 400),
        ("/v1/models/digits:predict", json.dumps({"instances": [[1, 2, 3]]}), "text/plain", 400),
    ]:
        conn = http.client.HTTPConnection(sklearn_server.host, sklearn_server.port, timeout=10)
        conn.putrequest("POST", path)
        conn.putheader("Content-Length", str(len(body)))
        if header:
            conn.putheader("Content-Type", header)
        conn.endheaders(body.encode())
        response = conn.getresponse()
        answer = json.loads(response.read())
        conn.close()
        assert response.status == status, (path, body, answer)
        assert ("predictions" in answer or "outputs" in answer) if status == 200 else set(answer) == {"error"}


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(sklearn_server: Served, digits: Any) -> None:
    """16 clients at once, v1 and v2, some sending bad requests: each answer is its own request's (batched
    requests split back in order), a bad request fails alone, and fewer predicts ran than requests."""
    _, model, rows = digits
    expected = model.predict(rows).tolist()

    def predicts() -> int:
        conn = http.client.HTTPConnection(sklearn_server.host, sklearn_server.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return int(float(re.search(r'request_predict_seconds_count\{model_name="digits"\} (\S+)', text)[1]))

    before = predicts()
    failures: list[str] = []
    sent = [0]

    def client(n: int) -> None:
        conn = http.client.HTTPConnection(sklearn_server.host, sklearn_server.port, timeout=30)
        for i in range(40):
            at = (n * 7 + i) % len(rows)
            if n % 2:
                tensor = {"name": "x", "shape": [1, 64], "datatype": "FP64", "data": rows[at].tolist()}
                path, body = "/v2/models/digits/infer", {"inputs": [tensor]}
            else:
                path, body = "/v1/models/digits:predict", {"instances": [rows[at].tolist()]}
            bad = n % 4 == 0 and i % 5 == 0
            if bad:
                body = {"instances": [ROW[:10]]}
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = json.loads(response.read())
            sent[0] += 0 if bad else 1
            got = answer.get("predictions") or [o["data"][0] for o in answer.get("outputs", [])] or None
            if bad and (response.status != 400 or "expected shape [-1, 64]" not in answer.get("error", "")):
                failures.append(f"bad request answered {response.status} {answer}")
            elif not bad and (response.status != 200 or got != [expected[at]]):
                failures.append(f"row {at}: {response.status} {answer}, expected {expected[at]}")
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    ran = predicts() - before
    assert 0 < ran <= sent[0]  # one predict per request at worst; batches make it fewer



@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("POST", "/v1/models/digits:predict", {"instances": [[1, 2, 3]]}, 400, "expected shape [-1, 64]"),
        ("POST", "/v1/models/digits:predict", {"instances": [ROW, ROW[:10]]}, 400, "not rectangular"),
        ("POST", "/v1/models/digits:predict", {"instances": [["a"] + ROW[1:]]}, 400, "only numbers or only strings"),
        ("POST", "/v1/models/digits:predict", {"rows": [ROW]}, 400, '"instances"'),
        ("POST", "/v1/models/nope:predict", {"instances": [ROW]}, 404, "Model with name nope does not exist."),
        ("GET", "/v1/models/nope", None, 404, "does not exist"),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": ROW[:63]}]},
            400,
            "needs 64 elements",
        ),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "INT64", "data": ROW}]},
            400,
            "takes integers",
        ),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FLOAT", "data": ROW}]},
            400,
            "unknown datatype",
        ),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": ROW}]},
            400,
            "expected 2 dimensions",
        ),
        (
            "POST",
            "/v2/models/digits/infer",
            {
                "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": ROW}],
                "outputs": [{"name": "p"}],
            },
            400,
            "no output 'p'",
        ),
        ("POST", "/v2/models/digits/infer", {"inputs": []}, 400, "non-empty list"),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [1e300] * 64}]},
            400,
            "out of range",
        ),
        (
            "POST",
            "/v2/models/digits/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "INT8", "data": [300] * 64}]},
            400,
            "out of range",
        ),
        ("POST", "/v1/models/digits:predict", {"instances": [[2**64] + [0] * 63]}, 400, "out of range"),
        ("POST", "/v1/models/digits:predict", {"instances": [[True] + ROW[1:]]}, 400, "only numbers"),
        (
            "POST",
            "/v2/models/digits/versions/9/infer",
            {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": ROW}]},
            404,
            "no version 9",
        ),
        ("GET", "/v2/models/nope", None, 404, "does not exist"),
        ("GET", "/v2/models/digits/infer", None, 405, "Method Not Allowed"),
        ("POST", "/v3/models/digits/infer", {}, 404, "Not Found"),
    ],
)
def test_bad_requests_are_4xx_with_the_protocols_error(
    sklearn_server: Served, method: str, path: str, body: Any, status: int, says: str
) -> None:
    got, answer = sklearn_server.request(method, path, body)
    assert got == status
    assert set(answer) == {"error"} and says in answer["error"]


def test_seldon_errors_and_malformed_or_oversize_bodies(sklearn_server: Served) -> None:
    status, body = sklearn_server.request("POST", "/seldon/digits/api/v0.1/predictions", {"data": {"strData": "x"}})
    assert status == 400 and body["status"]["status"] == "FAILURE" and "ndarray" in body["status"]["info"]
    status, body = sklearn_server.request("POST", "/seldon/nope/api/v0.1/predictions", {"data": {"ndarray": [ROW]}})
    assert status == 404 and body["status"]["code"] == 404
    status, body = sklearn_server.request("GET", "/seldon/digits/api/v0.1/predictions")
    assert status == 405 and body["status"]["info"].startswith("GET /seldon/digits/api/v0.1/predictions:")
    for path in ("/v1/models/digits:predict", "/v2/models/digits/infer"):
        status, body = sklearn_server.request("POST", path, raw=b'{"instances": [[1, 2')
        assert status == 400 and "malformed JSON" in body["error"]
        status, body = sklearn_server.request("POST", path, raw=b"\xff\xfe")
        assert status == 400 and "UTF-8" in body["error"]
        status, body = sklearn_server.request("POST", path, {"instances": [ROW] * 2000})  # ~260 KB > 64 KiB
        assert status == 413 and "over the limit" in body["error"]
    status, body = sklearn_server.request("POST", "/api/v0.1/predictions", raw=b"[" * 70_000)
    assert status == 413 and body["status"]["code"] == 413
    status, body = sklearn_server.request("POST", "/api/v0.1/predictions", raw=b"[" * 50_000)
    assert status == 400 and "nested too deeply" in body["status"]["info"]
    status, body = sklearn_server.request("POST", "/v1/models/digits:predict", raw=b'{"instances": [[NaN]]}')
    assert status == 400 and "NaN is not JSON" in body["error"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)
_tensor = st.fixed_dictionaries(
    {
        "name": st.text(max_size=4),
        "shape": st.lists(st.integers(-2, 70), max_size=3),
        "datatype": st.sampled_from(["FP32", "FP64", "INT8", "UINT64", "BOOL", "BYTES", "INT64", "X"]),
        "data": st.lists(
            st.integers(-300, 300) | st.floats(allow_nan=False) | st.booleans() | st.text(max_size=3), max_size=70
        ),
    },
)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries({"instances": _json}),
    st.fixed_dictionaries({"inputs": st.lists(_tensor, max_size=2)}),
    st.fixed_dictionaries({"inputs": st.lists(_tensor, max_size=1)}, optional={"outputs": _json, "id": _json}),
    st.fixed_dictionaries(
        {"data": st.fixed_dictionaries({}, optional={"names": _json, "ndarray": _json, "tensor": _json})}
    ),
)


@fuzz_settings(120)
@given(
    body=_bodies,
    path=st.sampled_from(
        ["/v1/models/digits:predict", "/v2/models/digits/infer", "/seldon/digits/api/v0.1/predictions"]
    ),
)
def test_fuzzed_bodies_never_answer_500(sklearn_server: Served, body: Any, path: str) -> None:
    status, answer = sklearn_server.request("POST", path, body)
    assert status in (200, 400, 413), (status, answer)
    if status != 200:
        assert ("error" in answer) if "seldon" not in path else (answer["status"]["status"] == "FAILURE")


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x: Any) -> Any:
        return self.fc(x)


def test_pytorch_torchscript_and_state_dict(tmp_path: Path, digits: Any) -> None:
    rows = digits[2].astype(np.float32)
    torch.manual_seed(0)
    net = _Net().eval()
    with torch.no_grad():
        expected = net(torch.from_numpy(rows)).numpy()
    script_dir, state_dir = tmp_path / "script", tmp_path / "state"
    script_dir.mkdir()
    state_dir.mkdir()
    torch.jit.trace(net, torch.from_numpy(rows)).save(str(script_dir / "model.pt"))
    torch.save(net.state_dict(), state_dir / "model.pth")
    (state_dir / "netdef.py").write_text(
        "import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(64, 10)\n\n    def forward(self, x):\n        return self.fc(x)\n"
    )
    servers: list[Served] = []
    try:
        servers.append(start("ts", script_dir, "pytorch"))
        servers.append(start("sd", state_dir, "pytorch", module="netdef:Net"))
        for served, name, platform in zip(servers, ("ts", "sd"), ("pytorch_torchscript", "pytorch"), strict=True):
            assert served.request("GET", f"/v2/models/{name}")[1]["platform"] == platform
            status, body = served.request("POST", f"/v1/models/{name}:predict", {"instances": rows.tolist()})
            assert status == 200
            np.testing.assert_allclose(np.array(body["predictions"]), expected, rtol=1e-5, atol=1e-5)
            tensor = {"name": "x", "shape": [20, 64], "datatype": "FP32", "data": rows.ravel().tolist()}
            status, body = served.request("POST", f"/v2/models/{name}/infer", {"inputs": [tensor]})
            out = body["outputs"][0]
            assert (status, out["shape"], out["datatype"]) == (200, [20, 10], "FP32")
            np.testing.assert_allclose(np.array(out["data"]).reshape(20, 10), expected, rtol=1e-5, atol=1e-5)
            status, body = served.request(
                "POST", f"/seldon/{name}/api/v0.1/predictions", {"data": {"ndarray": rows.tolist()}}
            )
            assert status == 200 and body["data"]["names"] == [f"t:{i}" for i in range(10)]
            status, body = served.request("POST", f"/v1/models/{name}:predict", {"instances": [[1.0, 2.0]]})
            assert status == 400 and "refused the input" in body["error"]  # forward's shape error, not a 500
            ints = {"name": "x", "shape": [1, 64], "datatype": "UINT16", "data": [1] * 64}
            status, body = served.request("POST", f"/v2/models/{name}/infer", {"inputs": [ints]})
            assert status == 400 and ("refused the input" in body["error"] or "cannot take" in body["error"])
    finally:
        codes = [stop(served) for served in servers]  # every one stopped before any assertion
    assert codes == [0, 0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--format", "sklearn"], "no scikit-learn model in"),
        (["--format", "pytorch"], "no PyTorch model in"),
        (
            ["--format", "pytorch", "--module", "nosuchmodule:Net", "--touch", "model.pt"],
            "cannot import nosuchmodule",
        ),
        (["--format", "sklearn", "--touch", "model.joblib"], "cannot load"),
        (["--format", "sklearn", "--touch", "model.joblib", "--touch", "model.pkl"], "more than one model file"),
        (["--format", "onnx"], "invalid choice"),
        (["--format", "sklearn", "--max-batch-size", "0"], "--max-batch-size 0: expected 1 to"),
        (["--format", "sklearn", "--max-batch-wait-ms", "-1"], "--max-batch-wait-ms -1.0: expected 0 to"),
    ],
)
def test_a_model_that_cannot_load_exits_2_with_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    while "--touch" in args:
        at = args.index("--touch")
        (tmp_path / args[at + 1]).write_bytes(b"not a model")
        del args[at : at + 2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "millpond.serving.model_server",
            "--name",
            "m",
            "--model-dir",
            str(tmp_path),
            "--port",
            "0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr


def test_ready_line_parsing() -> None:
    ready = model_server.parse_ready_line("millpond-model-server ready name=m url=http://127.0.0.1:9\n")
    assert ready == model_server.Ready("m", "http://127.0.0.1:9")
    for line in (
        "",
        "INFO: started",
        "millpond-model-server ready name=m",
        "millpond-model-server ready url=ftp://x",
    ):
        assert model_server.parse_ready_line(line) is None


def test_sigterm_ends_the_server_cleanly(digits: Any) -> None:
    served = start("d", digits[0], "sklearn")
    assert served.request("GET", "/v1/models/d")[0] == 200
    started = time.monotonic()
    assert stop(served) == 0
    assert time.monotonic() - started < 5
    assert served.proc.stderr is not None and "Traceback" not in served.proc.stderr.read()
    with pytest.raises(OSError):
        served.request("GET", "/v1/models/d")


def test_an_unfitted_model_cannot_load_exits_2_naming_it(tmp_path: Path) -> None:
    joblib.dump(LogisticRegression(), tmp_path / "model.joblib")  # never fitted: every predict would fail
    done = subprocess.run([*model_server.command("m", tmp_path, "sklearn"), "--port", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "LogisticRegression that was never fitted" in line, done.stderr


def test_a_model_that_fails_on_input_it_accepted_answers_500_in_each_protocols_shape(tmp_path: Path) -> None:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = np.random.default_rng(0).random((20, 3))
    fitted_last = LogisticRegression().fit(rows, np.arange(20) % 2)
    # its last step is fitted (check_is_fitted passes), its scaler never was: predict fails whatever the input
    joblib.dump(make_pipeline(StandardScaler(), fitted_last), tmp_path / "model.joblib")
    served = start("p", tmp_path, "sklearn")
    try:
        status, body = served.request("POST", "/v1/models/p:predict", {"instances": [[1.0, 2.0, 3.0]]})
        assert status == 500 and "StandardScaler instance is not fitted yet" in body["error"]
        tensor = {"name": "input-0", "shape": [1, 3], "datatype": "FP64", "data": [1.0, 2.0, 3.0]}
        status, body = served.request("POST", "/v2/models/p/infer", {"inputs": [tensor]})
        assert status == 500 and "not fitted" in body["error"]
        status, body = served.request("POST", "/api/v0.1/predictions", {"data": {"ndarray": [[1.0, 2.0, 3.0]]}})
        assert status == 500 and body["status"]["reason"] == "MICROSERVICE_INTERNAL_ERROR"
        assert body["status"]["code"] == 500 and "not fitted" in body["status"]["info"]
        assert served.request("POST", "/v1/models/p:predict", {"instances": "nope"})[0] == 400  # still the client's
    finally:
        stop(served)
