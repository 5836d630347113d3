"""No web page can drive the API: cross-site requests, DNS rebinding, and the token kept out of tasks.

Every check goes over real HTTP to a real server: an in-process uvicorn (``Served``) for the
request rules, ``millpond server`` itself for its options and for what its tasks see, and
Debian's Chromium for a page of another origin that tries what a hostile site would.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import http.client
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl

from tests.server_support import Served, module_home

MILLPOND = Path(sys.executable).parent / "millpond"
FLUID = "/apis/millpond/v1"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "security")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    served = Served()
    yield served
    served.stop()


def call(port: int, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """One request with exactly these headers (``Host`` included when given), and its JSON answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        names = {name.lower() for name in headers or {}}
        connection.putrequest(method, path, skip_host="host" in names, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read().decode()
        return response.status, json.loads(text) if text.startswith(("{", "[")) else {"text": text}
    finally:
        connection.close()


def attack_manifests(name: str, source: Path, marker: Path) -> str:
    """A Dataset over a local folder and a DataProcess whose script would write ``marker``."""
    return textwrap.dedent(f"""\
        apiVersion: data.fluid.io/v1alpha1
        kind: Dataset
        metadata: {{name: {name}}}
        spec:
          mounts: [{{mountPoint: "local://{source}", name: data}}]
        ---
        apiVersion: data.fluid.io/v1alpha1
        kind: DataProcess
        metadata: {{name: {name}-script}}
        spec:
          dataset: {{name: {name}, namespace: default, mountPath: /data}}
          processor:
            script: {{image: debian, command: [bash], source: "touch {marker}"}}
        """)


def stored(server: Served, kind: str, name: str) -> bool:
    status, answer = call(server.port, "GET", f"{FLUID}/{kind}/{name}")
    assert status in (200, 404), answer
    return status == 200


# --- cross-site requests -----------------------------------------------------------------------

def test_simple_cross_site_bodies_cannot_apply_manifests(server: Served, tmp_path: Path) -> None:
    """text/plain, a form, or a body with no type: what a page sends anywhere without a preflight."""
    marker = tmp_path / "pwned"
    for number, content_type in enumerate(("text/plain", "text/plain;charset=UTF-8",
                                           "application/x-www-form-urlencoded", None)):
        name = f"simple-{number}"
        headers = {"Content-Type": content_type} if content_type else {}
        status, answer = call(server.port, "POST", f"{FLUID}/fluid/apply",
                              attack_manifests(name, tmp_path, marker).encode(), headers)
        assert status == 415, (content_type, answer)
        assert answer["code"] == 3 and "application/json" in answer["message"], answer  # KFP's shape, INVALID_ARGUMENT
        assert not stored(server, "datasets", name) and not stored(server, "dataprocesses", f"{name}-script")
    assert not marker.exists()
    # the same manifests as YAML (which a browser cannot send cross-site without a preflight) still apply
    status, answer = call(server.port, "POST", f"{FLUID}/fluid/apply",
                          attack_manifests("yaml-ok", tmp_path, tmp_path / "ok").encode().split(b"---")[0],
                          {"Content-Type": "application/yaml"})
    assert status == 200 and answer["items"][0]["action"] == "created", answer
    deleted = call(server.port, "DELETE", f"{FLUID}/datasets/yaml-ok", headers={"Content-Type": "application/json"})
    assert deleted[0] == 200


def test_state_changing_kfp_routes_refuse_simple_bodies(server: Served) -> None:
    body = json.dumps({"display_name": "plain-text"}).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        status, answer = call(server.port, "POST", "/apis/v2beta1/experiments", body, {"Content-Type": content_type})
        assert status == 415, answer
    status, answer = call(server.port, "POST", "/apis/v2beta1/experiments", body, {})  # a body with no type
    assert status == 415, answer
    status, _ = call(server.port, "GET", "/apis/v2beta1/experiments?filter=" + urllib.parse.quote(json.dumps(
        {"predicates": [{"key": "display_name", "operation": "EQUALS", "string_value": "plain-text"}]})))
    assert status == 200


def test_a_foreign_origin_cannot_change_anything(server: Served) -> None:
    client = kfp.Client(host=server.url)
    experiment = client.create_experiment("origin-target")  # kfp.Client: JSON, no Origin
    archive = f"/apis/v2beta1/experiments/{experiment.experiment_id}:archive"
    for origin in ("http://evil.example", "null", f"http://localhost:{server.port + 1}", f"https://127.0.0.1:{server.port}x"):
        status, answer = call(server.port, "POST", archive, headers={"Origin": origin})  # no body: a simple request
        assert status == 403, (origin, answer)
        assert answer["code"] == 7 and "cross-origin" in answer["message"], answer
        status, answer = call(server.port, "DELETE", f"/apis/v2beta1/experiments/{experiment.experiment_id}",
                              headers={"Origin": origin, "Content-Type": "application/json"})
        assert status == 403, answer
    assert client.get_experiment(experiment.experiment_id).storage_state == "AVAILABLE"
    # the server's own page (Origin = the Host it was sent to) may
    status, answer = call(server.port, "POST", archive, headers={"Origin": server.url})
    assert status == 200, answer
    assert client.get_experiment(experiment.experiment_id).storage_state == "ARCHIVED"


def test_an_origin_of_another_scheme_or_port_is_another_origin(server: Served) -> None:
    """An origin is scheme, host and port (RFC 6454): https://127.0.0.1:PORT is not this http:// server."""
    def create(name: str, origin: str) -> tuple[int, dict[str, Any]]:
        return call(server.port, "POST", "/apis/v2beta1/experiments", json.dumps({"display_name": name}).encode(),
                    {"Origin": origin, "Content-Type": "application/json"})

    for number, origin in enumerate((f"https://127.0.0.1:{server.port}", "http://127.0.0.1",
                                     f"ws://127.0.0.1:{server.port}", f"http://127.0.0.1:{server.port}/",
                                     f"http://u@127.0.0.1:{server.port}", f"http://127.0.0.1:0{server.port}9")):
        status, answer = create(f"other-scheme-{number}", origin)
        assert status == 403 and "cross-origin" in answer["message"], (origin, answer)
    status, listed = call(server.port, "GET", "/apis/v2beta1/experiments?page_size=200")
    assert status == 200
    assert not [e for e in listed.get("experiments", []) if e["display_name"].startswith("other-scheme-")], listed
    status, answer = create("same-scheme", f"http://127.0.0.1:{server.port}")  # the server's own page
    assert status == 200, answer


def test_the_bearer_scheme_is_case_insensitive(home: Path) -> None:
    """RFC 7235 section 2.1: the auth scheme's name is case-insensitive; the token itself is not."""
    served = Served(token="Tok-en")
    try:
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            status, answer = call(served.port, "GET", "/apis/v2beta1/healthz",
                                  headers={"Authorization": f"{scheme} Tok-en"})
            assert status == 200, (scheme, answer)
        for value in ("bearer tok-en", "Bearer", "Bearer  ", "Basic Tok-en", "BearerTok-en", "Bearer Tok-en x", ""):
            status, answer = call(served.port, "GET", "/apis/v2beta1/healthz", headers={"Authorization": value})
            assert status == 401, (value, answer)
    finally:
        served.stop()


def test_an_inference_services_own_port_compares_scheme_and_port_too(home: Path) -> None:
    """The own port shares hosts.py's check: another scheme or port of a loopback name is another site."""
    from millpond.serving import front

    handle = front.start(0, "team", "origins")
    try:
        def predict(origin: str) -> int:
            connection = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=60)
            try:
                connection.request("POST", "/v1/models/origins:predict", b'{"instances": [[1]]}',
                                   {"Origin": origin, "Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                return response.status
            finally:
                connection.close()

        for origin in (f"https://127.0.0.1:{handle.port}", f"http://localhost:{handle.port + 1}", "http://localhost"):
            assert predict(origin) == 403, origin
        assert predict(f"http://localhost:{handle.port}") == 503  # passes the check; no replica is ready
    finally:
        handle.stop()


def test_kfp_client_calls_still_pass(server: Served) -> None:
    """kfp_server_api sends application/json on every call, with an empty body on :terminate/:archive."""
    client = kfp.Client(host=server.url)
    experiment = client.create_experiment("kfp-still-works")
    client.archive_experiment(experiment.experiment_id)
    client.unarchive_experiment(experiment.experiment_id)
    result = client.create_run_from_pipeline_func(hello, experiment_name="kfp-still-works", arguments={"name": "a"})
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    client.terminate_run(result.run_id)  # of a finished run: nothing to do, but the call passes
    client.archive_run(result.run_id)
    client.delete_run(result.run_id)
    client.delete_experiment(experiment.experiment_id)


# --- DNS rebinding -----------------------------------------------------------------------------

def test_the_host_header_must_name_this_server(server: Served) -> None:
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"[::1]:{server.port}", "LOCALHOST"):
        status, answer = call(server.port, "GET", "/apis/v2beta1/healthz", headers={"Host": host})
        assert status == 200, (host, answer)
    for host in (f"evil.example:{server.port}", "evil.example", "127.0.0.1.evil.example", "", "localhost.:x:y"):
        for method, path in (("GET", "/apis/v2beta1/healthz"), ("GET", "/"), ("GET", "/ui/app.js"),
                             ("GET", f"{FLUID}/datasets"), ("POST", "/apis/v2beta1/experiments")):
            headers = {"Host": host, "Content-Type": "application/json"}
            status, answer = call(server.port, method, path, b'{"display_name": "rebound"}', headers)
            assert status == 400, (host, path, answer)
            assert answer["code"] == 3 and "Host" in answer["message"], answer


# --- millpond server: token sources, --allowed-host, and what tasks see ------------------------

class ServerProcess:
    """``millpond server`` in a process of its own, over ``home``."""

    def __init__(self, home: Path, args: list[str], env: dict[str, str] | None = None,
                 token: str | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home.parent / f"server-{self.port}.log"
        environment = {**os.environ, "MILLPOND_HOME": str(home), **(env or {})}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([str(MILLPOND), "server", "--port", str(self.port), *args],
                                            env=environment, stdout=log, stderr=subprocess.STDOUT)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + 60
        while True:
            try:
                if call(self.port, "GET", "/apis/v2beta1/healthz", headers=headers)[0] == 200:
                    break
            except OSError:
                pass
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)


@dsl.component
def hello(name: str) -> str:
    return "hello " + name


@dsl.component
def show_environment() -> str:
    import os

    for key, value in sorted(os.environ.items()):
        print(f"{key}={value}")
    return ",".join(sorted(os.environ))


@dsl.pipeline(name="show-environment")
def environment_pipeline() -> str:
    return show_environment().output


def test_tasks_never_see_the_servers_token(tmp_path: Path) -> None:
    token = "tok-" + secrets.token_hex(16)
    home = tmp_path / "home"
    served = ServerProcess(home, ["--allowed-host", "pond.example"], env={"MILLPOND_TOKEN": token}, token=token)
    try:
        client = kfp.Client(host=served.url, existing_token=token)
        result = client.create_run_from_pipeline_func(environment_pipeline, experiment_name="env")
        run = client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=0.2)
        assert run.state == "SUCCEEDED", run.error
        auth = {"Authorization": f"Bearer {token}"}
        status, graph = call(served.port, "GET", f"/ui-api/runs/{result.run_id}/graph", headers=auth)
        node = next(n for n in graph["nodes"] if n["name"] == "show-environment")
        names = node["outputs"]["parameters"]["Output"].split(",")
        assert "PATH" in names and "MILLPOND_TOKEN" not in names, names
        status, log = call(
            served.port, "GET", f"/ui-api/runs/{result.run_id}/tasks/{node['task_id']}/log", headers=auth
        )
        assert status == 200 and "PATH=" in log["text"], log
        assert token not in log["text"]
        engine_logs = "".join(p.read_text(errors="replace") for p in (home / "logs").rglob("*") if p.is_file())
        assert token not in engine_logs
        # --allowed-host adds a name; others are still refused
        assert call(served.port, "GET", "/apis/v2beta1/healthz", headers={"Host": "pond.example:80", **auth})[0] == 200
        assert call(served.port, "GET", "/apis/v2beta1/healthz", headers={"Host": "evil.example", **auth})[0] == 400
    finally:
        served.stop()


def test_millpond_run_keeps_millpond_token_from_its_tasks(tmp_path: Path) -> None:
    """A user with MILLPOND_TOKEN in their shell (for a client) runs a pipeline: its tasks do not get it."""
    from kfp import compiler

    from millpond.store.runs import RunStore

    package = tmp_path / "env.yaml"
    compiler.Compiler().compile(environment_pipeline, str(package))
    home = tmp_path / "home"
    token = "tok-" + secrets.token_hex(16)
    result = subprocess.run([str(MILLPOND), "run", str(package), "-o", "json"], capture_output=True, text=True,
                            check=False, timeout=300,
                            env={**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_TOKEN": token})
    assert result.returncode == 0, result.stderr
    store = RunStore(f"sqlite:///{home / 'millpond.db'}")
    (run, _), = store.list_runs()
    task = next(t for t in store.list_tasks(run.id) if t.name == "show-environment")
    names = task.outputs["parameters"]["Output"].split(",")
    assert "PATH" in names and "MILLPOND_TOKEN" not in names, names
    assert token not in Path(task.log_path).read_text()


def test_token_file_and_the_warning_for_token_on_the_command_line(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    token_file.chmod(0o600)
    served = ServerProcess(tmp_path / "home", ["--token-file", str(token_file)], token="from-a-file")
    try:
        assert call(served.port, "GET", "/apis/v2beta1/runs")[0] == 401
        assert call(served.port, "GET", "/apis/v2beta1/runs", headers={"Authorization": "Bearer from-a-file"})[0] == 200
        assert "warning" not in served.log()
    finally:
        served.stop()
    served = ServerProcess(tmp_path / "home", ["--token", "on-the-line"], token="on-the-line")
    try:
        assert "warning: --token is visible to other users" in served.log()
        assert call(served.port, "GET", "/apis/v2beta1/runs", headers={"Authorization": "Bearer on-the-line"})[0] == 200
    finally:
        served.stop()


def test_bad_token_options_are_one_error_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for args, expected in ((["--token-file", str(tmp_path / "missing")], "cannot read it"),
                           (["--token-file", str(empty)], "the file is empty"),
                           (["--token", "a", "--token-file", str(empty)], "not both")):
        result = subprocess.run(
            [str(MILLPOND), "server", "--port", "1", *args], capture_output=True, text=True, check=False,
            env={**os.environ, "MILLPOND_HOME": str(tmp_path / "home")}, timeout=60,
        )
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr


def test_a_port_in_use_is_one_error_line_and_nothing_starts(tmp_path: Path) -> None:
    """Bound before anything starts: no 'startup complete', no uvicorn ERROR, no record for ``millpond ps``."""
    home = tmp_path / "home"
    environment = {**os.environ, "MILLPOND_HOME": str(home)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([str(MILLPOND), "server", "--port", str(port)], capture_output=True, text=True,
                                check=False, env=environment, timeout=120)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"127.0.0.1:{port}" in lines[0], result.stderr
    assert "in use" in lines[0] and result.stdout == "", result
    assert not list((home / "processes").glob("*"))  # nothing registered (a missing folder globs nothing)
    assert not (home / "millpond.db").exists()  # no application was created over the home
    for port_text in ("70000", "-1"):
        result = subprocess.run([str(MILLPOND), "server", "--port", port_text], capture_output=True, text=True,
                                check=False, env=environment, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --port"), result


# --- a hostile page in a real browser ----------------------------------------------------------

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def test_a_page_of_another_origin_cannot_act_in_chromium(server: Served, tmp_path: Path) -> None:
    from tests.ui.test_server_ui import chromium_page

    client = kfp.Client(host=server.url)
    experiment = client.create_experiment("browser-target")
    marker = tmp_path / "pwned-by-browser"
    site = tmp_path / "site"
    site.mkdir()
    form_yaml = attack_manifests("csrf-form", tmp_path, marker) + "#"  # a text/plain form sends NAME=VALUE
    blob_yaml = attack_manifests("csrf-blob", tmp_path, marker)
    (site / "attack.html").write_text(f"""<!doctype html>
<html><body>
<form id="form" method="POST" enctype="text/plain" target="sink" action="{server.url}{FLUID}/fluid/apply">
  <textarea name="{form_yaml.replace('"', '&quot;')}"></textarea>
</form>
<iframe name="sink" id="sink"></iframe>
<script>
const target = {json.dumps(server.url)};
async function attack() {{
  const sent = [];
  for (const [url, init] of [
    [target + "{FLUID}/fluid/apply", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
                                         body: {json.dumps(attack_manifests("csrf-fetch", tmp_path, marker))}}}],
    [target + "{FLUID}/fluid/apply", {{method: "POST", mode: "no-cors",
                                         body: new Blob([{json.dumps(blob_yaml)}])}}],
    [target + "/apis/v2beta1/experiments/{experiment.experiment_id}:archive", {{method: "POST", mode: "no-cors"}}],
  ]) {{
    try {{ await fetch(url, init); sent.push("sent"); }} catch (e) {{ sent.push("blocked: " + e); }}
  }}
  return sent;
}}
</script>
</body></html>""")

    def handler(*args, **kwargs):
        return _Quiet(*args, directory=str(site), **kwargs)

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with chromium_page() as (page, errors):
            page.goto(f"http://127.0.0.1:{other.server_address[1]}/attack.html")
            assert page.evaluate("attack()") == ["sent", "sent", "sent"]  # the browser did send them
            with page.expect_response(
                lambda r: r.url.endswith("/fluid/apply") and r.request.method == "POST"
            ) as answer:
                page.evaluate("document.getElementById('form').submit()")
            assert answer.value.request.headers.get("content-type", "").startswith("text/plain")
            assert answer.value.status == 403  # its Origin is refused first (its type would be too)
            assert not errors, errors
    finally:
        other.shutdown()
    for name in ("csrf-fetch", "csrf-blob", "csrf-form"):
        assert not stored(server, "datasets", name), name
        assert not stored(server, "dataprocesses", f"{name}-script"), name
    assert client.get_experiment(experiment.experiment_id).storage_state == "AVAILABLE"
    assert not marker.exists()


# --- property: an origin is scheme, host and port -----------------------------------------------

def test_an_origin_matches_only_its_own_scheme_host_and_port() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from millpond.hosts import loopback_only_problem, same_origin

    names = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "evil.example", "LOCALHOST", ""])
    ports = st.one_of(st.none(), st.integers(-1, 70_000), st.sampled_from([0, 80, 443, 8888, 65535, 65536, 10**20]))
    schemes = st.sampled_from(["http", "https", "HTTP", "ws", "file", ""])

    def netloc(name: str, port: int | None) -> str:
        return name if port is None else f"{name}:{port}"

    @given(served_scheme=st.sampled_from(["http", "https"]), host=names, host_port=ports, scheme=schemes,
           name=names, port=ports)
    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    def check(served_scheme: str, host: str, host_port: int | None, scheme: str, name: str,
              port: int | None) -> None:
        default = {"http": 80, "https": 443}
        origin = f"{scheme}://{netloc(name, port)}"
        expected_port = host_port if host_port is not None else default[served_scheme]
        given_port = port if port is not None else default.get(scheme.lower())
        same = (scheme.lower() == served_scheme and bool(name) and name.lower() == host.lower()
                and 0 <= expected_port <= 65535 and given_port == expected_port)
        assert same_origin(origin, served_scheme, netloc(host, host_port)) == same, origin
        if same and name.lower().strip("[]") in ("127.0.0.1", "localhost", "::1"):
            assert loopback_only_problem(netloc(host, host_port), origin, served_scheme) is None
        elif scheme.lower() != served_scheme:
            assert loopback_only_problem(netloc(host, host_port), origin, served_scheme) is not None

    check()
