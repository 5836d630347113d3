"""What the container tests stand on, with no image registry reachable: Podman, images made here, a registry.

Loaded as a plugin by tests/conftest.py, so a container test in any area (runs, training, serving,
datasets, tests/containers) asks for the fixtures by name:

- ``podman``: the ContainerRuntime millpond itself would use (``runtimes.probe("podman")``);
- ``python_image``: ``localhost/millpond-test/python:3.11``, Debian 12's Python made by
  ``mmdebstrap --variant=essential --include=python3 bookworm`` from the mirror apt uses here, then
  ``podman import``-ed (~25 s the first time; the tarball is cached, the import redone only when
  the store lacks the image);
- ``busybox_image``: ``localhost/millpond-test/busybox:1``, FROM scratch around Debian's static
  busybox (2 MB, for tests that need a shell but no Python);
- ``registry``: Debian's ``docker-registry`` on a free loopback port with htpasswd credentials, for
  pulls, ``imagePullSecrets`` and ``imagePullPolicy`` (one per xdist worker, stopped at session end).

and calls the helpers: :func:`build_image` (``podman build`` of a Containerfile and its files, rebuilt
only when they change), :func:`dockerconfigjson` (a pull Secret's text), :func:`millpond_containers`
(what is still running of millpond's, for "no container left" assertions).

Everything built is cached: the Debian tarball under ``~/.cache/millpond-tests/containers/``, the
images in Podman's own store, each labelled ``io.millpond.test.inputs=<hash of its inputs>`` (the
recipe, the files, the ids of the images it is FROM), so a changed input rebuilds it and an unchanged
one costs one ``podman image inspect``. A file lock per image keeps xdist workers from building the
same image at once: the second waits and finds it made.

When Podman (or a tool a fixture needs) does not work here the test is skipped with the reason, except
in CI (``CI`` or ``MILLPOND_CI`` set, as .ci/run sets it): there the README's test command installs
them, so their absence fails the test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest
from filelock import FileLock

from millpond.runners.containers import runtimes, sweep
from millpond.runners.containers.command import ENGINE_LABEL
from millpond.runners.containers.runtimes import ContainerRuntime
from tests.kube_sdk_env import cache_root
from tests.s3_server import _die_with_parent
from tests.s3_server import _free_ports as free_ports

RECIPE_VERSION = "1"  # part of every image's inputs: bump it to rebuild every cached image
INPUTS_LABEL = "io.millpond.test.inputs"
PYTHON_IMAGE = "localhost/millpond-test/python:3.11"
BUSYBOX_IMAGE = "localhost/millpond-test/busybox:1"
PYTHON_SUITE = "bookworm"  # Debian 12, whose python3 is 3.11
PYTHON_PACKAGES = ("python3",)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BUILD_TIMEOUT_S = 900.0
COMMAND_TIMEOUT_S = 300.0
REGISTRY_START_S = 30.0
INSTALL_HINT = "bash scripts/setup.sh test installs it"
BUSYBOX_CONTAINERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
CMD ["/bin/sh"]
"""


def required() -> bool:
    """True in CI, where the README's test command installed everything and a missing tool is a failure."""
    return any(os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")
               for name in ("CI", "MILLPOND_CI"))


def unavailable(reason: str) -> NoReturn:
    """Skip the test, saying why; fail it in CI."""
    if required():
        pytest.fail(f"{reason} (CI requires it)")
    pytest.skip(reason)


def cache_dir() -> Path:
    folder = cache_root() / "containers"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _lock(name: str) -> FileLock:
    """One lock file per thing built (an image's tag), across processes and xdist workers."""
    return FileLock(str(cache_dir() / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.lock"))


def podman() -> ContainerRuntime:
    """The Podman runtime millpond uses here; the test is skipped (failed in CI) when Podman does not work."""
    found = runtimes.probe("podman")
    if isinstance(found, str):
        unavailable(found)
    return found


def _run(runtime: ContainerRuntime, *words: str, timeout: float = COMMAND_TIMEOUT_S,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A runtime command that must succeed: a failure fails the test with its output. ``cwd`` defaults to
    the cache folder (conmon may leave an ``oom`` file in the caller's working folder)."""
    argv = runtime.argv(*words)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          cwd=cwd or cache_dir())
    if done.returncode != 0:
        pytest.fail(f"{' '.join(argv[:8])}... exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def image_inputs(runtime: ContainerRuntime, image: str) -> str | None:
    """The inputs hash the image was built with (its INPUTS_LABEL); None when the store has no such image."""
    done = subprocess.run(runtime.argv("image", "inspect", "--format", f'{{{{index .Labels "{INPUTS_LABEL}"}}}}',
                                       image),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.stdout.strip() if done.returncode == 0 else None


def image_id(runtime: ContainerRuntime, image: str) -> str | None:
    done = subprocess.run(runtime.argv("image", "inspect", "--format", "{{.Id}}", image),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.stdout.strip() if done.returncode == 0 else None


def _digest(*parts: str | bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hashed.update(len(data).to_bytes(8, "big") + data)
    return hashed.hexdigest()[:32]


def _forget(runtime: ContainerRuntime, replaced: str | None) -> None:
    """Remove the image a rebuild replaced (now nameless), unless a container or a child image still uses it."""
    if replaced:
        subprocess.run(runtime.argv("rmi", replaced), capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


# -- the Python base image ---------------------------------------------------------------------------------


def debian_mirror(sources_d: Path = Path("/etc/apt/sources.list.d"),
                  sources_list: Path = Path("/etc/apt/sources.list")) -> str:
    """The Debian archive apt uses here: the first ``deb`` source of a release suite (not ``-security`` or
    ``-updates``), from the deb822 ``*.sources`` files or the one-line ``sources.list``; deb.debian.org
    when neither names one."""
    entries: list[tuple[str, list[str]]] = []  # (uri, suites)
    for path in sorted(sources_d.glob("*.sources")) if sources_d.is_dir() else []:
        for stanza in _read(path).split("\n\n"):
            fields = dict(_deb822_fields(stanza))
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                entries += [(uri, fields.get("suites", "").split()) for uri in fields.get("uris", "").split()]
    for line in _read(sources_list).splitlines():
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            entries.append((words[1], [words[2]]))
    for uri, suites in entries:
        if uri.startswith(("http://", "https://")) and any("-" not in suite for suite in suites):
            return uri.rstrip("/")
    return DEFAULT_MIRROR


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _deb822_fields(stanza: str) -> Iterator[tuple[str, str]]:
    """A deb822 stanza's ``Field: value`` pairs (names lower-cased); comments and continuation lines dropped."""
    for line in stanza.splitlines():
        if line.startswith(("#", " ", "\t")) or ":" not in line:
            continue
        name, _, value = line.partition(":")
        yield name.strip().lower(), value.strip()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _debootstrap(tarball: Path, packages: tuple[str, ...] = PYTHON_PACKAGES) -> None:
    """Debian's ``packages`` into ``tarball`` with mmdebstrap (written beside it, renamed when whole)."""
    if shutil.which("mmdebstrap") is None:
        unavailable(f"mmdebstrap is not installed ({INSTALL_HINT})")
    for leftover in tarball.parent.glob("partial-*"):  # of builds killed halfway (their process is gone)
        pid = leftover.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove(leftover)
    partial = tarball.with_name(f"partial-{os.getpid()}-{tarball.name}")  # mmdebstrap writes a tar for a .tar name
    log = tarball.with_suffix(".log")
    argv = ["mmdebstrap", "--variant=essential", f"--include={','.join(packages)}", PYTHON_SUITE,
            str(partial), debian_mirror()]
    try:
        with open(log, "w") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=BUILD_TIMEOUT_S, cwd=cache_dir())
    except subprocess.TimeoutExpired:
        done = None
    if done is None or done.returncode != 0 or not partial.is_file():
        _remove(partial)
        tail = "\n".join(_read(log).splitlines()[-15:])
        unavailable(f"mmdebstrap could not make the image of {', '.join(packages)} (log {log}):\n{tail}")
    partial.rename(tarball)


def ensure_python_image(runtime: ContainerRuntime) -> str:
    """PYTHON_IMAGE in the store, made from the cached tarball (made first when missing)."""
    return ensure_debian_image(runtime, PYTHON_IMAGE, PYTHON_PACKAGES)


def ensure_debian_image(runtime: ContainerRuntime, tag: str, packages: tuple[str, ...]) -> str:
    """``tag``: Debian's ``packages`` (mmdebstrap, essential variant), made once from a cached tarball;
    for images no Containerfile FROM the Python image can make (it has no apt): Open MPI's, say."""
    inputs = _digest(RECIPE_VERSION, "mmdebstrap --variant=essential", PYTHON_SUITE, *packages)
    with _lock(tag):
        if image_inputs(runtime, tag) == inputs:
            return tag
        tarball = cache_dir() / f"debian-{PYTHON_SUITE}-{inputs[:16]}.tar"
        if not tarball.is_file():
            _debootstrap(tarball, packages)
        before = image_id(runtime, tag)
        _run(runtime, "import", "--change", 'CMD ["python3"]', "--change", f"LABEL {INPUTS_LABEL}={inputs}",
             str(tarball), tag, timeout=BUILD_TIMEOUT_S)
        _forget(runtime, before)
    return tag


# -- images built from a Containerfile ---------------------------------------------------------------------


def _bases(containerfile: str) -> list[str]:
    """The images a Containerfile is FROM (not ``scratch``, not its own earlier stages)."""
    stages: set[str] = set()
    bases = []
    for line in containerfile.splitlines():
        words = line.split()
        if not words or words[0].upper() != "FROM":
            continue
        args = [word for word in words[1:] if not word.startswith("--")]
        if not args:
            continue
        if args[0].lower() != "scratch" and args[0].lower() not in stages:
            bases.append(args[0])
        if len(args) >= 3 and args[1].upper() == "AS":
            stages.add(args[2].lower())
    return bases


def _context_path(context: Path, name: str) -> Path:
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ValueError(f"build file name {name!r} must be a relative path inside the context")
    return context / relative


def build_image(tag: str, containerfile: str, files: Mapping[str, bytes | str] | None = None) -> str:
    """``tag`` built by ``podman build`` from ``containerfile`` and ``files`` (context-relative name ->
    content; a script (``#!``) or an ELF binary is made executable), with ``--network host``; rebuilt only when
    the Containerfile, a file or a base image changed. Returns ``tag``."""
    runtime = podman()
    files = dict(files or {})
    contents = {name: data.encode() if isinstance(data, str) else data for name, data in files.items()}
    base_ids = [f"{base}={image_id(runtime, base) or 'absent'}" for base in _bases(containerfile)]
    inputs = _digest(RECIPE_VERSION, containerfile, *base_ids,
                     *(part for name in sorted(contents) for part in (name, contents[name])))
    with _lock(tag):
        if image_inputs(runtime, tag) == inputs:
            return tag
        before = image_id(runtime, tag)
        with tempfile.TemporaryDirectory(prefix="build-", dir=cache_dir()) as folder:
            context = Path(folder)
            (context / "Containerfile").write_text(containerfile)
            for name, data in contents.items():
                path = _context_path(context, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                path.chmod(0o755 if data.startswith((b"#!", b"\x7fELF")) else 0o644)
            # --layers=false: one layer committed at the end, no intermediate images (the cache is the label)
            _run(runtime, "build", "--layers=false", "--network", "host", *runtime.run_flags(),
                 "--label", f"{INPUTS_LABEL}={inputs}", "-t", tag, "-f", str(context / "Containerfile"), str(context),
                 timeout=BUILD_TIMEOUT_S)
        _forget(runtime, before)
    return tag


def is_static_elf(path: Path) -> bool:
    """True for a 64-bit little-endian ELF executable with no program interpreter (it needs no libc)."""
    try:
        with open(path, "rb") as binary:
            header = binary.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return False
            phoff, = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            binary.seek(phoff)
            table = binary.read(phentsize * phnum)
    except OSError:
        return False
    pt_interp = 3
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != pt_interp for i in range(phnum))


def static_busybox() -> Path | None:
    """Debian's static busybox (busybox-static's /bin/busybox); the dynamic one cannot run FROM scratch."""
    for candidate in ("/bin/busybox", "/usr/bin/busybox", shutil.which("busybox") or ""):
        if candidate and is_static_elf(Path(candidate)):
            return Path(candidate)
    return None


def ensure_busybox_image() -> str:
    found = static_busybox()
    if found is None:
        unavailable(f"no static busybox (the busybox-static package; {INSTALL_HINT})")
    return build_image(BUSYBOX_IMAGE, BUSYBOX_CONTAINERFILE, {"busybox": found.read_bytes()})


# -- a local registry ----------------------------------------------------------------------------------------


def dockerconfigjson(host: str, user: str, password: str) -> str:
    """The ``.dockerconfigjson`` of a ``kubernetes.io/dockerconfigjson`` Secret for one registry."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"username": user, "password": password, "auth": auth}}})


@dataclass
class Registry:
    """A running registry: where it is, its one user's credentials, and a registries.conf marking it insecure
    (it speaks plain HTTP): point ``CONTAINERS_REGISTRIES_CONF`` at it (:meth:`env`) for millpond's pulls."""

    host: str  # "127.0.0.1:PORT"
    user: str
    password: str = field(repr=False)
    registries_conf: Path
    mirror_conf: Path  # registries_conf, and the registry as docker.io's mirror ("python:3.11" pulled from it)
    runtime: ContainerRuntime = field(repr=False)
    folder: Path = field(repr=False)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def env(self, mirror_docker_io: bool = False) -> dict[str, str]:
        """The environment a pull from it needs; ``mirror_docker_io``: ``docker.io`` names are looked up here
        first (push ``library/python:3.11`` and ``python:3.11`` pulls from it; what is not here falls back
        to docker.io, unreachable here, and the pull fails naming both). Images pulled under docker.io names
        are the test's to remove."""
        return {"CONTAINERS_REGISTRIES_CONF": str(self.mirror_conf if mirror_docker_io else self.registries_conf)}

    def dockerconfigjson(self, password: str | None = None) -> str:
        return dockerconfigjson(self.host, self.user, self.password if password is None else password)

    def push(self, local_ref: str, repo_tag: str) -> str:
        """Push the local image ``local_ref`` as ``repo_tag`` ("team/app:1"); its remote reference."""
        remote = f"{self.host}/{repo_tag}"
        _run(self.runtime, "push", "--tls-verify=false", "--creds", f"{self.user}:{self.password}",
             local_ref, f"docker://{remote}", timeout=BUILD_TIMEOUT_S)
        return remote

    def stop(self) -> None:
        """End the registry, drop the names its images got in the local store, remove its storage."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        names = subprocess.run(self.runtime.argv("images", "--format", "{{.Repository}}:{{.Tag}}"),
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout.split()
        pulled = [name for name in names if name.startswith(f"{self.host}/")]
        if pulled:  # untags them (the layers are the pushed images'); an image a container still uses stays
            subprocess.run(self.runtime.argv("rmi", *pulled), capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        shutil.rmtree(self.folder, ignore_errors=True)


def _answers(url: str) -> int | None:
    """The HTTP status ``url`` answers with; None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code
    except (OSError, ValueError):
        return None


def start_registry(runtime: ContainerRuntime) -> Registry:
    """Debian's docker-registry on a free loopback port, storage in a temporary folder, htpasswd (bcrypt) auth."""
    binary = shutil.which("docker-registry")
    if binary is None:
        unavailable(f"docker-registry is not installed ({INSTALL_HINT})")
    if shutil.which("htpasswd") is None:
        unavailable(f"htpasswd is not installed (apache2-utils; {INSTALL_HINT})")
    folder = Path(tempfile.mkdtemp(prefix="millpond-registry-"))
    user, password = "millpond", secrets.token_urlsafe(12)
    made = subprocess.run(["htpasswd", "-Bbn", user, password], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    (folder / "htpasswd").write_text(made.stdout)
    port = free_ports(1)[0]
    host = f"127.0.0.1:{port}"
    (folder / "config.yml").write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": host, "secret": secrets.token_hex(16)},
        "auth": {"htpasswd": {"realm": "millpond-test", "path": str(folder / "htpasswd")}},
    }, indent=1))
    conf = folder / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "{host}"\ninsecure = true\n')
    mirror = folder / "registries-mirror.conf"
    mirror.write_text(conf.read_text() + '\n[[registry]]\nprefix = "docker.io"\nlocation = "docker.io"\n\n'
                      f'[[registry.mirror]]\nlocation = "{host}"\ninsecure = true\n')
    log = open(folder / "registry.log", "wb")  # noqa: SIM115 - the registry writes it while it runs
    process = subprocess.Popen([binary, "serve", str(folder / "config.yml")], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
    log.close()
    registry = Registry(host, user, password, conf, mirror, runtime, folder, process)
    deadline = time.monotonic() + REGISTRY_START_S
    while _answers(f"http://{host}/v2/") != 401:  # up, and asking for credentials
        if process.poll() is not None or time.monotonic() > deadline:
            tail = _read(folder / "registry.log")[-2000:]
            registry.stop()
            pytest.fail(f"docker-registry did not start on {host}:\n{tail}")
        time.sleep(0.1)
    return registry


def millpond_containers(label_token: str | None = None, runtime: ContainerRuntime | None = None) -> list[str]:
    """Ids of the running containers millpond started (labelled ``io.millpond.engine``; with ``label_token``,
    that engine's only): what a "no container left" assertion expects to be empty."""
    label = ENGINE_LABEL if label_token is None else f"{ENGINE_LABEL}={label_token}"
    return sweep.labelled(runtime or podman(), label, running_only=True)


# -- fixtures (tests/conftest.py loads this module as a plugin) ------------------------------------------------


@pytest.fixture(scope="session", name="podman")
def podman_fixture() -> ContainerRuntime:
    return podman()


@pytest.fixture(scope="session")
def python_image(podman: ContainerRuntime) -> str:
    return ensure_python_image(podman)


@pytest.fixture(scope="session")
def busybox_image(podman: ContainerRuntime) -> str:
    return ensure_busybox_image()


@pytest.fixture(scope="session")
def registry(podman: ContainerRuntime) -> Iterator[Registry]:
    started = start_registry(podman)
    try:
        yield started
    finally:
        started.stop()
