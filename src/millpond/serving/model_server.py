"""One process serving one model with KServe v1, the Open Inference Protocol v2 and Seldon v0.1.

    python -m millpond.serving.model_server --name N --model-dir DIR --format sklearn|pytorch \
        [--module mod:Class] [--model-version V] [--port P] [--host 127.0.0.1] [--max-body-bytes B]
        [--loop auto|asyncio|uvloop] [--http auto|h11|httptools] [--max-batch-size N] [--max-batch-wait-ms MS]

What a supervisor (millpond server's model controller) relies on:

- the model loads *before* the port opens; a model that cannot load ends the process with exit
  status 2 and one line ``error: WHY`` on stderr (bad flags too), so a restart loop can tell a
  broken model (do not retry) from a crash;
- once loaded and listening it prints one line to stdout,
  ``millpond-model-server ready name=N url=http://HOST:PORT`` (``--port 0`` picks a free port;
  the line names the one taken), and flushes it;
- SIGTERM or SIGINT stops it gracefully (uvicorn finishes requests in flight) with exit status 0;
- concurrent requests to the model share one ``predict`` (``serving.batching``: up to
  ``--max-batch-size`` requests, 32; 1 turns it off), and the inference POSTs skip FastAPI's routing
  (``protocols.direct``);
- ``GET /metrics`` answers Prometheus' text format (``serving.metrics``: KServe's
  ``request_predict_seconds`` and requests counted by protocol and status).

The socket is bound here rather than by uvicorn so that the port is known, and taken, before the
ready line is printed.
"""

from __future__ import annotations

import argparse
import gc
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

import uvicorn

from millpond.errors import MillpondError, exit_code_of
from millpond.serving.batching import MAX_BATCH
from millpond.serving.metrics import MetricsApp, ServerMetrics, TimedModel
from millpond.serving.models import FORMATS, load_model
from millpond.serving.protocols import ModelRepository, protocols_app
from millpond.serving.protocols.tensors import MAX_BODY_BYTES

READY_PREFIX = "millpond-model-server ready"
MAX_BODY_LIMIT = 2**30  # the largest --max-body-bytes: one request's body, read whole before it is parsed
MAX_BATCH_LIMIT = 4096  # the largest --max-batch-size
MAX_BATCH_WAIT_MS = 1000.0  # the longest --max-batch-wait-ms: a request's wait is added to its latency


@dataclass(frozen=True)
class Ready:
    """What a model server's ready line says: the model's name and the URL it listens on."""

    name: str
    url: str


def command(
    name: str,
    model_dir: Path,
    fmt: str,
    *,
    module: str | None = None,
    version: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    python: str = sys.executable,
) -> list[str]:
    """The command line that serves ``model_dir`` (what a supervisor starts, and restarts)."""
    argv = [python, "-m", "millpond.serving.model_server", "--name", name, "--model-dir", str(model_dir)]
    argv += ["--format", fmt, "--host", host, "--port", str(port)]
    if module:
        argv += ["--module", module]
    if version:
        argv += ["--model-version", version]
    return argv


def parse_ready_line(line: str) -> Ready | None:
    """The ``Ready`` a line of the server's stdout announces, or None for any other line."""
    if not line.startswith(READY_PREFIX + " "):
        return None
    fields = dict(part.split("=", 1) for part in line[len(READY_PREFIX) :].split() if "=" in part)
    if "name" not in fields or not fields.get("url", "").startswith("http://"):
        return None
    return Ready(fields["name"], fields["url"])


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, like every millpond command, not usage + error
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m millpond.serving.model_server", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the model's name in every protocol's paths")
    parser.add_argument("--model-dir", required=True, type=Path, help="directory holding the model file")
    parser.add_argument("--format", required=True, choices=FORMATS, help="the model's framework")
    parser.add_argument("--module", help="pytorch state dict: its nn.Module class as MODULE:CLASS")
    parser.add_argument("--model-version", help="the version OIP metadata reports and /versions/V accepts")
    parser.add_argument("--method", choices=("predict", "predict_proba", "decision_function"),
                        help="sklearn: the estimator's method that answers (predict; Seldon's SKLEARN_SERVER: "
                             "predict_proba)")
    parser.add_argument("--seldon-unit", metavar="UNIT=IMAGE",
                        help="answer Seldon's protocol as Seldon's prepackaged server for graph unit UNIT does")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port (named in the ready line)")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="larger requests get 413")
    parser.add_argument("--max-batch-size", type=int, default=MAX_BATCH,
                        help="requests that arrive together share one predict, up to this many (1: each alone)")
    parser.add_argument("--max-batch-wait-ms", type=float, default=0.0,
                        help="how long the first request of a batch waits for more (0: only for those already "
                             "read, the next turn of the event loop)")
    parser.add_argument("--access-log", action="store_true", help="log every request (off: it costs throughput)")
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                        help="event loop (auto: uvloop when installed)")
    parser.add_argument("--http", choices=("auto", "h11", "httptools"), default="auto",
                        help="HTTP parser (auto: httptools when installed)")
    return parser


def bind_listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit TCP_NODELAY on Linux. Without it uvicorn's h11 protocol, which
    # writes a response's headers and body separately, meets the client's delayed ACK: 40 ms a request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise MillpondError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        _parser().error(f"--port {args.port}: expected 0 to 65535")
    if not 1024 <= args.max_body_bytes <= MAX_BODY_LIMIT:
        _parser().error(f"--max-body-bytes {args.max_body_bytes}: from 1024 to {MAX_BODY_LIMIT} (a body is held in "
                        "memory while it is parsed)")
    if not 1 <= args.max_batch_size <= MAX_BATCH_LIMIT:
        _parser().error(f"--max-batch-size {args.max_batch_size}: expected 1 to {MAX_BATCH_LIMIT}")
    if not 0 <= args.max_batch_wait_ms <= MAX_BATCH_WAIT_MS:
        _parser().error(f"--max-batch-wait-ms {args.max_batch_wait_ms}: expected 0 to {MAX_BATCH_WAIT_MS}")
    try:
        model = load_model(args.name, args.model_dir, args.format, args.module, args.model_version, args.method)
        sock = bind_listener(args.host, args.port)
    except MillpondError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exit_code_of(exc)
    metrics = ServerMetrics()
    unit = tuple(args.seldon_unit.split("=", 1)) if args.seldon_unit and "=" in args.seldon_unit else None
    repo = ModelRepository({args.name: TimedModel(model, metrics)}, max_body_bytes=args.max_body_bytes,
                           seldon_unit=(unit[0], unit[1]) if unit else None, max_batch=args.max_batch_size,
                           max_batch_wait=args.max_batch_wait_ms / 1000)
    host, port = sock.getsockname()[:2]
    url_host = f"[{host}]" if ":" in host else host

    def announce() -> None:
        print(f"{READY_PREFIX} name={args.name} url=http://{url_host}:{port}", flush=True)

    app = MetricsApp(protocols_app(repo, on_ready=announce), metrics)
    config = uvicorn.Config(app, log_level="warning", access_log=args.access_log, lifespan="on", loop=args.loop,
                            http=args.http)
    # uvicorn captures SIGTERM/SIGINT for its graceful shutdown, then restores the handlers it found
    # and raises the signal again: with the default handlers that would end a clean stop as "killed
    # by SIGTERM" (or a KeyboardInterrupt traceback). Handlers that do nothing make it exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stopped)
    # What is alive now (the model, the frameworks, the app) lives as long as the process: out of the
    # collector's sight, a full collection no longer walks its ~130,000 objects (80 ms here) in a request.
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _stopped(signum: int, frame: FrameType | None) -> None:
    """Runs when uvicorn re-raises the signal it stopped for: the server has already shut down."""
    del signum, frame


if __name__ == "__main__":
    raise SystemExit(main())
