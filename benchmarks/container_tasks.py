"""Tasks in their images: millpond's container task beside a bare ``podman run``, a 50-task chain
in containers beside kfp.local's DockerRunner and beside millpond's host mode, and an image pull.

    .venv/bin/python benchmarks/container_tasks.py              # all of it (~3 min on 2 cores)
    .venv/bin/python benchmarks/container_tasks.py --quick      # the per-task overhead only

Measured in one run, on one machine, with one image (``localhost/millpond-test/python:3.11``, built
from Debian packages by the tests' support when it is missing; no image registry is reachable here):

1. Per-task overhead: one process ``sh -c 'echo hi'`` in the image, as millpond's runner starts it
   (``LocalRunner`` with ``in_image``: the runtime's words, labels, the same runtime flags, removal
   when stopped) beside a bare ``podman run --rm --network host`` of the same command with the same
   runtime flags; median of ``--repeat``. Goal (issue 31): at most 1.2x the bare run.
2. A chain of ``--tasks`` container components (each adds one to a number in a file), compiled by
   kfp: ``millpond run --runtime container`` and ``--runtime host`` (whole commands, fresh homes),
   beside ``kfp.local.DockerRunner`` on the same pipeline, talking to Docker's own daemon (Debian's
   ``docker.io``, started on a private socket with the image loaded from Podman's store) when
   ``dockerd`` is installed, else to Podman's Docker-compatible API (``podman system service``).
3. Pulling a ~300 MB image from a local registry (Debian's docker-registry on loopback) into a store
   without it: ``millpond images pull`` beside a bare ``podman pull``.
"""


import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.containers_support: the image and the registry, as the tests make them
BIN = Path(sys.executable).parent
# Each step adds one to its input. It makes its output's folder itself: kfp.local's DockerRunner does not (the
# KFP launcher and millpond do), and without it the step fails while kfp.local reports SUCCESS (it reads no exit
# status from a container that was already removed).
ADD_ONE = 'mkdir -p "$(dirname "$1")" && echo $(( $0 + 1 )) > "$1"'


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def overhead(image: str, repeat: int) -> tuple[float, float, float]:
    """(millpond container task, bare podman run, host task) medians in ms."""
    from millpond.runners.base import InImage, ProcessSpec
    from millpond.runners.containers.runtimes import find
    from millpond.runners.local import LocalRunner

    runtime = find("podman")
    assert not isinstance(runtime, str), runtime
    runner = LocalRunner()
    bare_argv = runtime.argv("run", "--rm", "--init", "--network", "host", "--pull", "never",
                             *runtime.run_flags(), image, "sh", "-c", "echo hi")
    ours, bare, host = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for _ in range(repeat):
            spec = ProcessSpec(argv=["sh", "-c", "echo hi"], env=dict(os.environ), cwd=work,
                               log_path=work / "task.log", in_image=InImage(runtime, image))
            started = time.perf_counter()
            result = runner.run(spec, threading.Event())
            ours.append((time.perf_counter() - started) * 1000)
            assert result.exit_code == 0, (work / "task.log").read_text()
            started = time.perf_counter()
            subprocess.run(bare_argv, check=True, capture_output=True)
            bare.append((time.perf_counter() - started) * 1000)
            spec = ProcessSpec(argv=["sh", "-c", "echo hi"], env=dict(os.environ), cwd=work, log_path=work / "host.log")
            started = time.perf_counter()
            runner.run(spec, threading.Event())
            host.append((time.perf_counter() - started) * 1000)
    return _median(ours), _median(bare), _median(host)


def chain_pipeline(image: str, tasks: int, out: Path) -> Path:
    from kfp import compiler, dsl

    @dsl.container_component
    def add_one(x: int, y: dsl.OutputPath(int)):  # type: ignore[valid-type]
        return dsl.ContainerSpec(image=image, command=["sh", "-c", ADD_ONE], args=[x, y])

    @dsl.pipeline(name="container-chain")
    def chain(start: int = 0):
        previous = add_one(x=start)
        for _ in range(tasks - 1):
            previous = add_one(x=previous.output)

    path = out / "chain.yaml"
    compiler.Compiler().compile(chain, str(path))
    return path


def millpond_chain(pipeline: Path, runtime: str, extra_env: dict[str, str] | None = None) -> float:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "MILLPOND_HOME": home, **(extra_env or {})}
        started = time.perf_counter()
        done = subprocess.run([str(BIN / "millpond"), "run", "--runtime", runtime, "--no-cache", str(pipeline)],
                              env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"millpond run --runtime {runtime} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return seconds


def kfp_local_chain(image: str, tasks: int, socket_path: str) -> float | str:
    """kfp.local's DockerRunner over Podman's Docker API; the reason when it cannot run here."""
    try:
        import docker  # noqa: F401  (kfp.local's DockerRunner needs the Docker SDK: the bench extra)
    except ImportError:
        return "the Docker SDK is not installed (pip install -e '.[bench]')"
    script = f"""
import time
from kfp import dsl, local
local.init(runner=local.DockerRunner())
@dsl.container_component
def add_one(x: int, y: dsl.OutputPath(int)):
    return dsl.ContainerSpec(image={image!r}, command=["sh", "-c", {ADD_ONE!r}], args=[x, y])
@dsl.pipeline(name="container-chain")
def chain(start: int = 0):
    previous = add_one(x=start)
    for _ in range({tasks} - 1):
        previous = add_one(x=previous.output)
started = time.perf_counter()
chain()
print("RESULT", time.perf_counter() - started)
"""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "DOCKER_HOST": f"unix://{socket_path}"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if done.returncode != 0 or "RESULT" not in done.stdout:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return "kfp.local failed: " + (lines[-1] if lines else f"exit {done.returncode}")
    return seconds


def docker_daemon(runtime_argv: list[str], image: str, folder: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    """Docker's own daemon (Debian's docker.io) on a private socket and data root, holding ``image`` (loaded from
    Podman's store): None when dockerd is not installed. No iptables rules and no bridge: the steps need no network."""
    if shutil.which("dockerd") is None:
        return None
    path = str(folder / "docker.sock")
    daemon = subprocess.Popen(["dockerd", "--data-root", str(folder / "docker"), "--exec-root", str(folder / "exec"),
                               "--pidfile", str(folder / "docker.pid"), "-H", f"unix://{path}", "--iptables=false",
                               "--bridge=none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_socket(path)
    saved = subprocess.Popen([*runtime_argv, "save", image], stdout=subprocess.PIPE)
    subprocess.run(["docker", "load", "-q"], stdin=saved.stdout, env={**os.environ, "DOCKER_HOST": f"unix://{path}"},
                   check=True, capture_output=True)
    saved.wait()
    return daemon, path


def _wait_for_socket(path: str) -> None:
    for _ in range(100):
        if os.path.exists(path):
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(path)
                    return
                except OSError:
                    pass
        time.sleep(0.1)


def podman_service(runtime_argv: list[str], ulimits: list[str], folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Podman's Docker-compatible API on a socket, with the ulimits this machine needs as its defaults (the Docker
    SDK's containers get no ``--ulimit`` flags: without them runc cannot start one here)."""
    path = str(folder / "podman.sock")
    conf = folder / "containers.conf"
    pairs = zip(ulimits[::2], ulimits[1::2], strict=True)
    limits = ", ".join(f'"{value}"' for flag, value in pairs if flag == "--ulimit")
    conf.write_text(f"[containers]\ndefault_ulimits = [{limits}]\n")
    service = subprocess.Popen([*runtime_argv, "system", "service", "--time=0", f"unix://{path}"],
                               env={**os.environ, "CONTAINERS_CONF": str(conf)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_socket(path)
    return service, path


def pull(runtime_argv: list[str], image: str, size_mb: int) -> tuple[float, float, float]:
    """(image size MB, millpond images pull s, bare podman pull s): each into a store without the image."""
    from tests import containers_support as support

    big = support.build_image(
        f"localhost/millpond-bench/big:{size_mb}",
        f"FROM {image}\nRUN head -c {size_mb - 150}M /dev/urandom > /opt/filler.bin\n",
    )
    registry = support.start_registry(support.podman())
    try:
        remote = registry.push(big, f"bench/big:{size_mb}")
        env = {**os.environ, **registry.env()}
        auth = Path(registry.folder) / "auth.json"
        auth.write_text(registry.dockerconfigjson())  # the user's registry login, as `podman login` keeps it
        size = subprocess.run([*runtime_argv, "image", "inspect", "--format", "{{.Size}}", big],
                              capture_output=True, text=True, check=True).stdout.strip()

        def timed(argv: list[str], extra: dict[str, str]) -> float:
            """One pull into an empty store of its own (CONTAINERS_STORAGE_CONF): no layer is there already."""
            with tempfile.TemporaryDirectory(dir="/var/tmp") as store:
                conf = Path(store) / "storage.conf"
                conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{store}/graph"\n'
                                f'runroot = "{store}/run"\n')
                started = time.perf_counter()
                done = subprocess.run(argv, env={**env, **extra, "CONTAINERS_STORAGE_CONF": str(conf)},
                                      capture_output=True, text=True)
                seconds = time.perf_counter() - started
                assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
                subprocess.run([*runtime_argv, "rmi", "-af"], env={**env, "CONTAINERS_STORAGE_CONF": str(conf)},
                               capture_output=True)
                return seconds

        with tempfile.TemporaryDirectory() as home:
            ours = timed([str(BIN / "millpond"), "images", "pull", remote], {"MILLPOND_HOME": home,
                                                                             "REGISTRY_AUTH_FILE": str(auth)})
        bare = timed([*runtime_argv, "pull", "--authfile", str(auth), remote], {})
    finally:
        registry.stop()
    return int(size) / 1e6, ours, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="the per-task overhead only")
    args = parser.parse_args()
    from millpond.runners.containers.runtimes import find
    from tests import containers_support as support

    runtime = find("podman")
    if isinstance(runtime, str):
        raise SystemExit(f"podman does not work here: {runtime}")
    image = support.ensure_python_image(runtime)
    print(f"image: {image}; runtime: podman {runtime.version}; {os.cpu_count()} CPUs")

    ours, bare, host = overhead(image, args.repeat)
    print("\n1. one task, `sh -c 'echo hi'` (median of %d, ms)" % args.repeat)
    print(f"   millpond container task {ours:7.0f}   bare podman run {bare:7.0f}   ratio {ours / bare:.2f}x "
          f"(goal <= 1.2x)   host task {host:5.0f}")
    if args.quick:
        return

    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as folder:  # dockerd's exec root may stay busy
        pipeline = chain_pipeline(image, args.tasks, Path(folder))
        in_images = millpond_chain(pipeline, "container")
        on_host = millpond_chain(pipeline, "host")
        started = docker_daemon(runtime.argv(), image, Path(folder))
        peer_name = "Docker " + subprocess.run(["dockerd", "--version"], capture_output=True, text=True).stdout.split(
            ",")[0].replace("Docker version ", "") if started else "Podman's Docker API"
        service, path = started or podman_service(runtime.argv(), runtime.run_flags(), Path(folder))
        try:
            peer = kfp_local_chain(image, args.tasks, path)
            # millpond on the same Docker daemon: the same engine as the peer
            on_docker = millpond_chain(pipeline, "docker", {"DOCKER_HOST": f"unix://{path}"}) if started else None
        finally:
            service.terminate()
            service.wait(30)
    print(f"\n2. a chain of {args.tasks} container components (whole commands, s)")
    peer_text = f"{peer:7.1f}" if isinstance(peer, float) else f"n/a ({peer})"
    ratio = f"{peer / in_images:.2f}x" if isinstance(peer, float) else "n/a"
    print(f"   millpond --runtime container (Podman) {in_images:7.1f}   kfp.local DockerRunner ({peer_name}) "
          f"{peer_text}   kfp.local / millpond {ratio}   millpond --runtime host {on_host:6.1f}")
    if on_docker is not None:
        print(f"   millpond --runtime docker (the peer's daemon) {on_docker:7.1f}   kfp.local / millpond "
              + (f"{peer / on_docker:.2f}x" if isinstance(peer, float) else "n/a"))

    size_mb, ours_s, bare_s = pull(runtime.argv(), image, 300)
    print(f"\n3. pull of a {size_mb:.0f} MB image from a local registry into a store without it (s)")
    print(f"   millpond images pull {ours_s:6.1f}   bare podman pull {bare_s:6.1f}   ratio {ours_s / bare_s:.2f}x")


if __name__ == "__main__":
    main()
